import assert from "node:assert/strict";
import { collectGarbage, releaseMemory } from "./memory.ts";

Deno.test("collectGarbage() frees the heap of a finished burst", async () => {
  assert.ok(await collectGarbage(), "no way to trigger a garbage collection");
  const before = Deno.memoryUsage().heapUsed;
  let junk: unknown[] | undefined = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `x${i}` }));
  const grown = Deno.memoryUsage().heapUsed - before;
  assert.equal(junk.length, 200_000);
  junk = undefined;
  assert.ok(await collectGarbage());
  const left = Deno.memoryUsage().heapUsed - before;
  assert.ok(left < grown / 5, `heap grew by ${grown} bytes, ${left} left after the collection`);
});

Deno.test("releaseMemory() collects and, on Linux with glibc, trims the allocator", async () => {
  const { collected, trimmed } = await releaseMemory();
  assert.ok(collected);
  const ldd = Deno.build.os === "linux"
    ? new Deno.Command("ldd", { args: ["--version"], stderr: "null" }).outputSync()
    : undefined;
  const glibc = /glibc/i.test(new TextDecoder().decode(ldd?.stdout));
  assert.equal(trimmed, glibc);
});

/**
 * Runs collectGarbage(kind) in a process of its own with these V8 flags: V8's trace of its full
 * collections (written by V8 to stdout when the process ends: one kind per process).
 */
async function traced(v8Flags: string[], kind: string): Promise<string[]> {
  const memory = new URL("./memory.ts", import.meta.url).href;
  const script = `import { collectGarbage } from ${JSON.stringify(memory)};
    const keep = Array.from({ length: 100000 }, (_, i) => ({ i }));
    await collectGarbage(${JSON.stringify(kind)});
    console.log(keep.length);`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", `--v8-flags=${[...v8Flags, "--trace-gc"].join(",")}`, script],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.ok(out.success);
  return new TextDecoder().decode(out.stdout).split("\n").filter((l) => l.includes("Mark-Compact"));
}

Deno.test("collectGarbage() with the runtime flags (--expose-gc): a plain mark-compact within a burst, the compacting passes after one", async () => {
  const major = await traced(["--expose-gc"], "major");
  assert.equal(major.length, 1, major.join("\n"));
  assert.ok(!/\(reduce\)|low memory notification/.test(major[0]!), major[0]);
  const reduce = await traced(["--expose-gc"], "reduce");
  assert.ok(reduce.length >= 1 && reduce.every((l) => l.includes("(reduce)")), reduce.join("\n"));
  assert.ok(!reduce.some((l) => l.includes("low memory notification")), reduce.join("\n"));
});

Deno.test("collectGarbage() without --expose-gc still collects (the run-time gc: a low-memory notification)", async () => {
  const lines = await traced([], "major");
  assert.ok(lines.some((l) => l.includes("low memory notification")), lines.join("\n"));
});
