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
 * `gc()` is not exposed by default: it is taken from `globalThis.gc` (`--v8-flags=--expose-gc`,
 * as `kopf build`, the image and `tools/kopf` run an operator) or by setting that flag at run time
 * and fetching the function from a new V8 context (`node:v8` + `node:vm`, loaded on the first
 * collection: ~2 MiB an operator need not carry before its first burst is over). The two differ:
 * the exposed one takes V8's options — one plain mark-compact within a burst (`"major"`), or the
 * compacting passes that give pages back (`"reduce"`) — while the one fetched at run time always
 * acts as a low-memory notification: the compacting passes, and V8 also drops compiled code, which
 * is compiled again afterwards. Within a burst that cost a quarter of a restart's CPU (6,000
 * handled objects: 0.80 → 0.56 s; a 5,000-object backlog 1.63 → 1.29 s; bench/backlog_probe.ts).
 * `malloc_trim` is called through FFI, only on Linux with glibc and only when the FFI permission
 * is already granted (`-A`, or `--allow-ffi`); elsewhere it is skipped.
 *
 * {@link pageOutExecutable} gives back the resident pages of the `deno` executable (or of the
 * binary `kopf build` made): about 30 MiB of machine code and read-only data are in memory once
 * the operator has started, much of it used only by start-up (the module loader, V8's snapshot,
 * the kubeconfig's parser) or by the last burst. They are clean file pages, so the kernel may
 * drop them and read them in again on the next use (`madvise(MADV_PAGEOUT)`, Linux 5.4+); pages
 * that another process maps too (the same executable run twice) stay.
 * @module
 */

/** The pause between the collection and the trim (see {@link releaseMemory}). */
const SETTLE_MS = 50;

/**
 * What a collection is for: `"major"`, one full collection within a burst (bounds the heap's
 * growth); `"reduce"`, the collection after a burst that also gives the heap's pages back.
 */
export type Collection = "major" | "reduce";

type Collector = (kind: Collection) => void;

let collector: Collector | null | undefined;
let libc: Libc | null | undefined;

/** V8's options of the exposed `gc()` (without them it runs a young-generation collection). */
interface GcOptions {
  readonly type: "major";
  readonly execution: "sync";
  readonly flavor?: "last-resort";
}

async function findCollector(): Promise<Collector | null> {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === "function") {
    const gc = exposed as (options: GcOptions) => void;
    return (kind) =>
      gc(
        kind === "major"
          ? { type: "major", execution: "sync" }
          : { type: "major", execution: "sync", flavor: "last-resort" },
      );
  }
  try {
    const [{ setFlagsFromString }, { runInNewContext }] = await Promise.all([
      import("node:v8"),
      import("node:vm"),
    ]);
    setFlagsFromString("--expose-gc");
    const gc: unknown = runInNewContext("gc");
    // A low-memory notification whatever it is asked (see the module's documentation).
    return typeof gc === "function" ? () => (gc as () => void)() : null;
  } catch {
    return null;
  }
}

/** `madvise`'s advice to reclaim the pages now (Linux 5.4+). */
const MADV_PAGEOUT = 21;

/** The C library's functions this module calls; each `null` where the library lacks it. */
interface Libc {
  readonly trim: (() => void) | null;
  readonly pageOut: ((start: bigint, length: bigint) => boolean) | null;
}

/** The C library, opened once for both functions; `null` when FFI is not possible here. */
function openLibc(): Libc | null {
  if (Deno.build.os !== "linux") return null;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return null;
    const { symbols } = Deno.dlopen("libc.so.6", {
      // Optional: a C library without one (musl has no malloc_trim) still gives the other.
      malloc_trim: { parameters: ["usize"], result: "i32", optional: true },
      madvise: { parameters: ["usize", "usize", "i32"], result: "i32", optional: true },
    });
    const { malloc_trim: mallocTrim, madvise } = symbols;
    return {
      trim: mallocTrim ? () => void mallocTrim(0n) : null,
      pageOut: madvise ? (start, length) => madvise(start, length, MADV_PAGEOUT) === 0 : null,
    };
  } catch {
    return null; // no libc.so.6 (e.g. a musl system)
  }
}

