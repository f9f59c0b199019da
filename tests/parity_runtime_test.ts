/**
 * Runtime behaviour that docs/parity.md lists against Kopf's documentation: settings sections
 * (CFG-02), the request timeout (CFG-100), retries that block only one object (NET-03) and a
 * backoff that restarts after a success (NET-04), login handler options (AUTH-09), the liveness
 * endpoint (PROBE-05), custom webhook servers and tunnels (WH-30, WH-34), readiness and signals
 * of embedded operators (EMB-12), `kopf run -n/-A` (CLI-03) and Ctrl-C twice (CLI-11), `spec`
 * and `status` views (API-03), the exit after a fatal error in a watch stream (HIST-22), and
 * Event posting without an events API (HIST-36).
 *
 * Faults are injected by a small HTTP proxy in front of the real API server (the answers that
 * get through are the server's own); the operators connect to it through a kubeconfig, so the
 * settings reach the client as they do in `kopf run`.
 */

import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../core/actions/loggers.ts";
import { TemporaryError } from "../core/actions/execution.ts";
import { start } from "../core/api/embedding.ts";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import { ActivityError } from "../core/engines/runners/activities.ts";
import { AdmissionError } from "../core/engines/admission/admission.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { httpOptions, operator, type OperatorOptions } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import type {
  AdmissionReview,
  WebhookClientConfig,
  WebhookFn,
  WebhookServeOptions,
} from "../core/structs/admission.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { selfSignedServerCertificate } from "../kits/certificates.ts";
import { type ClusterAccess, sharedControlPlane } from "../testing/control_plane.ts";
import { spawnDeno, spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  kex,
  KOPFEXAMPLES,
  kubeconfigPath,
  PausableTcpProxy,
  sleep,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A reply the proxy sends instead of forwarding, or `undefined` to forward. */
type Rule = (
  request: Request,
  url: URL,
) => Response | undefined | Promise<Response | undefined>;

/**
 * A plain-HTTP proxy in front of the shared plane (it authenticates as the admin), with rules
 * that answer some requests themselves; it records every request and every watch stream.
 */
class FaultProxy implements AsyncDisposable {
  /** Every request: method, path, and whether a rule answered it. */
  readonly requests: Array<{ method: string; path: string; faulted: boolean }> = [];
  /** Every watch stream passed through, and whether it is still open. */
  readonly watches: Array<{ path: string; open: boolean; cancel: () => void }> = [];
  /** Consulted in order for each request. */
  readonly rules: Rule[] = [];
  /** A kubeconfig (anonymous user) pointing at the proxy. */
  readonly kubeconfig: string;
  readonly url: string;
  #server: Deno.HttpServer<Deno.NetAddr>;
  #tls: Deno.HttpClient;

  private constructor(plane: ClusterAccess, kubeconfig: string) {
    this.#tls = Deno.createHttpClient({ caCerts: [plane.caPem] });
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (request) => this.#handle(request, plane),
    );
    this.url = `http://127.0.0.1:${this.#server.addr.port}`;
    this.kubeconfig = kubeconfig;
  }

  static async start(): Promise<FaultProxy> {
    const kubeconfig = await Deno.makeTempFile({ prefix: "kopf-proxy-", suffix: ".yaml" });
    const proxy = new FaultProxy(await sharedControlPlane(), kubeconfig);
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "proxy", cluster: { server: proxy.url } }],
        users: [{ name: "anonymous", user: {} }],
        contexts: [{ name: "proxy", context: { cluster: "proxy", user: "anonymous" } }],
        "current-context": "proxy",
      }),
    );
    return proxy;
  }

  /** How many requests match. */
  count(method: string, path: RegExp, faulted?: boolean): number {
    return this.requests.filter((r) =>
      r.method === method && path.test(r.path) && (faulted === undefined || r.faulted === faulted)
    ).length;
  }

  async #handle(request: Request, plane: ClusterAccess): Promise<Response> {
    const url = new URL(request.url);
    const record = { method: request.method, path: url.pathname, faulted: false };
    this.requests.push(record);
    for (const rule of this.rules) {
      const reply = await rule(request, url);
      if (reply) {
        record.faulted = true;
        return reply;
      }
    }
    const headers = Object.fromEntries(request.headers);
    delete headers.host;
    let upstream: Response;
    try {
      upstream = await fetch(`${plane.server}${url.pathname}${url.search}`, {
        method: request.method,
        headers: { ...headers, authorization: `Bearer ${plane.adminToken}` },
        body: request.body,
        client: this.#tls,
      });
    } catch (error) {
      return new Response(String(error), { status: 502 });
    }
    const watching = url.searchParams.get("watch");
    if (!upstream.body || (watching !== "true" && watching !== "1")) {
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
    }
    const reader = upstream.body.getReader();
    const entry = {
      path: url.pathname,
      open: true,
      cancel: () => void reader.cancel().catch(() => {}),
    };
    this.watches.push(entry);
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (done) {
            entry.open = false;
            controller.close();
          } else controller.enqueue(value);
        } catch (error) {
          entry.open = false;
          controller.error(error);
        }
      },
      cancel() {
        entry.open = false;
        reader.cancel().catch(() => {});
      },
    });
    return new Response(body, { status: upstream.status, headers: upstream.headers });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    for (const watch of this.watches) watch.cancel();
    await Promise.race([this.#server.shutdown(), sleep(5_000)]);
    this.#tls.close();
    await Deno.remove(this.kubeconfig).catch(() => {});
  }
}

