import assert from "node:assert/strict";
import { type HttpHandler, type HttpServerOptions, serveHttp } from "./http_server.ts";
import { selfSignedServerCertificate } from "../../kits/certificates.ts";
import { exchange, PATIENCE_MS, RawHttp as Raw } from "../../tests/_raw_http.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const encoder = new TextEncoder();

const echo: HttpHandler = async (request) =>
  new Response(
    `${request.method} ${new URL(request.url).pathname} ${(await request.bytes()).length}\n`,
  );

function start(options: Partial<HttpServerOptions> = {}, handler: HttpHandler = echo) {
  const controller = new AbortController();
  const server = serveHttp(
    { hostname: "127.0.0.1", port: 0, signal: controller.signal, ...options },
    handler,
  );
  return {
    server,
    port: server.port,
    async [Symbol.asyncDispose]() {
      controller.abort();
      await server.finished;
    },
  };
}

Deno.test(
  "serveHttp() answers web Requests with web Responses, keeping the connection alive",
  opts,
  async () => {
    await using s = start();
    const raw = await Raw.open(s.port);
    await raw.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal((await raw.response()).body, "GET /a 0\n");
    await raw.send("POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello");
    assert.equal((await raw.response()).body, "POST /b 5\n");
    await raw.send(
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n",
    );
    assert.equal((await raw.response()).body, "POST /c 5\n");
    raw.close();
    const response = await fetch(`http://127.0.0.1:${s.port}/d`, { method: "POST", body: "xyz" });
    assert.equal(await response.text(), "POST /d 3\n");
    assert.equal(s.server.stats().accepted >= 2, true);
  },
);

Deno.test("serveHttp() honours Connection: close and HTTP/1.0", opts, async () => {
  await using s = start();
  for (
    const request of [
      "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
      "GET / HTTP/1.0\r\n\r\n",
    ]
  ) {
    const raw = await Raw.open(s.port);
    await raw.send(request);
    const response = await raw.response();
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("connection"), "close");
    await raw.closed();
    raw.close();
  }
});

Deno.test(
  "serveHttp() refuses a declared Content-Length over the cap with 413 before reading the body, on many connections at once",
  opts,
  async () => {
    let called = 0;
    await using s = start({ maxBodyBytes: 7 << 20 }, () => {
      called++;
      return new Response("no");
    });
    const answers = await Promise.all(Array.from({ length: 50 }, async () => {
      const raw = await Raw.open(s.port);
      try {
        // Headers only: a server that waited for the body would never answer.
        await raw.send(
          "POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n",
        );
        const response = await raw.response();
        await raw.closed();
        return response;
      } finally {
        raw.close();
      }
    }));
    assert.deepEqual(new Set(answers.map((a) => a.status)), new Set([413]));
    assert.match(answers[0]!.body, /larger than 7340032 bytes/);
    assert.equal(called, 0);
    // Only the headers were ever held: nothing near the declared 50 × 20 MB.
    assert.ok(
      s.server.stats().peakBufferedBytes < 50 * 1024,
      `${s.server.stats().peakBufferedBytes}`,
    );
  },
);

