import assert from "node:assert/strict";
import {
  ApiError,
  apiErrorFrom,
  isRetryable,
  TransportError,
  transportErrorFrom,
} from "./errors.ts";

const request = { method: "GET", path: "/api/v1/namespaces/x/pods", server: "https://127.0.0.1:1" };

Deno.test("apiErrorFrom() maps a Status body to code, reason, message and details", () => {
  const body = JSON.stringify({
    kind: "Status",
    status: "Failure",
    reason: "Forbidden",
    code: 403,
    message: 'pods is forbidden: User "bob" cannot list resource "pods"',
    details: { kind: "pods" },
  });
  const error = apiErrorFrom(403, body, request);
  assert.ok(error instanceof ApiError);
  assert.equal(error.code, 403);
  assert.equal(error.reason, "Forbidden");
  assert.equal(error.details?.kind, "pods");
  assert.equal(
    error.message,
    'Forbidden (403): pods is forbidden: User "bob" cannot list resource "pods" [GET /api/v1/namespaces/x/pods]',
  );
  assert.equal(error.message.includes("\n"), false);
});

Deno.test("apiErrorFrom() copes with non-JSON bodies and retry hints", () => {
  const error = apiErrorFrom(503, "<html>\nupstream down</html>", request, 2000);
  assert.equal(error.reason, "ServiceUnavailable");
  assert.equal(error.serverMessage, "<html>");
  assert.equal(error.retryAfterMs, 2000);
  const hinted = apiErrorFrom(
    429,
    JSON.stringify({ kind: "Status", details: { retryAfterSeconds: 3 } }),
    request,
  );
  assert.equal(hinted.retryAfterMs, 3000);
});

Deno.test("isRetryable() retries 429, 5xx and network failures, never other 4xx or TLS trust", () => {
  for (const code of [429, 500, 502, 503, 504]) {
    assert.equal(isRetryable(apiErrorFrom(code, "", request)), true);
  }
  for (const code of [400, 401, 403, 404, 409, 410, 422]) {
    assert.equal(isRetryable(apiErrorFrom(code, "", request)), false);
  }
  assert.equal(isRetryable(new TransportError("x", request, "network")), true);
  assert.equal(isRetryable(new TransportError("x", request, "timeout")), true);
  assert.equal(isRetryable(new TransportError("x", request, "tls")), false);
  assert.equal(isRetryable(new Error("other")), false);
});

Deno.test("transportErrorFrom() explains certificate and connection failures in one line", () => {
  const tls = transportErrorFrom(
    new TypeError("error sending request: invalid peer certificate: UnknownIssuer"),
    request,
    "kubeconfig /k",
  );
  assert.equal(tls.kind, "tls");
  assert.match(
    tls.message,
    /^Cannot verify the TLS certificate of https:\/\/127\.0\.0\.1:1: .*check the CA in kubeconfig \/k$/,
  );
  const net = transportErrorFrom(
    new TypeError("error sending request: Connection refused (os error 111)"),
    request,
    "kubeconfig /k",
  );
  assert.equal(net.kind, "network");
  assert.match(
    net.message,
    /^Cannot reach the API server at https:\/\/127\.0\.0\.1:1: .*Connection refused/,
  );
});

Deno.test("transportErrorFrom(): a connection cut mid-request is a network failure (retried), though it names TLS", () => {
  for (
    const text of [
      "peer closed connection without sending TLS close_notify: https://docs.rs/rustls/…#unexpected-eof",
      "error reading a body from connection: unexpected EOF during TLS read",
      "Connection reset by peer (os error 104)",
    ]
  ) {
    const cut = transportErrorFrom(new TypeError(text), request, "kubeconfig /k");
    assert.equal(cut.kind, "network", text);
    assert.equal(isRetryable(cut), true, text);
  }
});