/** A JSON Status answer, as the API server would send it. */
function status(code: number, message = "injected"): Response {
  return Response.json({ kind: "Status", apiVersion: "v1", code, message }, { status: code });
}

/** An operator run by `operator()` with no client given: it connects as `kopf run` does. */
interface Running {
  readonly logs: LogEntry[];
  readonly ready: Promise<void>;
  /** The operator's end (a rejection is kept here, not thrown). */
  readonly done: Promise<unknown>;
  stop(): Promise<void>;
}

function runOperator(
  registry: OperatorRegistry,
  options: Partial<OperatorOptions> = {},
): Running {
  const logs: LogEntry[] = [];
  const controller = new AbortController();
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const running = operator({
    standalone: true,
    settings: createSettings({ posting: { aggregationWindow: 0.2 } }),
    ...options,
    registry,
    listeners: [(entry) => logs.push(entry)],
    signal: options.signal
      ? AbortSignal.any([options.signal, controller.signal])
      : controller.signal,
    onReady: markReady,
  });
  const done = running.then(() => undefined, (error: unknown) => error);
  done.then(() => markReady());
  return {
    logs,
    ready,
    done,
    stop: async () => {
      controller.abort();
      const error = await done;
      if (error) throw error;
    },
  };
}

/** `status.<field>` of an object, read directly from the API server. */
async function statusOf(
  client: KubeClient,
  name: string,
  namespace: string,
): Promise<Record<string, unknown>> {
  const body = await client.api.get<KubeObject>(KOPFEXAMPLES, name, { namespace });
  return (body.status ?? {}) as Record<string, unknown>;
}

function unique(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Resolves with `promise`, or fails after `ms` saying what did not happen. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      promise,
      sleep(ms, timer.signal).then(() => {
        throw new Error(`Timed out after ${ms} ms: ${what}`);
      }),
    ]);
  } finally {
    timer.abort();
  }
}

// ---------------------------------------------------------------------------------------------
// CFG-02: the settings sections.