Deno.test(
  "serveHttp() answers 413 to a real body over the cap, Content-Length or chunked, holding no more than the cap",
  opts,
  async () => {
    await using s = start({ maxBodyBytes: 1024 });
    const big = "x".repeat(1025);
    const a = await exchange(
      s.port,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    );
    assert.equal(a.status, 413);
    const chunks = `200\r\n${"y".repeat(512)}\r\n200\r\n${"y".repeat(512)}\r\n1\r\ny\r\n0\r\n\r\n`;
    const b = await exchange(
      s.port,
      `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}`,
    );
    assert.equal(b.status, 413);
    // Through fetch, streaming a body larger than the cap.
    const response = await fetch(`http://127.0.0.1:${s.port}/`, {
      method: "POST",
      body: new Uint8Array(5 << 20),
    }).catch((error) => error as Error);
    if (response instanceof Response) assert.equal(response.status, 413);
    assert.ok(s.server.stats().peakBufferedBytes < 64 * 1024);
    const ok = await exchange(
      s.port,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1024\r\n\r\n${"z".repeat(1024)}`,
    );
    assert.equal(ok.body, "POST / 1024\n");
  },
);

Deno.test(
  "serveHttp() refuses ambiguous or malformed framing (request smuggling)",
  opts,
  async () => {
    await using s = start();
    const cases: [string, number][] = [
      [
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
      ],
      ["POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400],
      ["POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 3\r\n\r\nabc", 400],
      ["POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc", 400],
      ["POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x3\r\n\r\nabc", 400],
      ["POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501],
      [
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        501,
      ],
      ["POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400],
      ["POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400],
      [
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
        400,
      ],
      ["GET / HTTP/1.1\nHost: x\n\n", 400],
      ["GET / HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", 400],
      ["GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n", 400],
      ["GET / HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n", 400],
      ["GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 400],
      ["GET / HTTP/1.1\r\n\r\n", 400],
      ["GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400],
      ["GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505],
      ["NOT A REQUEST\r\n\r\n", 400],
      ["GET / HTTP/1.1\r\nHost: x\r\nExpect: magic\r\n\r\n", 417],
    ];
    for (const [request, status] of cases) {
      const response = await exchange(s.port, request);
      assert.equal(response.status, status, JSON.stringify(request));
      assert.equal(response.headers.get("connection"), "close");
    }
  },
);

Deno.test("serveHttp() answers 431 to headers over their cap", opts, async () => {
  await using s = start({ maxHeaderBytes: 1024 });
  const response = await exchange(
    s.port,
    `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(2000)}\r\n\r\n`,
  );
  assert.equal(response.status, 431);
  const many = Array.from({ length: 100 }, (_, i) => `X-${i}: 1234567890\r\n`).join("");
  assert.equal((await exchange(s.port, `GET / HTTP/1.1\r\nHost: x\r\n${many}\r\n`)).status, 431);
});

Deno.test("serveHttp() answers 100 Continue, then the response", opts, async () => {
  await using s = start();
  const raw = await Raw.open(s.port);
  await raw.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  assert.equal((await raw.response()).status, 100);
  await raw.send("ok");
  assert.equal((await raw.response()).body, "POST / 2\n");
  raw.close();
});

Deno.test(
  "serveHttp() closes a connection whose headers trickle past the header timeout",
  opts,
  async () => {
    await using s = start({ headerTimeout: 0.3 });
    const raw = await Raw.open(s.port);
    await raw.send("GET / HTTP/1.1\r\nHost: x\r\n");
    for (let i = 0; i < 3; i++) await raw.send("X-A: 1\r\n"); // trickled, never finished
    await raw.closed();
    raw.close();
    assert.equal(s.server.stats().timedOut, 1);
  },
);

Deno.test(
  "serveHttp() closes a connection whose body trickles past the body timeout",
  opts,
  async () => {
    await using s = start({ bodyTimeout: 0.3 });
    const raw = await Raw.open(s.port);
    await raw.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc");
    await raw.closed();
    raw.close();
    assert.equal(s.server.stats().timedOut, 1);
  },
);

Deno.test(
  "serveHttp() closes an idle kept-alive connection after the idle timeout",
  opts,
  async () => {
    await using s = start({ idleTimeout: 0.3 });
    const raw = await Raw.open(s.port);
    await raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal((await raw.response()).status, 200);
    await raw.closed();
    raw.close();
    assert.equal(s.server.stats().timedOut, 1);
  },
);

Deno.test(
  "serveHttp() with TLS closes a connection whose handshake is not finished within the header timeout",
  opts,
  async () => {
    const { certPem, keyPem, caPem } = await selfSignedServerCertificate(["127.0.0.1"]);
    await using s = start({ cert: certPem, key: keyPem, headerTimeout: 0.3 });
    // Nothing sent at all, and a ClientHello cut short.
    const silent = await Raw.open(s.port);
    const partial = await Raw.open(s.port);
    await partial.send(new Uint8Array([0x16, 0x03, 0x01, 0x00, 0xc8, 0x01, 0x00, 0x00]));
    await Promise.all([silent.closed(), partial.closed()]);
    silent.close();
    partial.close();
    assert.equal(s.server.stats().timedOut, 2);
    // A real client is served, its headers timed from the handshake on.
    const client = Deno.createHttpClient({ caCerts: [caPem] });
    try {
      const response = await fetch(`https://127.0.0.1:${s.port}/tls`, { client });
      assert.equal(await response.text(), "GET /tls 0\n");
    } finally {
      client.close();
    }
  },
);

