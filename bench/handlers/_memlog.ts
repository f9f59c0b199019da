/**
 * Diagnostic for the benchmark's handlers (`BENCH_MEMLOG=ms`): the process's memory as Deno
 * sees it (RSS, V8 heap, external buffers) and, with glibc, the C heap (`mallinfo2`), every so
 * often, on stderr. Off without the variable. `BENCH_HEAPSNAP` and `BENCH_MALLOCINFO`: below.
 * @module
 */
const every = Number(Deno.env.get("BENCH_MEMLOG") ?? 0);
if (every > 0) {
  const mib = (n: number) => (n / 1048576).toFixed(1);
  const malloc = nativeHeap();
  setInterval(() => {
    const m = Deno.memoryUsage();
    console.error(
      `memlog rss=${mib(m.rss)} heapTotal=${mib(m.heapTotal)} heapUsed=${mib(m.heapUsed)} ` +
        `external=${mib(m.external)}${malloc ? " " + malloc() : ""}`,
    );
  }, every);
}

/** glibc's `mallinfo2()`: the C heap's size, bytes in use and free (all arenas); null elsewhere. */
function nativeHeap(): (() => string) | null {
  try {
    const libc = Deno.dlopen("libc.so.6", {
      mallinfo2: { parameters: [], result: { struct: Array(10).fill("usize") } },
    });
    return () => {
      const view = new BigUint64Array(libc.symbols.mallinfo2().buffer);
      const mib = (n: bigint) => (Number(n) / 1048576).toFixed(1);
      // arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost
      return `arena=${mib(view[0]!)} mmapped=${mib(view[4]!)} inUse=${mib(view[7]!)} ` +
        `free=${mib(view[8]!)}`;
    };
  } catch {
    return null;
  }
}

// `BENCH_HEAPSNAP=FILE`: a heap snapshot (after a full collection) to FILE on SIGUSR2.
const snapshotPath = Deno.env.get("BENCH_HEAPSNAP");
if (snapshotPath) {
  Deno.addSignalListener("SIGUSR2", async () => {
    const { writeHeapSnapshot } = await import("node:v8");
    writeHeapSnapshot(snapshotPath);
    console.error(`heap snapshot: ${snapshotPath}`);
  });
}

// `BENCH_MALLOCINFO=FILE`: glibc's `malloc_info()` XML (per arena, free chunks by size) to FILE
// on SIGWINCH (SIGUSR1 would start Deno's inspector), right after a `malloc_trim(0)`.
const mallocInfoPath = Deno.env.get("BENCH_MALLOCINFO");
if (mallocInfoPath) {
  const libc = Deno.dlopen("libc.so.6", {
    fopen: { parameters: ["buffer", "buffer"], result: "pointer" },
    fclose: { parameters: ["pointer"], result: "i32" },
    malloc_info: { parameters: ["i32", "pointer"], result: "i32" },
    malloc_trim: { parameters: ["usize"], result: "i32" },
  });
  const cstr = (s: string) => new TextEncoder().encode(s + "\0");
  Deno.addSignalListener("SIGWINCH", () => {
    libc.symbols.malloc_trim(0n);
    const file = libc.symbols.fopen(cstr(mallocInfoPath), cstr("w"));
    libc.symbols.malloc_info(0, file);
    libc.symbols.fclose(file);
    console.error(`malloc info: ${mallocInfoPath}`);
  });
}
