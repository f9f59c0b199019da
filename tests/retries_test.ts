/**
 * Retries, Retry-After and the rate limit, with faults injected by a small HTTP proxy placed in
 * front of the real API server (the answers that get through are the server's own).
 */

import assert from "node:assert/strict";
import { KubeClient } from "../core/client/client.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import { ApiError } from "../core/client/errors.ts";
import { Logger } from "../core/actions/loggers.ts";
import { httpOptions } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { CONFIGMAPS, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** Plain-HTTP proxy to the real server that answers with scripted faults first. */
async function faultProxy(faults: Array<{ status: number; headers?: Record<string, string> }>) {
  const plane = await sharedControlPlane();
  const tls = Deno.createHttpClient({ caCerts: [plane.caPem] });
  const arrivals: number[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      arrivals.push(performance.now());
      const fault = faults.shift();
      if (fault) {
        return new Response(
          JSON.stringify({ kind: "Status", code: fault.status, message: "injected" }),
          {
            status: fault.status,
            headers: fault.headers ?? {},
          },
        );
      }
      const url = new URL(request.url);
      const upstream = await fetch(`${plane.server}${url.pathname}${url.search}`, {
        method: request.method,
        headers: {
          ...Object.fromEntries(request.headers),
          authorization: `Bearer ${plane.adminToken}`,
        },
        body: request.body,
        client: tls,
      });
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
    },
  );
  const url = `http://127.0.0.1:${server.addr.port}`;
  return {
    url,
    arrivals,
    client: (options = {}) =>
      new KubeClient({ server: url, credentials: NO_CREDENTIALS, source: "test proxy" }, options),
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      tls.close();
    },
  };
}

Deno.test("429 with Retry-After is honoured, then the request succeeds", opts, async () => {
  const namespace = await testNamespace("retry");
  await using proxy = await faultProxy([{ status: 429, headers: { "Retry-After": "1" } }]);
  using client = proxy.client();
  const list = await client.api.list(CONFIGMAPS, { namespace });
  assert.ok(Array.isArray(list.items));
  assert.equal(client.counters.count({ code: 429 }), 1);
  assert.equal(client.counters.count({ code: 200 }), 1);
  assert.ok(proxy.arrivals[1]! - proxy.arrivals[0]! >= 950, "waited for Retry-After");
});

Deno.test("5xx answers are retried with growing backoff; 4xx are not", opts, async () => {
  const namespace = await testNamespace("retry5");
  await using proxy = await faultProxy([{ status: 503 }, { status: 500 }, { status: 502 }]);
  using client = proxy.client({ backoff: { initialMs: 50, factor: 3, jitter: 0 } });
  await client.api.list(CONFIGMAPS, { namespace });
  assert.equal(client.counters.count(), 4);
  const gaps = proxy.arrivals.slice(1).map((t, i) => t - proxy.arrivals[i]!);
  assert.ok(gaps[0]! >= 45 && gaps[1]! >= 140 && gaps[2]! >= 440, `gaps ${gaps}`);

  await using proxy2 = await faultProxy([{ status: 400 }]);
  using client2 = proxy2.client();
  const error = await client2.api.list(CONFIGMAPS, { namespace }).catch((e) => e);
  assert.ok(error instanceof ApiError && error.code === 400);
  assert.equal(client2.counters.count(), 1);
});

Deno.test("retries give up after the configured count", opts, async () => {
  await using proxy = await faultProxy([{ status: 503 }, { status: 503 }, { status: 503 }]);
  using client = proxy.client({ retries: 2, backoff: { initialMs: 10, jitter: 0 } });
  const error = await client.api.list(CONFIGMAPS, { namespace: "default" }).catch((e) => e);
  assert.ok(error instanceof ApiError && error.code === 503);
  assert.equal(client.counters.count({ code: 503 }), 3);
});

Deno.test("the client-side rate limit spaces requests out", opts, async () => {
  await using proxy = await faultProxy([]);
  using client = proxy.client({ qps: 10, burst: 2 });
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 6 }, () => client.api.list(CONFIGMAPS, { namespace: "default" })),
  );
  const elapsed = performance.now() - started;
  // 2 requests from the burst, then 4 more at 10/s: at least ~400 ms.
  assert.ok(elapsed >= 350, `elapsed ${elapsed}`);
  assert.equal(client.counters.count({ code: 200 }), 6);
});

Deno.test("request timeouts abort hung requests", opts, async () => {
  const stop = new AbortController();
  const never = new Promise<Response>(() => {});
  const hung = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: () => {},
    signal: stop.signal,
  }, () => never);
  try {
    using client = new KubeClient({
      server: `http://127.0.0.1:${hung.addr.port}`,
      credentials: NO_CREDENTIALS,
      source: "test",
    }, { timeoutMs: 200, retries: 1, backoff: { initialMs: 10 } });
    const error = await client.api.list(CONFIGMAPS, { namespace: "default" }).catch((e) => e);
    assert.equal(error.name, "TransportError");
    assert.equal(error.kind, "timeout");
    assert.equal(client.counters.count({ code: 0 }), 2);
  } finally {
    stop.abort();
  }
});

Deno.test(
  "settings.networking.errorBackoffs is the retry schedule; an empty one disables retries (CFG-102)",
  opts,
  async () => {
    const namespace = await testNamespace("retry-schedule");
    const traffic = new Logger(["test"]);
    // 50 ms, then 300 ms, then 100 ms: a growing backoff could not produce the shorter third gap.
    const settings = createSettings({ networking: { errorBackoffs: [0.05, 0.3, 0.1] } });
    await using proxy = await faultProxy([{ status: 503 }, { status: 503 }, { status: 503 }]);
    using client = proxy.client(httpOptions(settings, traffic));
    await client.api.list(CONFIGMAPS, { namespace });
    assert.equal(client.counters.count({ code: 503 }), 3);
    const gaps = proxy.arrivals.slice(1).map((t, i) => t - proxy.arrivals[i]!);
    assert.ok(gaps[0]! >= 35 && gaps[0]! < gaps[1]!, `gaps ${gaps}`);
    assert.ok(gaps[1]! >= 230, `gaps ${gaps}`);
    assert.ok(gaps[2]! >= 75 && gaps[2]! < gaps[1]!, `gaps ${gaps}`);

    const none = createSettings({ networking: { errorBackoffs: [] } });
    await using proxy2 = await faultProxy([{ status: 503 }]);
    using client2 = proxy2.client(httpOptions(none, traffic));
    const error = await client2.api.list(CONFIGMAPS, { namespace }).catch((e) => e);
    assert.ok(error instanceof ApiError && error.code === 503);
    assert.equal(client2.counters.count(), 1);
  },
);