/**
 * The read-only mappings of the running executable in `/proc/self/maps` text: its machine code
 * and read-only data, never its writable data (which is not file-backed once written).
 * @param maps The text of `/proc/self/maps`.
 * @param executable The executable's path (`Deno.execPath()`).
 * @returns Start and length of each mapping, in bytes.
 */
export function executableMappings(
  maps: string,
  executable: string,
): { start: bigint; length: bigint }[] {
  const found: { start: bigint; length: bigint }[] = [];
  for (const line of maps.split("\n")) {
    // start-end perms offset dev inode path (the path may hold spaces)
    const match = /^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+ +(.+)$/.exec(line);
    if (!match || match[4] !== executable || match[3]!.includes("w")) continue;
    const start = BigInt(`0x${match[1]}`), end = BigInt(`0x${match[2]}`);
    if (end > start) found.push({ start, length: end - start });
  }
  return found;
}

/**
 * Advises the kernel to reclaim the resident pages of the running executable now
 * (`madvise(MADV_PAGEOUT)` on its read-only mappings; see the module's documentation). What is
 * used again is read in again, from the page cache or the disk. Only on Linux, and only when
 * the FFI permission is granted and `/proc/self/maps` can be read (Deno reads `/proc/self` only
 * with all permissions: `-A`).
 * @returns The bytes advised (mapped, not necessarily resident), or `null` when not possible here.
 */
export function pageOutExecutable(): number | null {
  if (libc === undefined) libc = openLibc(); // null too is kept: not possible here
  const pager = libc?.pageOut;
  if (!pager) return null;
  let maps: string;
  try {
    maps = Deno.readTextFileSync("/proc/self/maps");
  } catch {
    return null; // Deno reads /proc/self only with all permissions granted
  }
  let advised = 0;
  for (const { start, length } of executableMappings(maps, Deno.execPath())) {
    if (pager(start, length)) advised += Number(length);
  }
  return advised;
}

/**
 * Returns the C allocator's free pages to the system now (glibc's `malloc_trim(0)`, through
 * FFI; see the module's documentation), in every arena: V8's background threads (the optimising
 * compiler's zones, the collector's work lists) allocate in arenas of their own and leave them
 * mostly free once their work is done — 7–17 MiB resident in a 10,000-object backlog
 * (docs/performance.md, round 21). What is allocated there again faults its pages in again.
 * @returns `false` when not possible here (not glibc, no FFI permission): nothing happened.
 */
export function trimAllocator(): boolean {
  if (libc === undefined) libc = openLibc(); // null too is kept: not possible here
  const trimmer = libc?.trim ?? null;
  trimmer?.();
  return trimmer !== null;
}

/**
 * Runs one full, blocking garbage collection (tens of milliseconds for a heap of tens of MiB).
 * @param kind `"major"` within a burst, `"reduce"` (the default) to give pages back after one.
 * @returns `false` when the runtime offers no way to trigger one (nothing happened).
 */
export async function collectGarbage(kind: Collection = "reduce"): Promise<boolean> {
  if (collector === undefined) collector = await findCollector(); // null too is kept
  if (!collector) return false;
  collector(kind);
  return true;
}

/**
 * Returns freed memory to the system: a full garbage collection ({@link collectGarbage}), then,
 * once the event loop has run for a moment (50 ms), glibc's `malloc_trim(0)` where available.
 * @returns What ran: the collection, the trim, both or neither.
 */
export async function releaseMemory(): Promise<{ collected: boolean; trimmed: boolean }> {
  const collected = await collectGarbage("reduce");
  if (libc === undefined) libc = openLibc(); // null too is kept: not possible here
  if (!libc?.trim) return { collected, trimmed: false };
  // What the collection released is dropped on the native side a moment later: a closed TLS
  // connection's buffers (~100 KiB each) only when the event loop next runs. Trimming at once
  // kept 6 MiB of a 10,000-object burst resident (bench/rss_probe.ts, tests/idle_gc_test.ts).
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  return { collected, trimmed: trimAllocator() };
}
