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
