/**
 * The operator's lifecycle when a part fails (issue 28, "a zombie that reports healthy"):
 * - a webhook server that cannot start stops `kopf run --liveness` with one `error:` line and
 *   exit code 1 (the liveness endpoint used to outlive the failed term, answering 200, and keep
 *   the process alive);
 * - a signal after such a failure does not crash the process (`Uncaught BadResource`: the
 *   webhook server's listener, already shut down, was shut down again when its signal aborted);
 * - `kopf run --embedded` removes the embedded API's kubeconfig (it holds the API's token) on
 *   every exit: a start failure, a signal, a second signal (`Deno.exit`);
 * - while a fatal error stops the operator, `/healthz` answers 503 and names what stopped.
 *
 * The CLI runs as a subprocess (`kopf run`); the liveness case runs in-process against the
 * shared control plane.
 */

import assert from "node:assert/strict";
import { createSettings, on, type WebhookClientConfig, type WebhookServeOptions } from "../mod.ts";
import { type SpawnedOperator, spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  applyCrdsFile,
  eventually,
  kex,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const MOD = new URL("../mod.ts", import.meta.url).href;
/** How long a failed start may take to exit (it takes about a second). */
const EXIT_BOUND_MS = 60_000;

/** Handlers with an admission webhook on a server configured from the environment. */
const WEBHOOK_HANDLERS = `import { on, WebhookServer } from "${MOD}";
on.startup(function configure({ settings }) {
  settings.admission.server = new WebhookServer({
    addr: "127.0.0.1",
    port: Number(Deno.env.get("WEBHOOK_PORT") ?? 0),
  });
  const managed = Deno.env.get("WEBHOOK_MANAGED");
  if (managed) settings.admission.managed = managed;
});
on.validate("kopfexamples", { ignoreFailures: true }, function check() {});
`;

/** Handlers whose cleanup never returns (a second signal must end the process). */
const HANGING_CLEANUP = `import { on } from "${MOD}";
on.create("kopfexamples", function created() {});
on.cleanup(async function hang() {
  console.log("The cleanup handler hangs.");
  await new Promise(() => {});
});
`;

/** A port nobody listens on (bound and released). */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

/** The exit code within {@link EXIT_BOUND_MS}, else the process is killed and the test fails. */
async function exitWithin(op: SpawnedOperator): Promise<number> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      op.exited,
      new Promise<number>((_, reject) => {
        timer = setTimeout(() => {
          op.kill("SIGKILL");
          reject(new Error(`did not exit within ${EXIT_BOUND_MS} ms:\n${op.lines.join("\n")}`));
        }, EXIT_BOUND_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The embedded APIs' directories (with their kubeconfigs) left in a temporary directory. */
async function leftovers(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) {
    if (entry.name.startsWith("kopf-emulator-")) names.push(entry.name);
  }
  return names;
}

/** Checks what a failed start prints: exactly one `error:` line, and no crash. */
function assertOneErrorLine(lines: readonly string[], pattern: RegExp): void {
  const output = lines.join("\n");
  const errors = lines.filter((line) => line.startsWith("error:"));
  assert.equal(errors.length, 1, `one error line expected:\n${output}`);
  assert.match(errors[0]!, pattern, output);
  assert.doesNotMatch(output, /Uncaught/, output);
}

Deno.test(
  "kopf run --liveness: a webhook server that cannot start exits 1 with one error line",
  opts,
  async () => {
    await applyCrdsFile("crds/example.yaml");
    const ns = await testNamespace("lf");
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/handlers.ts`, WEBHOOK_HANDLERS);
    using taken = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const op = await spawnOperator([
      `${dir.path}/handlers.ts`,
      "--standalone",
      "-n",
      ns,
      "--liveness",
      `http://127.0.0.1:${freePort()}/healthz`,
    ], { WEBHOOK_PORT: String((taken.addr as Deno.NetAddr).port) });
    const code = await exitWithin(op);
    assert.equal(code, 1, op.lines.join("\n"));
    assertOneErrorLine(op.lines, /^error: Cannot serve the admission webhooks: .*in use/i);
  },
);

Deno.test(
  "kopf run --embedded --liveness: a start failure, then SIGINT: exit 1, no crash, no kubeconfig left",
  opts,
  async () => {
    await using tmp = await tempDir();
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/handlers.ts`, WEBHOOK_HANDLERS);
    // The embedded API serves no admissionregistration.k8s.io: writing the managed webhook
    // configurations fails after the webhook server bound its port.
    const op = await spawnOperator([
      `${dir.path}/handlers.ts`,
      "--embedded",
      "--standalone",
      "--liveness",
      `http://127.0.0.1:${freePort()}/healthz`,
    ], { TMPDIR: tmp.path, WEBHOOK_MANAGED: "auto.kopf.dev" });
    await op.waitForLine(/Cannot configure the webhooks/, EXIT_BOUND_MS);
    op.kill("SIGINT"); // as a user would press Ctrl-C at a stuck operator (a no-op if it exited)
    const code = await exitWithin(op);
    assert.equal(code, 1, op.lines.join("\n"));
    assertOneErrorLine(op.lines, /^error: Cannot serve the admission webhooks: /);
    assert.deepEqual(await leftovers(tmp.path), [], "the embedded kubeconfig is removed");
  },
);

