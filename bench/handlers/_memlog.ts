/**
 * Diagnostic for the benchmark's handlers (`BENCH_MEMLOG=ms`): the process's memory as Deno
 * sees it (RSS, V8 heap, external buffers), every so often, on stderr. Off without the variable.
 * @module
 */
const every = Number(Deno.env.get("BENCH_MEMLOG") ?? 0);
if (every > 0) {
  const mib = (n: number) => (n / 1048576).toFixed(1);
  setInterval(() => {
    const m = Deno.memoryUsage();
    console.error(
      `memlog rss=${mib(m.rss)} heapTotal=${mib(m.heapTotal)} heapUsed=${mib(m.heapUsed)} ` +
        `external=${mib(m.external)}`,
    );
  }, every);
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
