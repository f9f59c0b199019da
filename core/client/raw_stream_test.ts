import assert from "node:assert/strict";
import { type ByteStream, rawRequest } from "./raw_stream.ts";
import { MalformedWatchLine, readWatchEvents, WatchStalledError } from "./watching.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

async function readAll(body: ByteStream): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  for (let bytes = await body.read(); bytes; bytes = await body.read()) {
    text += decoder.decode(bytes, { stream: true });
  }
  return text + decoder.decode();
}

/** A loopback HTTP/1.1 server answering with `handler`; closed by disposing. */
function serve(handler: (request: Request) => Response | Promise<Response>) {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  const { port } = server.addr as Deno.NetAddr;
  return {
    url: (path: string) => new URL(`http://127.0.0.1:${port}${path}`),
    [Symbol.asyncDispose]: () => server.shutdown(),
  };
}

Deno.test(
  "rawRequest() decodes a chunked body of many small chunks, split anywhere",
  opts,
  async () => {
    const events = Array.from({ length: 2000 }, (_, i) => `{"type":"ADDED","n":${i},"s":"é"}\n`);
    await using server = serve((request) => {
      assert.equal(request.headers.get("authorization"), "Bearer x");
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          const encoder = new TextEncoder();
          for (let i = 0; i < events.length; i++) {
            // Events split across chunks, and chunks holding several events.
            const text = events[i]!;
            controller.enqueue(encoder.encode(text.slice(0, 7)));
            controller.enqueue(encoder.encode(text.slice(7)));
            if (i % 100 === 0) await new Promise((r) => setTimeout(r, 1));
          }
          controller.close();
        },
      });
      return new Response(body, { headers: { "content-type": "application/json" } });
    });
    const response = await rawRequest({
      url: server.url("/watch?x=1"),
      method: "GET",
      headers: { Authorization: "Bearer x" },
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("transfer-encoding") ?? "", /chunked/);
    assert.equal(await readAll(response.body), events.join(""));
  },
);

Deno.test("rawRequest() reads a length-delimited error body", opts, async () => {
  await using server = serve(() =>
    new Response('{"kind":"Status","code":410}', { status: 410, headers: { "retry-after": "3" } })
  );
  const response = await rawRequest({ url: server.url("/"), method: "GET", headers: {} });
  assert.equal(response.status, 410);
  assert.equal(response.headers.get("retry-after"), "3");
  assert.equal(await readAll(response.body), '{"kind":"Status","code":410}');
});

Deno.test(
  "rawRequest() fails with the signal's reason when aborted while reading",
  opts,
  async () => {
    await using server = serve(() =>
      new Response(
        new ReadableStream({
          start(c) {
            c.enqueue(new TextEncoder().encode("{}\n"));
          },
        }),
      )
    );
    const controller = new AbortController();
    const response = await rawRequest({
      url: server.url("/"),
      method: "GET",
      headers: {},
      signal: controller.signal,
    });
    assert.deepEqual(new TextDecoder().decode((await response.body.read())!), "{}\n");
    const pending = response.body.read();
    controller.abort(new Error("stop"));
    await assert.rejects(pending);
  },
);

Deno.test(
  "readWatchEvents() reads ahead of a slow consumer and yields every event in order",
  opts,
  async () => {
    const count = 3000;
    await using server = serve(() => {
      const encoder = new TextEncoder();
      return new Response(
        new ReadableStream({
          start(controller) {
            for (let i = 0; i < count; i++) {
              controller.enqueue(encoder.encode(`{"type":"MODIFIED","object":{"n":${i}}}\n`));
            }
            controller.close();
          },
        }),
      );
    });
    const controller = new AbortController();
    const response = await rawRequest({ url: server.url("/"), method: "GET", headers: {} });
    const seen: number[] = [];
    // A tiny buffer bound: reading pauses and resumes many times.
    for await (const event of readWatchEvents(response.body, 60_000, controller, 4096)) {
      assert.ok(!(event instanceof MalformedWatchLine), "every line is JSON");
      seen.push((event.object as unknown as { n: number }).n);
      if (seen.length % 500 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    assert.deepEqual(seen, Array.from({ length: count }, (_, i) => i));
  },
);

Deno.test("readWatchEvents() aborts a silent stream with WatchStalledError", opts, async () => {
  await using server = serve(() => new Response(new ReadableStream({ start() {} })));
  const controller = new AbortController();
  const response = await rawRequest({
    url: server.url("/"),
    method: "GET",
    headers: {},
    signal: controller.signal,
  });
  await assert.rejects(async () => {
    for await (const _ of readWatchEvents(response.body, 200, controller)) { /* none */ }
  }, WatchStalledError);
});