Deno.test(
  "settings have Kopf's sections; batching is the queueing section under Kopf's name: a startup handler's settings.batching.workerLimit = 1 serialises the objects of a stream (CFG-02)",
  opts,
  async () => {
    const settings = createSettings();
    const sections = [
      "process",
      "posting",
      "peering",
      "watching",
      "batching",
      "scanning",
      "admission",
      "execution",
      "background",
      "networking",
      "persistence",
    ] as const;
    for (const section of sections) {
      assert.equal(typeof settings[section], "object", `settings.${section}`);
    }
    assert.equal(settings.batching, settings.queueing, "batching is queueing, not a copy");
    assert.equal(createSettings({ batching: { workerLimit: 3 } }).queueing.workerLimit, 3);

    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cfg02");
    let running = 0;
    let most = 0;
    const handled: string[] = [];
    const op = await startOperator((registry) => {
      on.startup({ registry }, function limit({ settings }) {
        settings.batching.workerLimit = 1;
      });
      on.create("kopfexamples", { registry }, async function slow({ name }) {
        running++;
        most = Math.max(most, running);
        await sleep(300);
        running--;
        handled.push(name);
      });
    }, { namespaces: [namespace] });
    try {
      await op.ready;
      await Promise.all(
        ["a", "b", "c"].map((name) => client.api.create(KOPFEXAMPLES, kex(name), { namespace })),
      );
      await eventually(() => handled.length === 3, 30_000, "all three objects handled");
      assert.equal(most, 1, "one object at a time with settings.batching.workerLimit = 1");
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// CFG-100: settings.networking.requestTimeout.

Deno.test(
  "settings.networking.requestTimeout (300 s by default) bounds each atomic request, not the watch streams: a patch held past it is abandoned and retried while the watch stays open (CFG-100)",
  opts,
  async () => {
    assert.equal(createSettings().networking.requestTimeout, 300);
    assert.equal(httpOptions(createSettings(), new Logger(["test"])).timeoutMs, 300_000);

    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cfg100");
    await using proxy = await FaultProxy.start();
    let patches = 0;
    let holding = false;
    let retriedWhileHeld = false;
    const release = Promise.withResolvers<void>();
    proxy.rules.push(async (request, url) => {
      if (request.method !== "PATCH" || !url.pathname.endsWith("/kopfexamples/slow")) return;
      if (patches++ > 0) {
        retriedWhileHeld ||= holding;
        return; // forwarded
      }
      // The first one is held far longer than the timeout, until the test ends.
      holding = true;
      await Promise.race([release.promise, sleep(30_000)]);
      holding = false;
      return status(504, "held too long");
    });
    const runs: string[] = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, function timeouts({ settings }) {
      settings.networking.requestTimeout = 2; // read when the client is made, after startup
    });
    on.create("kopfexamples", { registry }, function mark({ name }) {
      runs.push(name);
      return "done";
    });
    const op = runOperator(registry, { namespaces: [namespace], kubeconfig: proxy.kubeconfig });
    try {
      await op.ready;
      const watch = await eventually(
        () => proxy.watches.find((w) => w.path.endsWith(`/${namespace}/kopfexamples`)),
        10_000,
        "the watch stream",
      );
      await client.api.create(KOPFEXAMPLES, kex("slow"), { namespace });
      await eventually(
        async () => (await statusOf(client, "slow", namespace)).mark === "done",
        30_000,
        "the handler's result stored by the retried patch",
      );
      assert.ok(retriedWhileHeld, "the held patch was abandoned by the client and sent again");
      assert.equal(patches, 2);
      assert.deepEqual(runs, ["slow"], "the handler ran once: only its request was retried");
      // The watch opened before the object outlived the 2-second request timeout many times.
      assert.ok(watch.open, "the watch stream was not cut by the request timeout");
      assert.equal(
        proxy.watches.filter((w) => w.path.endsWith(`/${namespace}/kopfexamples`)).length,
        1,
        "and was never reopened",
      );
    } finally {
      release.resolve();
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// NET-03, NET-04: retries of API errors.

Deno.test(
  "a request retried after API errors blocks only its object's worker: other objects are handled meanwhile, and the blocked one after the errors end, with its handler run once (NET-03)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("net03");
    await using proxy = await FaultProxy.start();
    let failing = true;
    proxy.rules.push((request, url) =>
      failing && request.method === "PATCH" && url.pathname.endsWith("/kopfexamples/stuck")
        ? status(503, "injected: the server is unavailable")
        : undefined
    );
    const runs: string[] = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, function retries({ settings }) {
      settings.networking.errorBackoffs = Array(600).fill(0.1); // a minute of quick retries
    });
    on.create("kopfexamples", { registry }, function mark({ name }) {
      runs.push(name);
      return name;
    });
    const op = runOperator(registry, { namespaces: [namespace], kubeconfig: proxy.kubeconfig });
    try {
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("stuck"), { namespace });
      const faulted = () => proxy.count("PATCH", /\/kopfexamples\/stuck$/, true);
      await eventually(() => faulted() >= 3, 30_000, "the stuck object's patch being retried");
      await client.api.create(KOPFEXAMPLES, kex("free"), { namespace });
      await eventually(
        async () => (await statusOf(client, "free", namespace)).mark === "free",
        30_000,
        "the other object handled while the first one's patch is retried",
      );
      const before = faulted();
      await eventually(() => faulted() > before, 10_000, "the stuck patch still being retried");
      assert.equal((await statusOf(client, "stuck", namespace)).mark, undefined);
      failing = false;
      await eventually(
        async () => (await statusOf(client, "stuck", namespace)).mark === "stuck",
        30_000,
        "the stuck object handled once the errors end",
      );
      assert.deepEqual(runs.toSorted(), ["free", "stuck"], "each handler ran once");
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "each success resets the backoff: after a request that needed the later delays, the next failing request retries after the first delay again (NET-04)",
  opts,
  async () => {
    const namespace = await testNamespace("net04");
    await using proxy = await FaultProxy.start();
    let failures = 0;
    proxy.rules.push((_request, url) => {
      if (!url.pathname.endsWith(`/namespaces/${namespace}/configmaps`) || failures === 0) return;
      failures--;
      return status(503);
    });
    // The third delay is 10 minutes: a sequence that went on from where the last request left
    // it would wait that long.
    const settings = createSettings({ networking: { errorBackoffs: [0.05, 0.05, 600] } });
    using client = new KubeClient(
      { server: proxy.url, credentials: NO_CREDENTIALS, source: "test proxy" },
      httpOptions(settings, new Logger(["test"])),
    );
    const lists = () => proxy.count("GET", new RegExp(`/namespaces/${namespace}/configmaps$`));
    failures = 2;
    await within(client.api.list(CONFIGMAPS, { namespace }), 20_000, "the first list");
    assert.equal(lists(), 3, "two failures, then a success");
    failures = 1;
    await within(
      client.api.list(CONFIGMAPS, { namespace }),
      20_000,
      "the second list retried after the first delay, not the third",
    );
    assert.equal(lists(), 5, "one failure, then a success");
    failures = 2;
    await within(client.api.list(CONFIGMAPS, { namespace }), 20_000, "the third list");
    assert.equal(lists(), 8);
  },
);

// ---------------------------------------------------------------------------------------------
// AUTH-09: login handler options.

Deno.test(
  "login handlers take retries and timeout; without them they are retried until they succeed (AUTH-09)",
  opts,
  async () => {
    const namespace = await testNamespace("auth09");
    const kubeconfig = await kubeconfigPath();

    // retries=3: three attempts, then the operator fails.
    let calls = 0;
    const limited = new OperatorRegistry();
    on.login({ registry: limited, retries: 3, backoff: 0.05 }, function counted() {
      calls++;
      throw new Error("no credentials yet");
    });
    const failed = await within(
      runOperator(limited, { namespaces: [namespace], kubeconfig }).done,
      30_000,
      "the operator to fail after the retries",
    );
    assert.ok(failed instanceof ActivityError, String(failed));
    assert.match(failed.message, /'counted'/);
    assert.equal(calls, 3);

    // timeout=1: attempts until a second has passed, then the operator fails.
    let timed = 0;
    const bounded = new OperatorRegistry();
    on.login({ registry: bounded, timeout: 1, backoff: 0.2 }, function slow() {
      timed++;
      throw new Error("no credentials yet");
    });
    const timedOut = await within(
      runOperator(bounded, { namespaces: [namespace], kubeconfig }).done,
      30_000,
      "the operator to fail after the timeout",
    );
    assert.ok(timedOut instanceof ActivityError, String(timedOut));
    assert.match(timedOut.message, /'slow'.*would time out in 1 seconds/);
    assert.ok(timed >= 2 && timed <= 6, `attempts within the timeout: ${timed}`);

    // No options: retried until it succeeds (here after 7 failures).
    const connection = await loadKubeconfig({ paths: [kubeconfig] });
    let attempts = 0;
    const unlimited = new OperatorRegistry();
    on.login({ registry: unlimited }, function patient() {
      if (++attempts <= 7) throw new TemporaryError("not yet", { delay: 0.05 });
      return connection;
    });
    on.event("configmaps", { registry: unlimited }, () => {});
    const op = runOperator(unlimited, { namespaces: [namespace] });
    try {
      await within(op.ready, 30_000, "the operator to start after the login succeeded");
      assert.equal(attempts, 8);
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// PROBE-05: the liveness endpoint.

Deno.test(
  "the liveness endpoint answers while the operator runs, also for quiet but healthy streams; it answers 503 while a watch stream is stuck, 200 again after, and nothing once stopped (PROBE-05)",
  opts,
  async () => {
    using direct = await testClient();
    const namespace = await testNamespace("probe05");
    await using proxy = PausableTcpProxy.inFrontOf(direct);
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    const op = await startOperator((registry) => {
      on.probe({ registry }, function reporter() {
        return "running";
      });
      on.event("configmaps", { registry }, () => {});
    }, {
      namespaces: [namespace],
      client: proxy.client(direct),
      // A stream silent for 2 s is reopened; silent for 4 s (twice that) without being
      // reopened, it counts as stuck.
      settings: createSettings({ watching: { inactivityTimeout: 2 }, posting: { enabled: false } }),
      liveness: url,
    });
    const health = async () => {
      const response = await fetch(url);
      return { status: response.status, body: await response.text() };
    };
    try {
      await op.ready;
      await direct.api.create(CONFIGMAPS, { metadata: { name: "seen" } }, { namespace });
      await op.waitForLog(/silent for 2000 ms/); // the stream was quiet, and reopened
      // Quiet, but healthy: reopened every 2 s. Sampled over 6 s, past the stale limit.
      for (let i = 0; i < 12; i++) {
        const answer = await health();
        assert.equal(answer.status, 200, `a quiet, healthy stream: ${answer.body}`);
        assert.deepEqual(JSON.parse(answer.body), { reporter: "running" });
        await sleep(500);
      }
      proxy.pause(); // the stream and its reconnections hang
      const stuck = await eventually(
        async () => {
          const answer = await health();
          return answer.status === 503 ? answer : undefined;
        },
        20_000,
        "503 while the stream is stuck",
      );
      assert.match(stuck.body, /Watch streams silent for over 4s/);
      proxy.resume();
      await eventually(
        async () => (await health()).status === 200,
        20_000,
        "200 once the stream works again",
      );
    } finally {
      await op.stop();
    }
    await assert.rejects(fetch(url), "nothing answers once the operator stopped");
  },
);

// ---------------------------------------------------------------------------------------------
// WH-30, WH-34: custom webhook servers and tunnels.

Deno.test(
  "a custom webhook server as a plain function: it calls fn for reviews, each config it yields re-applies the managed configurations (a tunnel whose endpoint moves), and its return ends the operator (WH-30, WH-34)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("wh30");
    const managed = unique("tunnel") + ".kopf.dev";
    const mark = unique("m");
    const labels = { "wh30-test": mark };
    const registry = new OperatorRegistry();
    on.validate("kopfexamples", { registry, labels, id: "check" }, ({ spec }) => {
      if (spec.bad) throw new AdmissionError("bad spec", 422);
    });
    on.create("kopfexamples", { registry, labels }, function seen() {
      return "seen";
    });

    const cert = await selfSignedServerCertificate(["127.0.0.1"]);
    const caBundle = btoa(cert.caPem);
    const hits: string[] = [];
    const move = Promise.withResolvers<void>();
    const exit = Promise.withResolvers<void>();
    const endpoint = (name: string, fn: WebhookFn, signal: AbortSignal) =>
      Deno.serve({
        hostname: "127.0.0.1",
        port: 0,
        cert: cert.certPem,
        key: cert.keyPem,
        signal,
        onListen: () => {},
      }, async (request) => {
        const webhook = decodeURIComponent(new URL(request.url).pathname.split("/").pop()!);
        hits.push(`${name} ${webhook}`);
        const review = await request.json() as AdmissionReview;
        return Response.json(await fn(review, { webhook }));
      });
    const until = (promise: Promise<void>, signal: AbortSignal) =>
      Promise.race([
        promise,
        new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve())),
      ]);
    // Kopf's simple form: a function of fn, yielding client configs, holding control.
    async function* tunnel(
      fn: WebhookFn,
      options: WebhookServeOptions,
    ): AsyncGenerator<WebhookClientConfig> {
      const firstStop = new AbortController();
      const lastStop = new AbortController();
      try {
        const first = endpoint("one", fn, AbortSignal.any([options.signal, firstStop.signal]));
        yield { url: `https://127.0.0.1:${first.addr.port}/one`, caBundle };
        await until(move.promise, options.signal);
        if (options.signal.aborted) return;
        const second = endpoint("two", fn, AbortSignal.any([options.signal, lastStop.signal]));
        yield { url: `https://127.0.0.1:${second.addr.port}/two`, caBundle };
        firstStop.abort(); // the old endpoint is gone
        await until(exit.promise, options.signal);
      } finally {
        firstStop.abort();
        lastStop.abort();
      }
    }
    const settings = createSettings();
    settings.admission.server = tunnel;
    settings.admission.managed = managed;
    const op = runOperator(registry, {
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
      settings,
    });
    const url = async () =>
      ((await client.api.get(WEBHOOK_CONFIGURATIONS.validating, managed)).webhooks as Array<
        { clientConfig: { url: string; caBundle: string } }
      >)[0]!.clientConfig;
    // A dry run: rejected by the handler once the API server uses the configuration.
    const rejected = async (by: string) => {
      hits.length = 0;
      const error = await client.http.json({
        method: "POST",
        path: `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`,
        query: { dryRun: "All" },
        body: kex(unique("bad"), { bad: true }, labels),
        retries: 0,
      }).then(() => undefined, (e: Error) => e);
      return /bad spec/.test(String(error)) && hits.includes(`${by} check`);
    };
    try {
      await op.ready;
      const one = await url();
      assert.match(one.url, /^https:\/\/127\.0\.0\.1:\d+\/one\/check$/);
      assert.equal(one.caBundle, caBundle);
      await eventually(() => rejected("one"), 30_000, "a review served by the first endpoint");
      await client.api.create(KOPFEXAMPLES, kex("good", {}, labels), { namespace });
      await eventually(async () => (await statusOf(client, "good", namespace)).seen === "seen");

      move.resolve();
      await eventually(async () => /\/two\/check$/.test((await url()).url), 30_000, "new url");
      await eventually(() => rejected("two"), 30_000, "a review served by the moved endpoint");

      exit.resolve(); // the server returns while the operator runs
      const error = await within(op.done, 30_000, "the operator to end with its server");
      assert.match(String(error), /webhook server exited unexpectedly/);
      // Ended for good: nothing handles new objects any more. (Its webhooks are removed on the
      // way out; until the API server notices, it may still call the gone endpoint.)
      await eventually(
        () => client.api.create(KOPFEXAMPLES, kex("late", {}, labels), { namespace }),
        30_000,
        "a creation admitted without the webhooks",
      );
      await sleep(1_500);
      assert.equal((await statusOf(client, "late", namespace)).seen, undefined);
    } finally {
      await op.stop().catch(() => {});
      for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
        await client.api.delete(resource, managed).catch(() => {});
      }
    }
  },
);

// ---------------------------------------------------------------------------------------------
// EMB-12: readiness and signals of embedded operators.

Deno.test(
  "start(): ready resolves only after the startup handlers finished, with the root tasks up: the liveness endpoint answers at once (EMB-12)",
  opts,
  async () => {
    const namespace = await testNamespace("emb12");
    const gate = Promise.withResolvers<void>();
    const order: string[] = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, async function slow() {
      order.push("startup begun");
      await gate.promise;
      order.push("startup done");
    });
    on.event("configmaps", { registry }, () => {});
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    await using running = start({
      registry,
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
      standalone: true,
      settings: createSettings(),
      liveness: url,
    });
    running.ready.then(() => order.push("ready"));
    await eventually(() => order.includes("startup begun"), 10_000, "the startup handler");
    await sleep(1_000);
    assert.deepEqual(order, ["startup begun"], "not ready while a startup handler runs");
    await assert.rejects(fetch(url), "no liveness endpoint before the startup is over");
    gate.resolve();
    await within(running.ready, 30_000, "readiness");
    assert.deepEqual(order, ["startup begun", "startup done", "ready"]);
    const response = await fetch(url);
    assert.equal(response.status, 200);
    await response.body?.cancel();
  },
);

Deno.test(
  "run(): SIGINT or SIGTERM, during the startup or once running, starts a graceful exit — the cleanup handlers run, run() returns, the process exits 0 (EMB-12)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("emb12sig");
    await client.api.create(CONFIGMAPS, { metadata: { name: "cm" } }, { namespace });
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/main.ts`,
      `import { configureLogging, createSettings, on, run } from "${mod}";\n` +
        `configureLogging({ format: "plain" });\n` +
        `const settings = createSettings();\n` +
        `settings.process.gracePeriod = 600; // an upper bound only: nothing needs it here\n` +
        `on.startup(function started() { console.error("operator started"); });\n` +
        `on.cleanup(function finished() { console.error("cleanup ran"); });\n` +
        `on.event("configmaps", function seen({ name }) { console.error(\`seen \${name}\`); });\n` +
        `await run({ settings, namespaces: ["${namespace}"], standalone: true });\n` +
        `console.error("run() returned");\n`,
    );
    const cases = [
      { signal: "SIGINT", when: /^operator started$/ }, // while starting up
      { signal: "SIGINT", when: /^seen cm$/ }, // while serving
      { signal: "SIGTERM", when: /^seen cm$/ },
    ] as const;
    for (const { signal, when } of cases) {
      // The script lives outside the project: give it the project's import map.
      const op = await spawnDeno(["--config", "deno.json", `${dir.path}/main.ts`]);
      try {
        await op.waitForLine(when);
        op.kill(signal);
        // No timer of the stop sequence keeps the process alive (a grace period of 600 s would).
        const code = await within(op.exited, 20_000, `the exit after ${signal}`);
        const output = `${signal} after ${when}:\n${op.lines.join("\n")}`;
        assert.equal(code, 0, output);
        assert.ok(op.lines.includes("cleanup ran"), output);
        assert.ok(op.lines.includes("run() returned"), output);
      } finally {
        await op.stop();
      }
    }
  },
);

