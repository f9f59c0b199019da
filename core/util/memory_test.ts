import assert from "node:assert/strict";
import { collectGarbage, executableMappings, releaseMemory } from "./memory.ts";

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

Deno.test("executableMappings() finds the executable's read-only mappings, never writable ones or other files", () => {
  const exe = "/opt/my operator/bin/deno";
  const maps = [
    "55d0c0000000-55d0c2000000 r--p 00000000 fd:01 1234 /opt/my operator/bin/deno",
    "55d0c2000000-55d0c6000000 r-xp 02000000 fd:01 1234 /opt/my operator/bin/deno",
    "55d0c6000000-55d0c6400000 rw-p 06000000 fd:01 1234 /opt/my operator/bin/deno",
    "7f0000000000-7f0000100000 r-xp 00000000 fd:01 99 /usr/lib/x86_64-linux-gnu/libc.so.6",
    "7f0000200000-7f0000300000 rw-p 00000000 00:00 0 ",
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]",
    "",
  ].join("\n");
  assert.deepEqual(executableMappings(maps, exe), [
    { start: 0x55d0c0000000n, length: 0x2000000n },
    { start: 0x55d0c2000000n, length: 0x4000000n },
  ]);
  assert.deepEqual(executableMappings(maps, "/usr/bin/deno"), []);
});

Deno.test({
  name:
    "pageOutExecutable() gives the executable's resident pages back (a copy no other process maps)",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    // The Deno executable of this test is mapped by other processes too, whose pages stay: a
    // private copy, as an operator's own binary in its container is.
    const dir = await Deno.makeTempDir({ prefix: "kopf-pageout-" });
    try {
      const copy = `${dir}/deno`;
      await Deno.copyFile(Deno.execPath(), copy);
      await Deno.chmod(copy, 0o755);
      const memory = new URL("./memory.ts", import.meta.url).href;
      const script = `import { pageOutExecutable } from ${JSON.stringify(memory)};
        const status = () => { try { return Deno.readTextFileSync("/proc/self/status"); } catch { return ""; } };
        const file = () => Number(/RssFile:\\s+(\\d+)/.exec(status())?.[1]);
        const before = file();
        const advised = pageOutExecutable();
        console.log(JSON.stringify({ before, after: file(), advised }));`;
      await Deno.writeTextFile(`${dir}/probe.ts`, script);
      const run = async (args: string[]) => {
        const out = await new Deno.Command(copy, {
          args: ["run", "--no-config", ...args, `${dir}/probe.ts`],
          stdout: "piped",
          stderr: "inherit",
          env: { DENO_NO_UPDATE_CHECK: "1" },
        }).output();
        assert.ok(out.success);
        return JSON.parse(new TextDecoder().decode(out.stdout)) as {
          before: number;
          after: number;
          advised: number | null;
        };
      };
      const paged = await run(["-A"]);
      assert.ok(paged.advised !== null && paged.advised > 20 * 2 ** 20, JSON.stringify(paged));
      // KiB: at least 10 MiB of the executable's resident pages went.
      assert.ok(paged.before - paged.after > 10 * 1024, JSON.stringify(paged));
      // Without the FFI permission (and so without /proc/self): nothing is tried.
      const denied = await run(["-A", "--deny-ffi"]);
      assert.equal(denied.advised, null);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