Deno.test(
  "kopf run --embedded: a second signal exits 130 and leaves no kubeconfig",
  opts,
  async () => {
    await using tmp = await tempDir();
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/handlers.ts`, HANGING_CLEANUP);
    const op = await spawnOperator([`${dir.path}/handlers.ts`, "--embedded", "--standalone"], {
      TMPDIR: tmp.path,
    });
    const where = await op.waitForLine(/export KUBECONFIG=/, EXIT_BOUND_MS);
    assert.ok(where.includes(tmp.path), `the kubeconfig is written in TMPDIR: ${where}`);
    assert.equal((await leftovers(tmp.path)).length, 1);
    await op.waitForLine(/Initial authentication has finished/, EXIT_BOUND_MS);
    op.kill("SIGINT");
    await op.waitForLine(/The cleanup handler hangs/, EXIT_BOUND_MS);
    op.kill("SIGINT"); // the graceful exit hangs: a second signal exits at once
    const code = await exitWithin(op);
    assert.equal(code, 130, op.lines.join("\n"));
    assert.doesNotMatch(op.lines.join("\n"), /Uncaught/);
    assert.deepEqual(await leftovers(tmp.path), [], "the embedded kubeconfig is removed");
  },
);

Deno.test(
  "liveness: a webhook server that stopped answers 503 naming it while the operator stops",
  opts,
  async () => {
    const client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const ns = await testNamespace("lf");
    let breakServer!: () => void;
    const broken = new Promise<void>((resolve) => (breakServer = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let markBusy!: () => void;
    const busy = new Promise<void>((resolve) => (markBusy = resolve));
    const settings = createSettings({ posting: { aggregationWindow: 0.2 } });
    settings.process.gracePeriod = 120; // the busy handler holds the stop until released
    settings.admission.server = async function* (
      _fn: unknown,
      options: WebhookServeOptions,
    ): AsyncGenerator<WebhookClientConfig> {
      yield { url: "https://127.0.0.1:9/" };
      await new Promise<void>((resolve) => {
        void broken.then(resolve);
        options.signal.addEventListener("abort", () => resolve(), { once: true });
      });
      if (!options.signal.aborted) throw new Error("the test broke the webhook server");
    };
    const port = freePort();
    const op = await startOperator((registry) => {
      on.validate("kopfexamples", { registry, ignoreFailures: true }, function check() {});
      on.create("kopfexamples", { registry }, async function busy() {
        markBusy();
        await released; // ignores its stop signal: the stop waits for it
      });
    }, { namespaces: [ns], settings, liveness: `http://127.0.0.1:${port}/healthz` });
    const healthz = `http://127.0.0.1:${port}/healthz`;
    let stopped: Promise<void> | undefined;
    try {
      await op.ready;
      const healthy = await fetch(healthz);
      assert.equal(healthy.status, 200, await healthy.text());
      await client.api.create(KOPFEXAMPLES, kex("busy"), { namespace: ns });
      await busy;
      breakServer();
      const answer = await eventually(
        async () => {
          const response = await fetch(healthz);
          const body = await response.text();
          return response.status === 503 ? body : undefined;
        },
        20_000,
        "/healthz answering 503",
      );
      assert.match(answer, /The webhook server is not running: the test broke the webhook server/);
      assert.match(answer, /stopping after a fatal error/);
    } finally {
      release();
      stopped = op.stop();
      await stopped.catch(() => {});
      op.client[Symbol.dispose]();
      client[Symbol.dispose]();
    }
    await assert.rejects(stopped, /the test broke the webhook server/);
  },
);
