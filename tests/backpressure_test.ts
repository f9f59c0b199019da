/**
 * The admission gate (`settings.queueing.admissionLimit`), against the real API server: a
 * backlog is processed with at most that many cycles busy outside their handlers — counted as
 * the operator's own PATCH requests in flight — while slow handlers are never held up by it.
 * And the cycles themselves: a handled create takes one, not a second look at its own write.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { KubeClient } from "../core/client/client.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  PausableTcpProxy,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { httpOptions } from "../core/reactor/lifetime/running.ts";
import { Logger } from "../core/actions/loggers.ts";
import { startOperator } from "./_operator.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import { Exposition } from "./_prometheus.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A client of the shared control plane that counts its PATCH requests in flight. */
async function countingClient(): Promise<{ client: KubeClient; peak: () => number }> {
  const connection = await loadKubeconfig({
    paths: [(await sharedControlPlane()).kubeconfigPath],
  });
  const tls = Deno.createHttpClient({ caCerts: connection.caPem ? [connection.caPem] : [] });
  let inFlight = 0, peak = 0;
  const client = new KubeClient(connection, {
    fetch: async (input, init) => {
      const patch = init?.method === "PATCH";
      if (patch) peak = Math.max(peak, ++inFlight);
      try {
        return await fetch(input, { ...init, client: tls } as RequestInit);
      } finally {
        if (patch) inFlight--;
      }
    },
  });
  return { client, peak: () => peak };
}

/** Waits until `count` objects of the namespace have their create handler's result. */
async function allHandled(namespace: string, count: number): Promise<void> {
  using reader = await testClient();
  await eventually(
    async () => {
      const list = await reader.api.list(KOPFEXAMPLES, { namespace });
      return list.items.filter((o) => (o.status as { create_fn?: unknown })?.create_fn)
        .length === count;
    },
    60_000,
    "all objects handled",
  );
}

/** Creates `count` objects before the operator starts. */
async function backlog(namespace: string, count: number): Promise<string[]> {
  using client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const names = Array.from({ length: count }, (_, i) => `b-${i}`);
  for (let i = 0; i < names.length; i += 20) {
    await Promise.all(
      names.slice(i, i + 20).map((name) =>
        client.api.create(KOPFEXAMPLES, kex(name), { namespace })
      ),
    );
  }
  return names;
}

Deno.test(
  "admission gate: a backlog is written with at most admissionLimit patches in flight, each object once",
  opts,
  async () => {
    const namespace = await testNamespace("gate");
    const names = await backlog(namespace, 120);
    const { client, peak } = await countingClient();
    const settings = createSettings({ posting: { enabled: false } });
    settings.queueing.admissionLimit = 4;
    const runs = new Map<string, number>();
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn({ name }) {
        runs.set(name, (runs.get(name) ?? 0) + 1);
        return { done: true };
      });
    }, { namespaces: [namespace], settings, client });
    await op.ready;
    await allHandled(namespace, names.length);
    assert.equal(runs.size, names.length);
    assert.ok([...runs.values()].every((n) => n === 1), "each create handler ran once");
    // Without the gate the backlog's patches all go out at once (dozens in flight).
    assert.ok(peak() >= 1 && peak() <= 4, `patches in flight at most 4, saw ${peak()}`);
    client[Symbol.dispose]();
  },
);

Deno.test(
  "admission gate: slow handlers are not held up by it (all start while the limit is 2)",
  opts,
  async () => {
    const namespace = await testNamespace("gate-slow");
    const names = await backlog(namespace, 30);
    const settings = createSettings({ posting: { enabled: false } });
    settings.queueing.admissionLimit = 2;
    let started = 0;
    let open!: () => void;
    const barrier = new Promise<void>((resolve) => (open = resolve));
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, async function create_fn() {
        // Returns only once every object's handler has started: with handlers counted by the
        // gate, only two would ever start and this would never open.
        if (++started === names.length) open();
        await barrier;
        return { done: true };
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await eventually(() => started === names.length, 60_000, "all handlers started at once");
    await allHandled(namespace, names.length);
    assert.equal(started, names.length);
  },
);

Deno.test(
  "one cycle per handled create: the stored object after the write is looked at again only when someone else changed it meanwhile",
  opts,
  async () => {
    const namespace = await testNamespace("settled");
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const engine = new MetricsEngine({ process: false });
    const updates: unknown[] = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, async function create_fn({ name }) {
        // The racing object: a user changes its spec while its create handler runs.
        if (name === "racing") {
          await client.api.patch(KOPFEXAMPLES, name, { spec: { size: 2 } }, { namespace });
        }
        return { done: true };
      });
      on.update("kopfexamples", { registry }, function update_fn({ diff }) {
        updates.push(diff);
      });
    }, {
      namespaces: [namespace],
      settings: createSettings({ posting: { enabled: false } }),
      metricsEngine: engine,
    });
    await op.ready;
    const cycles = async () =>
      new Exposition((await engine.exposition()).text).value("controller_runtime_reconcile_total", {
        controller: "kopfexamples.v1.kopf.dev",
      });
    await client.api.create(KOPFEXAMPLES, kex("calm", { size: 1 }), { namespace });
    await eventually(async () => {
      const obj = await client.api.get(KOPFEXAMPLES, "calm", { namespace });
      return (obj.status as { create_fn?: unknown })?.create_fn;
    });
    await sleep(500);
    assert.equal(await cycles(), 1, "the created object's only cycle");
    await client.api.create(KOPFEXAMPLES, kex("racing", { size: 1 }), { namespace });
    await eventually(() => updates.length === 1, 20_000, "the racing change handled");
    assert.deepEqual(updates, [[["change", ["spec", "size"], 1, 2]]]);
    // Its first cycle, the second look that found the change, and the look after that write.
    assert.ok(await cycles() >= 3, `cycles: ${await cycles()}`);
  },
);

Deno.test(
  "settings.networking.maxConnections bounds the client's own connections to the API server",
  opts,
  async () => {
    const namespace = await testNamespace("conns");
    const names = await backlog(namespace, 60);
    using direct = await testClient();
    await using proxy = PausableTcpProxy.inFrontOf(direct);
    const client = proxy.client(direct, { maxConnections: 2 });
    const settings = createSettings({ posting: { enabled: false } });
    settings.networking.maxConnections = 2; // what kopf run passes on (tested apart below)
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn() {
        return { done: true };
      });
    }, { namespaces: [namespace], settings, client });
    await op.ready;
    await allHandled(namespace, names.length);
    // Two for the short requests, one each for the watches of the objects and of the CRDs.
    assert.ok(proxy.accepted <= 4, `connections: ${proxy.accepted}`);
    assert.equal(httpOptions(settings, new Logger(["t"])).maxConnections, 2);
    client[Symbol.dispose]();
  },
);
