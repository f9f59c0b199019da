/**
 * Hostile clients at the operator's three HTTP servers — the admission webhook server (the real
 * `WebhookServer`, over TLS, with the framework's review function) and the real liveness and
 * metrics endpoints (`serveLiveness`, `serveMetrics`): bodies declared or sent over the cap,
 * many connections declaring huge bodies at once, half-done TLS handshakes, trickled headers and
 * bodies, idle keep-alive connections, more connections than the cap. Timeouts are set small
 * here; the defaults are in docs/admission.md and docs/reliability.md.
 *
 * No cluster is involved: what is tested is the operator's own listener (tests/admission_test.ts
 * has the API server calling the same server).
 */

import assert from "node:assert/strict";
import {
  createSettings,
  OperatorRegistry,
  WebhookServer,
  type WebhookServerOptions,
} from "../mod.ts";
import { Logger } from "../core/actions/loggers.ts";
import { createWebhookFn } from "../core/engines/admission/admission.ts";
import {
  PROBE_HTTP_LIMITS,
  serveLiveness,
  serveMetrics,
} from "../core/engines/observability/probing.ts";
import type { HttpServerLimits } from "../core/util/http_server.ts";
import type { WebhookHandler } from "../core/intents/handlers.ts";
import type { AdmissionReview } from "../core/structs/admission.ts";
import { exchange, RawHttp } from "./_raw_http.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const REVIEW: AdmissionReview = {
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: "u1",
    kind: { group: "kopf.dev", version: "v1", kind: "KopfExample" },
    resource: { group: "kopf.dev", version: "v1", resource: "kopfexamples" },
    operation: "CREATE",
    object: { metadata: { name: "x" }, spec: {} },
  },
};

/** The real webhook server with the framework's review function and one validating handler. */
async function webhookServer(options: WebhookServerOptions = {}) {
  const registry = new OperatorRegistry();
  const handler: WebhookHandler = {
    kind: "webhook",
    webhook: "validating",
    id: "check",
    fn: (() => {}) as never,
    param: undefined,
    persistent: false,
    sideEffects: false,
    ignoreFailures: false,
  };
  registry.registerWebhook({ plural: "kopfexamples" }, handler);
  const controller = new AbortController();
  const fn = createWebhookFn({
    registry,
    settings: createSettings(),
    logger: new Logger(["test"], { listeners: [] }),
    memo: {},
    signal: controller.signal,
  });
  const server = new WebhookServer({ addr: "127.0.0.1", port: 0, ...options });
  const serving = server.serve(fn, { signal: controller.signal });
  const config = (await serving.next()).value as { url: string; caBundle: string };
  const rest = serving.next(); // runs until the signal aborts
  return {
    port: server.port!,
    url: config.url,
    caPem: atob(config.caBundle),
    async [Symbol.asyncDispose]() {
      controller.abort();
      await rest;
    },
  };
}

function reviewRequest(body: string, headers = ""): string {
  return `POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${new TextEncoder().encode(body).length}\r\n${headers}\r\n${body}`;
}

function rssMiB(): number {
  return Deno.memoryUsage().rss / 2 ** 20;
}

Deno.test(
  "the webhook server still answers a normal review, over TLS, with keep-alive",
  opts,
  async () => {
    await using server = await webhookServer();
    const raw = await RawHttp.openTls(server.port, server.caPem);
    for (let i = 0; i < 2; i++) {
      await raw.send(reviewRequest(JSON.stringify(REVIEW)));
      const response = await raw.response();
      assert.equal(response.status, 200);
      const answer = JSON.parse(response.body) as AdmissionReview;
      assert.equal(answer.response?.uid, "u1");
      assert.equal(answer.response?.allowed, true);
    }
    raw.close();
    const client = Deno.createHttpClient({ caCerts: [server.caPem] });
    try {
      const response = await fetch(`${server.url}/check`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(REVIEW),
        client,
      });
      assert.equal(((await response.json()) as AdmissionReview).response?.allowed, true);
    } finally {
      client.close();
    }
  },
);

Deno.test(
  "50 connections declaring 20 MB bodies get 413 from the webhook server at once, without the body being read or memory growing",
  opts,
  async () => {
    await using server = await webhookServer();
    const before = rssMiB();
    const answers = await Promise.all(Array.from({ length: 50 }, async () => {
      const raw = await RawHttp.openTls(server.port, server.caPem);
      try {
        // The headers only: a server that waited for (or reserved) the body would not answer.
        await raw.send(
          "POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
            "Content-Length: 20000000\r\n\r\n",
        );
        const response = await raw.response();
        await raw.closed();
        return response;
      } finally {
        raw.close();
      }
    }));
    const growth = rssMiB() - before;
    assert.deepEqual(answers.map((a) => a.status), Array(50).fill(413));
    assert.match(answers[0]!.body, /larger than 7340032 bytes/);
    // Deno.serve + request.json() took 1.3 GB here (50 × 20 MB, reserved from the declaration).
    assert.ok(growth < 200, `RSS grew by ${growth.toFixed(0)} MiB`);
  },
);

Deno.test(
  "a real body over maxBodyBytes gets 413 from the webhook server, sent whole or chunked",
  opts,
  async () => {
    await using server = await webhookServer({ maxBodyBytes: 64 * 1024 });
    const big = JSON.stringify({ ...REVIEW, padding: "x".repeat(100 * 1024) });
    const whole = await exchange(server.port, reviewRequest(big), server.caPem);
    assert.equal(whole.status, 413);
    const piece = "y".repeat(16 * 1024);
    const chunked = "POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
      "Transfer-Encoding: chunked\r\n\r\n" +
      `${(16 * 1024).toString(16)}\r\n${piece}\r\n`.repeat(5) + "0\r\n\r\n";
    assert.equal((await exchange(server.port, chunked, server.caPem)).status, 413);
    // A review under the cap is still answered.
    const fine = await exchange(server.port, reviewRequest(JSON.stringify(REVIEW)), server.caPem);
    assert.equal(fine.status, 200);
  },
);

