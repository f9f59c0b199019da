/**
 * `kopf run` as users meet it: startup errors as one `error:` line with exit code 1, unknown
 * resources reported while the operator keeps running, log formats, and a clean exit on SIGTERM.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  captureLines,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  tempDir,
  terminate,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

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
  await using dir = await tempDir();
  await Deno.writeTextFile(`${dir.path}/broken.ts`, "export const x = ;\n");
  await Deno.writeTextFile(`${dir.path}/throws.ts`, 'throw new Error("boom at import");\n');
  await Deno.writeTextFile(`${dir.path}/ok.ts`, "export {};\n");
  const mod = new URL("../mod.ts", import.meta.url).href;
  await Deno.writeTextFile(
    `${dir.path}/nologin.ts`,
    `import { on } from "${mod}";\non.login(function nothing() { return null; });\n`,
  );
  await Deno.writeTextFile(`${dir.path}/kubeconfig`, "clusters: [oops\n");
  const unreachable = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;
  await Deno.writeTextFile(`${dir.path}/unreachable`, unreachable);
  // The real API server with a token it does not know: reachable, credentials refused (401).
  let server: string;
  {
    using client = await testClient();
    server = client.http.connection.server;
  }
  await Deno.writeTextFile(
    `${dir.path}/badtoken`,
    unreachable.replace("https://127.0.0.1:1", server).replace("token: t", "token: no-such-token"),
  );
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [[`${dir.path}/broken.ts`], {}, /^error: Cannot load handlers from .*broken\.ts: .*/],
    [
      [`${dir.path}/throws.ts`],
      {},
      /^error: Cannot load handlers from .*throws\.ts: boom at import$/,
    ],
    [
      [`${dir.path}/missing.ts`],
      {},
      /^error: Cannot load handlers from .*missing\.ts: No such file: /,
    ],
    [
      [`${dir.path}/ok.ts`, "-A", "-n", "x"],
      {},
      /^error: --namespace and --all-namespaces are mutually exclusive$/,
    ],
    [[`${dir.path}/ok.ts`, "--log-format", "xml"], {}, /^error: Unknown log format 'xml'/],
    [[`${dir.path}/ok.ts`], { KUBECONFIG: `${dir.path}/kubeconfig` }, /^error: .*kubeconfig/i],
    // A LoginError (ERR-11): no login handler gives credentials.
    [[`${dir.path}/nologin.ts`], {}, /^error: No login handler returned connection info/],
    [
      [`${dir.path}/ok.ts`],
      { KUBECONFIG: `${dir.path}/unreachable` },
      /^error: Cannot reach the API server at https:\/\/127\.0\.0\.1:1: /,
    ],
    [
      [`${dir.path}/ok.ts`],
      { KUBECONFIG: `${dir.path}/badtoken` },
      /^error: The API server at https:\/\/\S+ rejected the credentials from .*badtoken.*401/,
    ],
  ];
  for (const [args, env, pattern] of cases) {
    const { code, lines } = await runToExit([...args, "--standalone"], env);
    assert.equal(code, 1, `${args.join(" ")}: ${lines.join("\n")}`);
    const errors = lines.filter((l) => l.startsWith("error:"));
    assert.equal(errors.length, 1, `one error line for ${args.join(" ")}: ${lines.join("\n")}`);
    assert.match(errors[0]!, pattern);
  }
});

Deno.test(
  "an unknown resource is reported once and the operator keeps running; SIGTERM exits 0",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cli");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        `on.create("nosuchthings", function ghost() {});\n` +
        `on.create("kopfexamples", function real() { return 1; });\n`,
    );
    await using op = await spawnOperator([
      `${dir.path}/h.ts`,
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

/** Runs `kopf ARGS` (any command) to its exit, with the shared plane's kubeconfig. */
async function kopf(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; lines: string[] }> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", "cli.ts", ...args],
    env: { KUBECONFIG: await kubeconfigPath(), NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
    signal: AbortSignal.timeout(30_000),
  });
  const { code, stdout, stderr } = await child.output();
  const text = new TextDecoder().decode(stdout) + new TextDecoder().decode(stderr);
  return { code, lines: text.split("\n").filter((l) => l.trim()) };
}

