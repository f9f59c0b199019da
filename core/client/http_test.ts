import assert from "node:assert/strict";
import { NO_CREDENTIALS } from "./connection.ts";
import { TransportError } from "./errors.ts";
import { HttpClient, type HttpClientOptions } from "./http.ts";

/** A TCP server on 127.0.0.1 that accepts connections and never answers. */
function silentServer(): { port: number } & AsyncDisposable {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of listener) conns.push(conn);
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    [Symbol.asyncDispose]: async () => {
      listener.close();
      for (const conn of conns) conn.close();
      await accepting;
    },
  };
}

function clientFor(port: number, options: HttpClientOptions): HttpClient {
  return new HttpClient({
    server: `http://127.0.0.1:${port}`,
    credentials: NO_CREDENTIALS,
    source: "a test",
  }, { retries: 0, ...options });
}

async function timedOut(client: HttpClient, request: Parameters<HttpClient["send"]>[0]) {
  const error = await client.send(request).then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof TransportError, String(error));
  assert.equal(error.kind, "timeout");
  return error;
}

Deno.test("HttpClient stops waiting for response headers after the connect timeout (CFG-101)", async () => {
  await using server = silentServer();
  using client = clientFor(server.port, { timeoutMs: 60_000, connectTimeoutMs: 300 });
  const error = await timedOut(client, { path: "/version" });
  assert.match(error.message, /within the connect timeout of 300 ms: GET \/version/);
  // A per-request value overrides the client's.
  await timedOut(client, { path: "/api", connectTimeoutMs: 200 });
});

Deno.test("HttpClient streams fall back from the connect timeout to the request timeout (CFG-40)", async () => {
  await using server = silentServer();
  using client = clientFor(server.port, { timeoutMs: 300 });
  // A watch has no request timeout (0), yet its wait for the headers is bounded.
  const error = await timedOut(client, { path: "/api/v1/pods", stream: true, timeoutMs: 0 });
  assert.match(error.message, /within the connect timeout of 300 ms/);
});

Deno.test("HttpClient connect timeout stops counting once the headers arrived", async () => {
  // The headers come at once, the body only after the connect timeout has passed.
  await using server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, () => {
    const body = new ReadableStream<Uint8Array>({
      async start(controller) {
        await new Promise((resolve) => setTimeout(resolve, 600));
        controller.enqueue(new TextEncoder().encode('{"ok":true}'));
        controller.close();
      },
    });
    return new Response(body, { headers: { "Content-Type": "application/json" } });
  });
  using client = clientFor(server.addr.port, { timeoutMs: 60_000, connectTimeoutMs: 200 });
  assert.deepEqual(await client.json({ path: "/slow-body" }), { ok: true });
});