// ---------------------------------------------------------------------------------------------
// CLI-03, CLI-11: kopf run options and signals.

Deno.test(
  "kopf run -n (repeatable, with glob patterns) serves the matching namespaces only; -A serves the whole cluster with cluster-wide watches (CLI-03)",
  opts,
  async () => {
    using client = await testClient();
    const token = crypto.randomUUID().slice(0, 6);
    const literal = await testNamespace(`c3${token}-lit`);
    const globbed = await testNamespace(`c3${token}-glob`);
    const other = await testNamespace(`c3${token}-off`);
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        // Only this test's ConfigMaps, even when watching the whole cluster.
        `on.startup(function only({ settings }) {\n` +
        `  settings.watching.labelSelectors = { configmaps: "cli03=${token}" };\n` +
        `});\n` +
        `on.create("configmaps", function seen({ namespace, name }) {\n` +
        `  console.error(\`seen \${namespace}/\${name}\`);\n` +
        `});\n`,
    );
    const configmap = { metadata: { name: "cm", labels: { cli03: token } } };
    const common = [`${dir.path}/h.ts`, "--standalone", "-v", "--log-format", "plain"];
    const namespaced = await spawnOperator([
      ...common,
      "-n",
      literal,
      "--namespace",
      `c3${token}-glob-*`,
    ]);
    try {
      await namespaced.waitForLine(new RegExp(`^Watching configmaps\\.v1 in ${literal}$`));
      await namespaced.waitForLine(new RegExp(`^Watching configmaps\\.v1 in ${globbed}$`));
      for (const namespace of [other, literal, globbed]) {
        await client.api.create(CONFIGMAPS, configmap, { namespace });
      }
      await namespaced.waitForLine(new RegExp(`^seen ${literal}/cm$`));
      await namespaced.waitForLine(new RegExp(`^seen ${globbed}/cm$`));
      await sleep(1_000);
      const output = namespaced.lines.join("\n");
      assert.ok(!output.includes(`seen ${other}/cm`), output);
      assert.ok(!output.includes(`in ${other}`), output);
    } finally {
      assert.equal(await namespaced.stop(), 0);
    }
    const clusterwide = await spawnOperator([...common, "-A"]);
    try {
      await clusterwide.waitForLine(/^Watching configmaps\.v1$/);
      // The object the namespaced operator did not serve is handled now; the others were.
      await clusterwide.waitForLine(new RegExp(`^seen ${other}/cm$`));
      await sleep(1_000);
      const output = clusterwide.lines.join("\n");
      assert.ok(!output.includes(`seen ${literal}/cm`), output);
      assert.ok(!/^Watching configmaps\.v1 in /m.test(output), output);
    } finally {
      assert.equal(await clusterwide.stop(), 0);
    }
  },
);