Deno.test(
  "serveHttp() with TLS closes a connection whose headers trickle after the handshake",
  opts,
  async () => {
    const { certPem, keyPem, caPem } = await selfSignedServerCertificate(["127.0.0.1"]);
    await using s = start({ cert: certPem, key: keyPem, headerTimeout: 0.5 });
    const conn = await Deno.connectTls({ hostname: "127.0.0.1", port: s.port, caCerts: [caPem] });
    await conn.handshake();
    await conn.write(encoder.encode("GET / HTTP/1.1\r\n"));
    const n = await Promise.race([
      conn.read(new Uint8Array(100)).catch(() => null),
      new Promise<"hang">((resolve) => setTimeout(() => resolve("hang"), PATIENCE_MS)),
    ]);
    conn.close();
    assert.equal(n, null);
    assert.equal(s.server.stats().timedOut, 1);
  },
);

Deno.test(
  "serveHttp() closes connections over the cap at once and serves the earlier ones",
  opts,
  async () => {
    await using s = start({ maxConnections: 2 });
    const first = await Raw.open(s.port);
    const second = await Raw.open(s.port);
    // Both are accepted (a request each proves it) and kept open.
    await first.send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal((await first.response()).body, "GET /1 0\n");
    await second.send("GET /2 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal((await second.response()).body, "GET /2 0\n");
    const third = await Raw.open(s.port);
    await third.closed();
    third.close();
    assert.equal(s.server.stats().refused, 1);
    await first.send("GET /1 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert.equal((await first.response()).status, 200);
    first.close();
    second.close();
  },
);

Deno.test(
  "serveHttp() answers 503 when requests in progress hold the whole buffer budget",
  opts,
  async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    await using s = start({ maxBufferedBytes: 3000, maxBodyBytes: 2000 }, async (request) => {
      await request.bytes();
      await held;
      return new Response("ok");
    });
    const first = await Raw.open(s.port);
    await first.send(
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n${"a".repeat(2000)}`,
    );
    while (s.server.stats().bufferedBytes < 2000) await new Promise((r) => setTimeout(r, 10));
    const second = await exchange(
      s.port,
      `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\n\r\n${"b".repeat(2000)}`,
    );
    assert.equal(second.status, 503);
    release();
    assert.equal((await first.response()).body, "ok");
    first.close();
  },
);

Deno.test("serveHttp() answers 500 when the handler fails, and goes on serving", opts, async () => {
  const errors: unknown[] = [];
  await using s = start({ onError: (error) => errors.push(error) }, (request) => {
    if (new URL(request.url).pathname === "/fail") return Promise.reject(new Error("boom"));
    return Promise.resolve(new Response("fine"));
  });
  const raw = await Raw.open(s.port);
  await raw.send("GET /fail HTTP/1.1\r\nHost: x\r\n\r\n");
  const failed = await raw.response();
  assert.equal(failed.status, 500);
  assert.doesNotMatch(failed.body, /boom/);
  await raw.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
  assert.equal((await raw.response()).body, "fine");
  raw.close();
  assert.equal(errors.length, 1);
});

Deno.test(
  "serveHttp() stops on abort: idle connections closed, a request in progress answered",
  opts,
  async () => {
    let entered!: () => void;
    const inHandler = new Promise<void>((resolve) => (entered = resolve));
    const controller = new AbortController();
    const server = serveHttp(
      { hostname: "127.0.0.1", port: 0, signal: controller.signal },
      async (request) => {
        if (new URL(request.url).pathname === "/slow") {
          entered();
          await new Promise((r) => setTimeout(r, 100));
        }
        return new Response("done");
      },
    );
    const idle = await Raw.open(server.port);
    const busy = await Raw.open(server.port);
    await busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    await inHandler;
    controller.abort();
    await idle.closed();
    const response = await busy.response();
    assert.equal(response.body, "done");
    assert.equal(response.headers.get("connection"), "close");
    await server.finished;
    idle.close();
    busy.close();
    await assert.rejects(Deno.connect({ hostname: "127.0.0.1", port: server.port }));
  },
);

Deno.test("serveHttp() refuses limits that are not positive numbers", () => {
  assert.throws(
    () => serveHttp({ port: 0, maxBodyBytes: -1 }, echo),
    /maxBodyBytes must be a positive number, got -1/,
  );
});