Deno.test(
  "the webhook server closes a half-done TLS handshake, trickled headers, a trickled body and an idle connection after their timeouts",
  opts,
  async () => {
    await using server = await webhookServer({
      headerTimeout: 0.3,
      bodyTimeout: 0.3,
      idleTimeout: 0.3,
    });
    // No ClientHello at all, and one cut short.
    const silent = await RawHttp.open(server.port);
    const partial = await RawHttp.open(server.port);
    await partial.send(new Uint8Array([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00]));
    // Headers that never end.
    const headers = await RawHttp.openTls(server.port, server.caPem);
    await headers.send("POST /check HTTP/1.1\r\nHost: x\r\n");
    await headers.send("Content-Type: application/json\r\n");
    // A body that never ends.
    const body = await RawHttp.openTls(server.port, server.caPem);
    await body.send(
      "POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    );
    // A kept-alive connection left idle after a review.
    const idle = await RawHttp.openTls(server.port, server.caPem);
    await idle.send(reviewRequest(JSON.stringify(REVIEW)));
    assert.equal((await idle.response()).status, 200);
    const all = [silent, partial, headers, body, idle];
    await Promise.all(all.map((raw) => raw.closed()));
    for (const raw of all) raw.close();
    // The server is still there for others.
    const fine = await exchange(server.port, reviewRequest(JSON.stringify(REVIEW)), server.caPem);
    assert.equal(fine.status, 200);
  },
);

Deno.test(
  "the webhook server closes connections over maxConnections at once and serves the earlier ones",
  opts,
  async () => {
    await using server = await webhookServer({ maxConnections: 2 });
    const first = await RawHttp.openTls(server.port, server.caPem);
    const second = await RawHttp.openTls(server.port, server.caPem);
    const third = await RawHttp.open(server.port);
    await third.closed();
    third.close();
    for (const raw of [first, second]) {
      await raw.send(reviewRequest(JSON.stringify(REVIEW)));
      assert.equal((await raw.response()).status, 200);
    }
    first.close();
    second.close();
  },
);

/** The real liveness endpoint (and, apart, the metrics one), with these limits. */
function endpoints(limits: HttpServerLimits = {}) {
  const controller = new AbortController();
  const liveness = serveLiveness({
    url: "http://127.0.0.1:0/healthz",
    handlers: [],
    memo: {},
    settings: createSettings(),
    logger: new Logger(["test"], { listeners: [] }),
    problems: () => undefined,
    signal: controller.signal,
    limits,
  });
  const metrics = serveMetrics({
    url: "http://127.0.0.1:0/metrics",
    render: () =>
      Promise.resolve(new Response("kopf_up 1\n", { headers: { "content-type": "text/plain" } })),
    signal: controller.signal,
    limits,
  });
  return {
    liveness: liveness.port,
    metrics: metrics.port,
    async [Symbol.asyncDispose]() {
      controller.abort();
      await Promise.all([liveness.finished, metrics.finished]);
    },
  };
}

Deno.test(
  "/healthz and /metrics still answer, and refuse a body over their small fixed cap with 413",
  opts,
  async () => {
    await using servers = endpoints();
    const healthz = await fetch(`http://127.0.0.1:${servers.liveness}/healthz`);
    assert.equal(healthz.status, 200);
    assert.deepEqual(await healthz.json(), {});
    assert.equal(
      await (await fetch(`http://127.0.0.1:${servers.metrics}/metrics`)).text(),
      "kopf_up 1\n",
    );
    const over = PROBE_HTTP_LIMITS.maxBodyBytes + 1;
    for (
      const [port, path] of [[servers.liveness, "/healthz"], [servers.metrics, "/metrics"]] as const
    ) {
      const declared = await exchange(
        port,
        `GET ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n`,
      );
      assert.equal(declared.status, 413);
      const sent = await exchange(
        port,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${over}\r\n\r\n${"z".repeat(over)}`,
      );
      assert.equal(sent.status, 413);
    }
  },
);

Deno.test(
  "/healthz and /metrics close trickled headers and bodies and idle connections after their timeouts",
  opts,
  async () => {
    await using servers = endpoints({ headerTimeout: 0.3, bodyTimeout: 0.3, idleTimeout: 0.3 });
    const all: RawHttp[] = [];
    for (
      const [port, path] of [[servers.liveness, "/healthz"], [servers.metrics, "/metrics"]] as const
    ) {
      const headers = await RawHttp.open(port);
      await headers.send(`GET ${path} HTTP/1.1\r\nHost: x\r\n`);
      const body = await RawHttp.open(port);
      await body.send(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab`);
      const idle = await RawHttp.open(port);
      await idle.send(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.equal((await idle.response()).status, 200);
      all.push(headers, body, idle);
    }
    await Promise.all(all.map((raw) => raw.closed()));
    for (const raw of all) raw.close();
  },
);

Deno.test(
  "/healthz and /metrics close connections over their cap at once and serve the earlier ones",
  opts,
  async () => {
    await using servers = endpoints({ maxConnections: 1 });
    for (
      const [port, path] of [[servers.liveness, "/healthz"], [servers.metrics, "/metrics"]] as const
    ) {
      const first = await RawHttp.open(port);
      const second = await RawHttp.open(port);
      await second.closed();
      second.close();
      await first.send(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.equal((await first.response()).status, 200);
      first.close();
    }
  },
);