Deno.test("kopf --version prints the version from deno.json (CLI-08)", opts, async () => {
  const config = JSON.parse(await Deno.readTextFile("deno.json"));
  const { code, lines } = await kopf(["--version"]);
  assert.equal(code, 0);
  assert.deepEqual(lines, [`kopf, version ${config.version}`]);
});

Deno.test(
  "options come from KOPF_<COMMAND>_<NAME> environment variables; the command line wins (CLI-08)",
  opts,
  async () => {
    const namespace = await testNamespace("cli-env");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        `on.probe(function answer() { return "yes"; });\n` +
        `on.event("configmaps", function seen() {});\n`,
    );
    const port = freePort();
    await using op = await spawnOperator([`${dir.path}/h.ts`], {
      KOPF_RUN_NAMESPACES: namespace,
      KOPF_RUN_STANDALONE: "true",
      KOPF_RUN_VERBOSE: "1",
      KOPF_RUN_LOG_FORMAT: "json",
      KOPF_RUN_LIVENESS_ENDPOINT: `http://127.0.0.1:${port}/healthz`,
    });
    const watching = JSON.parse(await op.waitForLine(/Watching configmaps/));
    assert.equal(watching.message, `Watching configmaps.v1 in ${namespace}`);
    const response = await eventually(
      () => fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined),
      15_000,
      "the liveness endpoint",
    );
    assert.deepEqual(await response.json(), { answer: "yes" });
    // Peering is detected before the streams start: without KOPF_RUN_STANDALONE, the absent
    // peering object would have been reported by now.
    assert.ok(!op.lines.some((l) => /falling back to the standalone mode/.test(l)));
    assert.equal(await op.stop(), 0);

    // The command line wins over the environment; unusable values are one error line.
    const bad = await kopf(["run", "nothing.ts"], { KOPF_RUN_STANDALONE: "maybe" });
    assert.equal(bad.code, 1);
    assert.deepEqual(bad.lines, [
      "error: KOPF_RUN_STANDALONE=maybe is not a boolean; use true or false",
    ]);
    const format = await kopf(["run", "nothing.ts", "--log-format", "xml"], {
      KOPF_RUN_LOG_FORMAT: "json",
    });
    assert.match(format.lines.join("\n"), /^error: Unknown log format 'xml'/);
    const peering = `no-such-peering-${crypto.randomUUID().slice(0, 8)}`;
    const frozen = await kopf(["freeze", "-t", "10"], { KOPF_FREEZE_PEERING: peering });
    assert.equal(frozen.code, 1);
    assert.match(frozen.lines.join("\n"), new RegExp(`error: Peering object .* '${peering}'`));
    // The logging options work on freeze/resume too (CLI-02): -d shows the request.
    const resumed = await kopf(["resume", "-P", `${peering}-cli`, "-d", "--log-format", "plain"], {
      KOPF_RESUME_PEERING: peering,
    });
    assert.equal(resumed.code, 1);
    assert.match(resumed.lines.join("\n"), new RegExp(`'${peering}-cli'`));
    assert.ok(
      resumed.lines.some((l) => /^PATCH \/apis\/kopf\.dev\/.* → 404 in \d+ ms$/.test(l)),
      resumed.lines.join("\n"),
    );
  },
);

