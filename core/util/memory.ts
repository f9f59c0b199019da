/**
 * Giving memory back to the system after a burst of work (a full garbage collection, then the C
 * allocator's free pages).
 *
 * An idle operator allocates little, so neither V8 nor the C allocator shrinks after a load's
 * peak. Measured after handling 10,000 objects (bench/rss_probe.ts): 150 MiB resident with a live
 * JavaScript heap of 23 MiB; a full collection shrinks the heap's pages (heapTotal 193 → 25 MiB)
 * but not the resident size, which glibc's allocator keeps for the buffers that the runtime's
 * native side freed (HTTP bodies, JSON text); `malloc_trim(0)` then returns them: 150 → 91 MiB.
 *
 * `gc()` is not exposed by default: it is taken from `globalThis.gc` (`--v8-flags=--expose-gc`)
 * or by setting that flag at run time and fetching the function from a new V8 context
 * (`node:v8` + `node:vm`, loaded on the first collection: ~2 MiB an operator need not carry
 * before its first burst is over). `malloc_trim` is called through FFI, only on Linux with glibc and only
 * when the FFI permission is already granted (`-A`, or `--allow-ffi`); elsewhere it is skipped.
 * @module
 */

/** The pause between the collection and the trim (see {@link releaseMemory}). */
const SETTLE_MS = 50;

let collector: (() => void) | null | undefined;
let trimmer: (() => void) | null | undefined;

async function findCollector(): Promise<(() => void) | null> {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === "function") return exposed as () => void;
  try {
    const [{ setFlagsFromString }, { runInNewContext }] = await Promise.all([
      import("node:v8"),
      import("node:vm"),
    ]);
    setFlagsFromString("--expose-gc");
    const gc: unknown = runInNewContext("gc");
    return typeof gc === "function" ? gc as () => void : null;
  } catch {
    return null;
  }
}

function findTrimmer(): (() => void) | null {
  if (Deno.build.os !== "linux") return null;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    const libc = Deno.dlopen("libc.so.6", {
      malloc_trim: { parameters: ["usize"], result: "i32" },
    });
    return () => void libc.symbols.malloc_trim(0n);
  } catch {
    return null; // not glibc (no malloc_trim), or no libc.so.6
  }
}

/**
 * Runs one full, blocking garbage collection (tens of milliseconds for a heap of tens of MiB).
 * @returns `false` when the runtime offers no way to trigger one (nothing happened).
 */
export async function collectGarbage(): Promise<boolean> {
  collector ??= await findCollector();
  if (!collector) return false;
  collector();
  return true;
}

/**
 * Returns freed memory to the system: a full garbage collection ({@link collectGarbage}), then,
 * once the event loop has run for a moment (50 ms), glibc's `malloc_trim(0)` where available.
 * @returns What ran: the collection, the trim, both or neither.
 */
export async function releaseMemory(): Promise<{ collected: boolean; trimmed: boolean }> {
  const collected = await collectGarbage();
  trimmer ??= findTrimmer();
  // What the collection released is dropped on the native side a moment later: a closed TLS
  // connection's buffers (~100 KiB each) only when the event loop next runs. Trimming at once
  // kept 6 MiB of a 10,000-object burst resident (bench/rss_probe.ts, tests/idle_gc_test.ts).
  if (trimmer) await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  trimmer?.();
  return { collected, trimmed: trimmer !== null };
}
