// The README's first command, `tools/deno.sh task demo` (tools/demo.ts), run as the README says,
// in its embedded mode (no cluster answers: the in-memory Kubernetes API). It must show the
// operator's work, exit 0, and leave nothing behind: the embedded API's directory (its kubeconfig,
// with the token) goes with it, whether it ends by `--once` or by SIGTERM (as Ctrl-C).
import assert from "node:assert/strict";

const ROOT = new URL("..", import.meta.url).pathname;
const opts = { sanitizeResources: false, sanitizeOps: false };

/** A running demo: its output so far, and a private TMPDIR where its files would stay behind. */
function startDemo(args: string[], tmp: string) {
  const child = new Deno.Command("bash", {
    args: ["tools/deno.sh", "task", "demo", ...args],
    cwd: ROOT,
    env: {
      // No cluster: the kubeconfig named does not exist, so the demo serves the embedded API.
      KUBECONFIG: `${tmp}/no-such-kubeconfig`,
      TMPDIR: tmp,
      NO_COLOR: "1",
    },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let output = "";
  const drain = async (stream: ReadableStream<Uint8Array>) => {
    for await (const text of stream.pipeThrough(new TextDecoderStream())) output += text;
  };
  const drained = Promise.all([drain(child.stdout), drain(child.stderr)]);
  // Bounded: a demo that hangs is killed (and the test fails on its exit code).
  const deadline = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* gone */ }
  }, 60_000);
  const status = child.status.then(async (s) => {
    clearTimeout(deadline);
    // A process it left behind would hold the pipes open: the output read by then is enough.
    await Promise.race([drained, new Promise((r) => setTimeout(r, 5_000))]);
    return s;
  });
  return {
    child,
    status,
    output: () => output,
    /** Resolves when the output contains `text`; rejects if the demo ends first. */
    async until(text: string): Promise<void> {
      while (!output.includes(text)) {
        const ended = await Promise.race([
          status.then(() => true),
          new Promise<false>((r) => setTimeout(() => r(false), 100)),
        ]);
        if (ended && !output.includes(text)) {
          throw new Error(`the demo ended before "${text}":\n${output}`);
        }
      }
    },
  };
}

/**
 * The processes still running with the demo's private TMPDIR (its children inherit it), killed
 * (SIGKILL) so that a failing test leaves none behind either.
 */
async function strays(tmp: string): Promise<string[]> {
  const found: string[] = [];
  for await (const entry of Deno.readDir("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const environ = await Deno.readTextFile(`/proc/${entry.name}/environ`);
      if (!environ.split("\0").includes(`TMPDIR=${tmp}`)) continue;
      const cmdline = await Deno.readTextFile(`/proc/${entry.name}/cmdline`);
      found.push(`${entry.name}: ${cmdline.replaceAll("\0", " ").trim()}`);
      Deno.kill(Number(entry.name), "SIGKILL");
    } catch { /* gone, or not ours */ }
  }
  return found;
}

/** What the demo left in its private TMPDIR. */
async function leftovers(tmp: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(tmp)) names.push(entry.name);
  return names.sort();
}

function assertShowedTheWork(output: string): void {
  assert.match(output, /No cluster answers: starting the embedded \(in-memory\) Kubernetes API/);
  assert.match(output, /What the operator did to the object/);
  assert.match(output, /status: \{"create_fn":/, output);
  assert.match(output, /kopf\.zalando\.org\/last-handled-configuration: \{/, output);
  assert.doesNotMatch(output, /^error:/m, output);
}

/**
 * Runs the demo with `args` in a private TMPDIR, lets `drive` act on it, then checks that it
 * exited 0 and left no process and no file behind (and cleans up whatever it left).
 */
async function checkDemo(
  args: string[],
  drive: (demo: ReturnType<typeof startDemo>, tmp: string) => Promise<void>,
): Promise<ReturnType<typeof startDemo>> {
  const tmp = await Deno.makeTempDir({ prefix: "kopf-demo-test-" });
  try {
    const demo = startDemo(args, tmp);
    await drive(demo, tmp);
    const { code } = await demo.status;
    assert.deepEqual(await strays(tmp), [], "no process is left running (the operator)");
    assert.equal(code, 0, demo.output());
    assert.deepEqual(await leftovers(tmp), [], "the embedded API's directory is removed");
    return demo;
  } finally {
    await strays(tmp);
    await Deno.remove(tmp, { recursive: true });
  }
}

Deno.test(
  "demo --once: shows the operator's work in the embedded API, exits 0, leaves no files",
  opts,
  async () => {
    const demo = await checkDemo(["--once"], async () => {});
    assertShowedTheWork(demo.output());
  },
);

Deno.test(
  "demo: SIGTERM stops it as Ctrl-C does: exit 0, the operator and the embedded API gone",
  opts,
  async () => {
    await checkDemo([], async (demo, tmp) => {
      await demo.until("Press Ctrl-C to stop.");
      assertShowedTheWork(demo.output());
      const kubeconfig = /export KUBECONFIG=(\S+)/.exec(demo.output())?.[1];
      assert.ok(kubeconfig && kubeconfig.startsWith(`${tmp}/kopf-emulator-`), demo.output());
      assert.ok((await Deno.stat(kubeconfig)).isFile, "the kubeconfig exists while it runs");
      demo.child.kill("SIGTERM");
    });
  },
);

Deno.test(
  "demo: SIGTERM while it is still starting (the operator just spawned) stops it all the same: exit 0, nothing left",
  opts,
  async () => {
    await checkDemo([], async (demo) => {
      await demo.until("Running: kopf run");
      demo.child.kill("SIGTERM");
    });
  },
);