Deno.test(
  "-d (--debug) logs the API traffic, -v (--verbose) does not; -L serves the liveness endpoint " +
    "(CLI-02, CLI-04, LOG-04, AUTH-12)",
  opts,
  async () => {
    const namespace = await testNamespace("cli-debug");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\non.event("configmaps", function seen() {});\n`,
    );
    const traffic = /^GET \/api → 200 in \d+ ms$/;
    for (const flag of ["-d", "-v"]) {
      const port = freePort();
      const op = await spawnOperator([
        `${dir.path}/h.ts`,
        flag,
        "-n",
        namespace,
        "--standalone",
        "--log-format",
        "plain",
        "-L",
        `http://127.0.0.1:${port}/healthz`,
      ]);
      try {
        // A debug line both flags show; the initial GET /api precedes it.
        await op.waitForLine(/^Watching configmaps\.v1 in /);
        const response = await eventually(
          () => fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined),
          15_000,
          "the liveness endpoint",
        );
        assert.equal(response.status, 200);
        await response.body?.cancel();
        const lines = op.lines.filter((l) => l.trim());
        const initiated = lines.indexOf("Initial authentication has been initiated.");
        const finished = lines.indexOf("Initial authentication has finished.");
        assert.ok(initiated >= 0 && finished > initiated, lines.join("\n"));
        assert.equal(
          lines.some((l) => traffic.test(l)),
          flag === "-d",
          `${flag}: API traffic ${flag === "-d" ? "logged" : "not logged"}:\n${lines.join("\n")}`,
        );
      } finally {
        assert.equal(await op.stop(), 0);
      }
    }
  },
);

Deno.test(
  "SIGTERM with a cleanup handler that never returns: the ultimate exiting timeout ends the " +
    "process with code 1 and says why (CFG-10, SUB-74)",
  opts,
  async () => {
    const namespace = await testNamespace("cli-exit");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        `on.startup(function limits({ settings }) {\n` +
        `  settings.process.ultimateExitingTimeout = 1;\n` +
        `});\n` +
        `on.cleanup(async function hang() {\n` +
        `  console.error("cleanup started");\n` +
        `  await new Promise(() => {}); // never settles, ignores its signal\n` +
        `});\n` +
        `on.event("configmaps", function seen() {});\n`,
    );
    const op = await spawnOperator([
      `${dir.path}/h.ts`,
      "-n",
      namespace,
      "--standalone",
      "--log-format",
      "plain",
    ]);
    await op.waitForLine(/Initial authentication has finished/);
    // stop() sends SIGTERM and SIGKILLs after 15 s: only the timeout can make the code 1.
    const code = await op.stop();
    assert.ok(op.lines.includes("cleanup started"), op.lines.join("\n"));
    assert.equal(code, 1, op.lines.join("\n"));
    assert.ok(
      op.lines.some((l) =>
        l ===
          "The graceful exit did not finish within 1 s " +
            "(settings.process.ultimateExitingTimeout); exiting forcefully."
      ),
      op.lines.join("\n"),
    );
  },
);

Deno.test(
  "a stop asked for at any point of the startup ends kopf run with 0, not with the stop's reason",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("startstop");
    const points = [
      /Initial authentication has been initiated/,
      /Initial authentication has finished/,
      /Default peering object is not found/,
    ];
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    for (const [i, point] of points.entries()) {
      // A module per run: this process's default registry keeps the handlers of earlier imports.
      const handlers = `${dir.path}/handlers_${i}.ts`;
      await Deno.writeTextFile(
        handlers,
        `import { on } from "${mod}";\non.create("kopfexamples", { id: "h${i}" }, () => {});\n`,
      );
      const controller = new AbortController();
      const lines: string[] = [];
      const code = await main(["run", handlers, "-n", namespace], {
        kubeconfig: await kubeconfigPath(),
        signal: controller.signal,
        write: (line) => {
          lines.push(line);
          if (point.test(line)) controller.abort(new Error("Signal received"));
        },
      });
      assert.ok(lines.some((l) => point.test(l)), `${point} was reached:\n${lines.join("\n")}`);
      assert.equal(code, 0, `stopped at ${point}:\n${lines.join("\n")}`);
    }
  },
);