Deno.test(
  "kopf run: a second SIGINT (Ctrl-C twice) while the graceful exit waits exits at once with 130 (CLI-11)",
  opts,
  async () => {
    const namespace = await testNamespace("cli11");
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        `on.startup(function started() { console.error("operator started"); });\n` +
        `on.cleanup(async function hang() {\n` +
        `  console.error("cleanup started");\n` +
        `  await new Promise(() => {}); // never settles: the graceful exit waits\n` +
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
    try {
      await op.waitForLine(/operator started/);
      await op.waitForLine(/Initial authentication has finished/);
      op.kill("SIGINT");
      await op.waitForLine(/cleanup started/);
      op.kill("SIGINT");
      // Without the second signal, the exit would wait for the 600 s ultimate timeout.
      const code = await within(op.exited, 15_000, "the exit after the second SIGINT");
      assert.equal(code, 130, op.lines.join("\n"));
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// API-03: spec and status.

Deno.test(
  "spec and status: the body's own objects in handlers (empty objects when absent); in daemons, read-only live mapping views (API-03)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("api03");
    const seen: Array<{ name: string; own: boolean; spec: unknown; status: unknown }> = [];
    const views: Array<{ value: unknown; phase: unknown; keys: string[]; writable: boolean }> = [];
    const op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function plain({ name, body, spec, status }) {
        seen.push({
          name,
          own: spec === (body.spec ?? spec) && status === (body.status ?? status),
          spec: structuredClone(spec),
          status: structuredClone(status),
        });
      });
      on.daemon(
        "kopfexamples",
        { registry, labels: { daemon: "yes" } },
        async function live({ spec, status, stopped }) {
          while (!stopped.aborted) {
            let writable = true;
            try {
              (spec as Record<string, unknown>).value = 99;
            } catch {
              writable = false;
            }
            views.push({
              value: spec.value,
              phase: status.phase,
              keys: Object.keys(spec),
              writable,
            });
            await sleep(100);
          }
        },
      );
    }, { namespaces: [namespace] });
    try {
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("bare"), { namespace });
      await client.api.create(KOPFEXAMPLES, {
        ...kex("full", { value: 1 }, { daemon: "yes" }),
        status: { phase: "new" },
      }, { namespace });
      await eventually(() => seen.length === 2, 30_000, "both objects handled");
      const bare = seen.find((s) => s.name === "bare")!;
      const full = seen.find((s) => s.name === "full")!;
      assert.deepEqual(bare.spec, {});
      assert.deepEqual(bare.status, {});
      assert.ok(full.own, "spec and status are the body's own objects");
      assert.deepEqual(full.spec, { value: 1 });
      assert.deepEqual(full.status, { phase: "new" });

      await eventually(() => views.length > 0, 30_000, "the daemon");
      assert.deepEqual(views[0], { value: 1, phase: "new", keys: ["value"], writable: false });
      await client.api.patch(
        KOPFEXAMPLES,
        "full",
        { spec: { value: 2, extra: true }, status: { phase: "changed" } },
        { namespace },
      );
      const changed = await eventually(
        () => views.find((v) => v.value === 2 && v.phase === "changed"),
        30_000,
        "the same spec and status views showing the change",
      );
      assert.deepEqual(changed.keys.toSorted(), ["extra", "value"]);
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// HIST-22: the exit after a fatal error in watching.

Deno.test(
  "an unexpected error that breaks a watch stream ends the operator, not freezes it: the cleanup runs, operator() rejects, kopf run exits 1 (HIST-22)",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await testNamespace("hist22");
    // Index handlers run on the stream itself: a filter callback that throws breaks it.
    const poison = { metadata: { name: "poison" } };

    let cleaned = false;
    const registry = new OperatorRegistry();
    on.index("configmaps", {
      registry,
      when: ({ name }) => {
        if (name === "poison") throw new Error("a filter that breaks the stream");
        return true;
      },
    }, function names({ name }) {
      return { [name]: true };
    });
    on.cleanup({ registry }, function cleanup() {
      cleaned = true;
    });
    const op = runOperator(registry, {
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
    });
    try {
      await op.ready;
      await client.api.create(CONFIGMAPS, poison, { namespace });
      const error = await within(op.done, 30_000, "the operator to end");
      assert.match(String(error), /a filter that breaks the stream/);
      assert.ok(cleaned, "the cleanup handlers ran");
      assert.ok(
        op.logs.some((e) =>
          e.level === "error" && /^The operator stops after a fatal error: a filter/.test(e.message)
        ),
        op.logs.map((e) => e.message).join("\n"),
      );
    } finally {
      await op.stop().catch(() => {});
    }

    const other = await testNamespace("hist22cli");
    await client.api.create(CONFIGMAPS, poison, { namespace: other });
    await using dir = await tempDir();
    const mod = new URL("../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${mod}";\n` +
        `on.index("configmaps", { when: ({ name }) => {\n` +
        `  if (name === "poison") throw new Error("a filter that breaks the stream");\n` +
        `  return true;\n` +
        `} }, function names({ name }) { return { [name]: true }; });\n` +
        `on.cleanup(function cleanup() { console.error("cleanup ran"); });\n`,
    );
    const cli = await spawnOperator([
      `${dir.path}/h.ts`,
      "-n",
      other,
      "--standalone",
      "--log-format",
      "plain",
    ]);
    try {
      const code = await within(cli.exited, 30_000, "kopf run to exit");
      const output = cli.lines.join("\n");
      assert.equal(code, 1, output);
      assert.ok(cli.lines.includes("cleanup ran"), output);
      assert.match(output, /a filter that breaks the stream/);
    } finally {
      await cli.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// HIST-36: no events API.

Deno.test(
  "Events answered 404 (a cluster without that events API) are dropped: handling goes on, the operator runs on (HIST-36)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("hist36");
    await using proxy = await FaultProxy.start();
    proxy.rules.push((request, url) =>
      request.method === "POST" && /\/events$/.test(url.pathname)
        ? new Response("404 page not found\n", {
          status: 404,
          headers: { "Content-Type": "text/plain; charset=utf-8" },
        })
        : undefined
    );
    const registry = new OperatorRegistry();
    on.create("kopfexamples", { registry }, function noisy({ name, logger }) {
      logger.info(`Creating ${name}`); // an Event too, with settings.posting.loggers
      return "done";
    });
    const settings = createSettings({ posting: { aggregationWindow: 0.2, loggers: true } });
    settings.posting.defaultBackoffs = [0.05];
    settings.posting.loggingBackoffs = [0.05];
    const op = runOperator(registry, {
      namespaces: [namespace],
      kubeconfig: proxy.kubeconfig,
      settings,
    });
    let ended = false;
    op.done.then(() => (ended = true));
    try {
      await op.ready;
      const failedPosts = () => proxy.count("POST", /\/events$/, true);
      let before = 0;
      for (const name of ["first", "second"]) {
        await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
        await eventually(
          async () => (await statusOf(client, name, namespace)).noisy === "done",
          30_000,
          `${name} handled`,
        );
        await eventually(() => failedPosts() > before, 30_000, `an Event about ${name} tried`);
        before = failedPosts();
      }
      const { items } = await client.api.list(
        { group: "", version: "v1", plural: "events", namespaced: true },
        { namespace },
      );
      assert.deepEqual(items, [], "none was stored");
      assert.equal(ended, false, "the operator runs on");
    } finally {
      await op.stop();
    }
  },
);
