/**
 * A failing API server, as docs/parity.md lists it against Kopf's documentation: a request
 * retried after API errors blocks only its object's worker (NET-03), each success resets the
 * backoff (NET-04), Events answered 404 are dropped (HIST-36), and an unavailable aggregated API
 * group does not block the scanning (RSPEC-14).
 *
 * Faults are injected by small HTTP proxies in front of the real API server (the answers that
 * get through are the server's own); the operators connect to them through a kubeconfig or a
 * client of their own, so the settings reach the client as they do in `kopf run`.
 */

import assert from "node:assert/strict";
import { Logger } from "../core/actions/loggers.ts";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import type { HttpClientOptions } from "../core/client/http.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { httpOptions } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { startOperator } from "./_operator.ts";
import { apiStatus, FaultProxy, runOperator, statusOf, within } from "./_parity.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  kex,
  KOPFEXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

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
        ? apiStatus(503, "injected: the server is unavailable")
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
      return apiStatus(503);
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

// ---------------------------------------------------------------------------------------------
// RSPEC-14: unavailable API groups in discovery.

/**
 * A plain-HTTP proxy to the real API server that forces the legacy discovery (one request per
 * group version: aggregated discovery never answers 503 for a group) and adds an aggregated API
 * group whose service is down: listed in `/apis`, answering 503 Service Unavailable, as the
 * API server does for an unavailable APIService (e.g. metrics.k8s.io without metrics-server).
 */
async function unavailableGroupProxy(group: string) {
  const plane = await sharedControlPlane();
  const tls = Deno.createHttpClient({ caCerts: [plane.caPem] });
  const unavailable: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const url = new URL(request.url);
      if (url.pathname.startsWith(`/apis/${group}/`) || url.pathname === `/apis/${group}`) {
        unavailable.push(url.pathname);
        return Response.json({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          message: "service unavailable",
          reason: "ServiceUnavailable",
          code: 503,
        }, { status: 503 });
      }
      const headers = new Headers(request.headers);
      headers.set("authorization", `Bearer ${plane.adminToken}`);
      const discovery = url.pathname === "/api" || url.pathname === "/apis";
      if (discovery) headers.set("accept", "application/json"); // no aggregated discovery
      const upstream = await fetch(`${plane.server}${url.pathname}${url.search}`, {
        method: request.method,
        headers,
        body: request.body,
        client: tls,
      });
      if (url.pathname !== "/apis" || !upstream.ok) {
        return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
      }
      const list = await upstream.json() as { groups: unknown[] };
      const version = { groupVersion: `${group}/v1beta1`, version: "v1beta1" };
      list.groups.push({ name: group, versions: [version], preferredVersion: version });
      return Response.json(list);
    },
  );
  return {
    unavailable,
    client: (options: HttpClientOptions) =>
      new KubeClient({
        server: `http://127.0.0.1:${server.addr.port}`,
        credentials: NO_CREDENTIALS,
        source: "test proxy",
      }, options),
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      tls.close();
    },
  };
}

Deno.test(
  "an unavailable aggregated API group (HTTP 503) does not block the scanning for group-less selectors: it is skipped (RSPEC-14)",
  opts,
  async () => {
    const namespace = await testNamespace("rspec-503");
    await using proxy = await unavailableGroupProxy("metrics.parity.kopf.dev");
    // As the operator makes its client; 5xx are retried (networking.errorBackoffs) before the
    // group is skipped: short delays here, ~54 s by default.
    const settings = createSettings({
      posting: { enabled: false },
      networking: { errorBackoffs: [0.1, 0.2] },
    });
    using viaProxy = proxy.client(httpOptions(settings, new Logger(["test"])));
    const seen: string[] = [];
    await using op = await startOperator((registry) => {
      on.event("configmaps", { registry }, function spy({ name, type }) {
        if (type === "ADDED") seen.push(name);
      });
    }, {
      namespaces: [namespace],
      client: viaProxy,
      settings,
    });
    await op.ready;
    assert.ok(proxy.unavailable.length >= 1, "the unavailable group was scanned (and got 503)");
    using client = await testClient();
    await client.api.create(CONFIGMAPS, { metadata: { name: "served" } }, { namespace });
    await eventually(() => seen.includes("served"), 15_000, "the group-less selector served");
    assert.equal(op.logs.some((e) => e.level === "error"), false, JSON.stringify(op.logs));
  },
);