Deno.test("kopf --help lists the commands, not kopf run's options", opts, async () => {
  const { code, lines } = await kopf(["--help"]);
  assert.equal(code, 0);
  const text = lines.join("\n");
  assert.match(text, /^Usage: kopf COMMAND/);
  for (const command of ["run", "freeze, resume", "shards", "init", "generate types", "build"]) {
    assert.match(text, new RegExp(`^  ${command}\\b`, "m"), command);
  }
  assert.doesNotMatch(text, /--all-namespaces/);
  assert.match((await kopf(["run", "--help"])).lines.join("\n"), /^Usage: kopf run/);
});

Deno.test(
  "--embedded in a project applies its crds/, hints from them, suggests the meant resource for " +
    "a misspelled one, and warns without -n/-A",
  opts,
  async () => {
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.mkdir(`${dir.path}/crds`);
    await Deno.writeTextFile(
      `${dir.path}/crds/widgets.yaml`,
      `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`,
    );
    await Deno.writeTextFile(
      `${dir.path}/handlers.ts`,
      `import { on } from "${mod}";
on.create("widgets", function create_widget() {});
on.create("widgts", function create_typo() {});
`,
    );
    const cli = new URL("../cli.ts", import.meta.url).pathname;
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check", cli, "run", "handlers.ts", "--embedded", "--standalone"],
      cwd: dir.path,
      env: { KUBECONFIG: "/nonexistent/kubeconfig", NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
    }).spawn();
    const { lines, exited } = captureLines(child);
    try {
      await eventually(
        () => lines.find((l) => /No resource matches name="widgts"/.test(l)),
        30_000,
        `the operator's report; got:\n${lines.join("\n")}`,
      );
      const text = lines.join("\n");
      assert.match(text, /^Applied crds\/widgets\.yaml: widgets\.example\.com\.$/m);
      assert.match(text, /^ +kubectl get widgets$/m);
      assert.doesNotMatch(text, /kopfexamples|examples\/obj\.yaml/);
      assert.match(
        text,
        /The embedded API serves no resource for name="widgts" \(did you mean "widgets"\?\): pass its CRD with --crd FILE/,
      );
      assert.match(text, /No resource matches name="widgts" \(did you mean "widgets"\?\)/);
      assert.doesNotMatch(text, /No resource matches name="widgets"/);
      assert.match(text, /WARNING.*Neither --namespace nor --all-namespaces is given/);
    } finally {
      assert.equal(await terminate(child, exited), 0, lines.join("\n"));
    }
  },
);

Deno.test(
  "--liveness on a port in use is one error line naming the option and port",
  opts,
  async () => {
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/handlers.ts`,
      `import { on } from "${mod}";\non.create("configmaps", function noop() {});\n`,
    );
    using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const port = (taken.addr as Deno.NetAddr).port;
    const { code, lines } = await kopf([
      "run",
      `${dir.path}/handlers.ts`,
      "-A",
      "--standalone",
      "--liveness",
      `http://127.0.0.1:${port}/healthz`,
    ]);
    assert.equal(code, 1);
    const errors = lines.filter((l) => !/^\[.*\] /.test(l)); // all but the log lines
    assert.deepEqual(errors, [
      `error: --liveness: port ${port} is in use (another process listens on it); choose another port`,
    ]);
  },
);

Deno.test(
  "kopf generate rbac --verify against an API server without authorization says so",
  opts,
  async () => {
    const { Emulator } = await import("../kits/emulator/mod.ts");
    await using emulator = await Emulator.start();
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/handlers.ts`,
      `import { on } from "${mod}";\non.create("configmaps", function noop() {});\n`,
    );
    const { code, lines } = await kopf([
      "generate",
      "rbac",
      `${dir.path}/handlers.ts`,
      "-A",
      "--standalone",
      "--verify",
      "--kubeconfig",
      emulator.kubeconfigPath,
    ]);
    assert.equal(code, 1, lines.join("\n"));
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(
      lines[0]!,
      /^error: --verify: the API server at https:\/\/127\.0\.0\.1:\d+ has no authorization API \(authorization\.k8s\.io\/v1 is not served/,
    );
  },
);
