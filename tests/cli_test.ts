/**
 * `kopf run` as users meet it: startup errors as one `error:` line with exit code 1, unknown
 * resources reported while the operator keeps running, log formats, and a clean exit on SIGTERM.
 */

import assert from "node:assert/strict";
import { spawnOperator } from "./_operator.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

async function runToExit(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; lines: string[] }> {
  const op = await spawnOperator(args, env);
  const code = await Promise.race([
    op.exited,
    new Promise<number>((_, reject) =>
      setTimeout(() => reject(new Error(`did not exit: ${op.lines.join("\n")}`)), 30_000)
    ),
  ]);
  return { code, lines: op.lines.filter((l) => l.trim()) };
}

Deno.test("startup errors are one line and exit code 1 (CLI-*)", opts, async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/broken.ts`, "export const x = ;\n");
    await Deno.writeTextFile(`${dir}/throws.ts`, 'throw new Error("boom at import");\n');
    await Deno.writeTextFile(`${dir}/ok.ts`, "export {};\n");
    await Deno.writeTextFile(`${dir}/kubeconfig`, "clusters: [oops\n");
    const unreachable = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;
    await Deno.writeTextFile(`${dir}/unreachable`, unreachable);
    const cases: Array<[string[], Record<string, string>, RegExp]> = [
      [[`${dir}/broken.ts`], {}, /^error: Cannot load handlers from .*broken\.ts: .*/],
      [[`${dir}/throws.ts`], {}, /^error: Cannot load handlers from .*throws\.ts: boom at import$/],
      [
        [`${dir}/missing.ts`],
        {},
        /^error: Cannot load handlers from .*missing\.ts: No such file: /,
      ],
      [
        [`${dir}/ok.ts`, "-A", "-n", "x"],
        {},
        /^error: --namespace and --all-namespaces are mutually exclusive$/,
      ],
      [[`${dir}/ok.ts`, "--log-format", "xml"], {}, /^error: Unknown log format 'xml'/],
      [[`${dir}/ok.ts`], { KUBECONFIG: `${dir}/kubeconfig` }, /^error: .*kubeconfig/i],
      [
        [`${dir}/ok.ts`],
        { KUBECONFIG: `${dir}/unreachable` },
        /^error: Cannot reach the API server at https:\/\/127\.0\.0\.1:1: /,
      ],
    ];
    for (const [args, env, pattern] of cases) {
      const { code, lines } = await runToExit([...args, "--standalone"], env);
      assert.equal(code, 1, `${args.join(" ")}: ${lines.join("\n")}`);
      const errors = lines.filter((l) => l.startsWith("error:"));
      assert.equal(errors.length, 1, `one error line for ${args.join(" ")}: ${lines.join("\n")}`);
      assert.match(errors[0]!, pattern);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test(
  "an unknown resource is reported once and the operator keeps running; SIGTERM exits 0",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cli");
    const dir = await Deno.makeTempDir();
    try {
      const mod = new URL("../mod.ts", import.meta.url).href;
      await Deno.writeTextFile(
        `${dir}/h.ts`,
        `import { on } from "${mod}";\n` +
          `on.create("nosuchthings", function ghost() {});\n` +
          `on.create("kopfexamples", function real() { return 1; });\n`,
      );
      await using op = await spawnOperator([
        `${dir}/h.ts`,
        "-n",
        namespace,
        "--log-format",
        "json",
        "--standalone",
      ]);
      const line = await op.waitForLine(/No resource matches/);
      const record = JSON.parse(line);
      assert.equal(record.severity, "error");
      assert.match(
        record.message,
        /No resource matches name="nosuchthings": is its CRD installed\?/,
      );
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "c" },
      }, {
        namespace,
      });
      await eventually(
        async () => (await client.api.get(KOPFEXAMPLES, "c", { namespace })).status,
        15_000,
        "handled",
      );
      const handled = JSON.parse(await op.waitForLine(/Handler 'real' succeeded/));
      assert.deepEqual(handled.object, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        name: "c",
        uid: handled.object.uid,
        namespace,
      });
      assert.equal(
        op.lines.filter((l) => l.includes("No resource matches")).length,
        1,
        "reported once",
      );
      assert.equal(await op.stop(), 0);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test(
  "--embedded runs the example operator with no cluster; kubectl-style clients can talk to it",
  opts,
  async () => {
    const child = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--no-check",
        "cli.ts",
        "run",
        "examples/01-minimal/example.ts",
        "--embedded",
        "--verbose",
      ],
      env: { KUBECONFIG: "/nonexistent/kubeconfig", NO_COLOR: "1" }, // no cluster: must not matter
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lines: string[] = [];
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
        lines.push(
          ...chunk.split("\n"),
        );
      }
    };
    const pumping = Promise.all([pump(child.stdout), pump(child.stderr)]);
    try {
      const line = await eventually(
        () => lines.find((l) => l.includes("export KUBECONFIG=")),
        30_000,
        "the kubeconfig line",
      );
      const kubeconfig = line.split("export KUBECONFIG=")[1]!.trim();
      const { KubeClient } = await import("../core/client/client.ts");
      using client = await KubeClient.connect({ kubeconfig });
      await eventually(
        () => lines.some((l) => l.includes("Watching kopfexamples")),
        30_000,
        "watching",
      );
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "e1" },
        spec: { field: "x" },
      }, { namespace: "default" });
      const status = await eventually(async () =>
        (await client.api.get(KOPFEXAMPLES, "e1", { namespace: "default" })).status
      );
      assert.deepEqual(status, { create_fn: { message: "hello world" } });
    } finally {
      child.kill("SIGTERM");
      assert.equal((await child.status).code, 0);
      await pumping;
    }
  },
);
