import assert from "node:assert/strict";
import { RawHttpPool } from "./raw_http.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * A tiny HTTP/1.1 server on a raw socket, answering each request with what `answer` returns
 * (raw bytes after the head), so that tests control framing and connection closing.
 */
function server(answer: (request: string, index: number) => string | null) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const connections: Deno.Conn[] = [];
  let requests = 0;
  const serving = (async () => {
    for await (const conn of listener) {
      connections.push(conn);
      (async () => {
        const buf = new Uint8Array(65536);
        let pending = "";
        try {
          for (;;) {
            const n = await conn.read(buf);
            if (n === null) break;
            pending += decoder.decode(buf.subarray(0, n));
            for (;;) {
              const end = pending.indexOf("\r\n\r\n");
              if (end < 0) break;
              const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
              if (pending.length < end + 4 + length) break;
              const request = pending.slice(0, end + 4 + length);
              pending = pending.slice(end + 4 + length);
              const reply = answer(request, requests++);
              if (reply === null) {
                conn.close();
                return;
              }
              await conn.write(encoder.encode(reply));
            }
          }
        } catch { /* closed */ }
      })();
    }
  })().catch(() => {});
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    url: new URL(`http://127.0.0.1:${port}`),
    get requests() {
      return requests;
    },
    get connections() {
      return connections.length;
    },
    closeAll() {
      for (const c of connections) {
        try {
          c.close();
        } catch { /* closed */ }
      }
    },
    async stop() {
      listener.close();
      this.closeAll();
      await serving;
    },
  };
}

const ok = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${
    encoder.encode(body).length
  }\r\n${extra}\r\n${body}`;

Deno.test("RawHttpPool keeps connections alive, reads Content-Length and chunked answers", async () => {
  const s = server((request, i) => {
    const body = JSON.stringify({
      i,
      method: request.split(" ")[0],
      sent: request.split("\r\n\r\n")[1],
    });
    if (i % 2) return ok(body);
    // Chunked, split into two chunks with an extension and a multi-byte character.
    const bytes = encoder.encode(body.slice(0, -1) + ',"x":"é"}');
    const half = 10;
    return `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${half.toString(16)};ext=1\r\n` +
      decoder.decode(bytes.subarray(0, half)) + `\r\n${(bytes.length - half).toString(16)}\r\n` +
      decoder.decode(bytes.subarray(half)) + "\r\n0\r\n\r\n";
  });
  const pool = new RawHttpPool({ server: s.url });
  try {
    for (let i = 0; i < 6; i++) {
      const answer = await pool.request({
        method: "PATCH",
        target: "/x",
        headers: { "Content-Type": "application/json" },
        body: `{"n":${i}}`,
      });
      assert.equal(answer.status, 200);
      const parsed = JSON.parse(answer.text);
      assert.equal(parsed.i, i);
      assert.equal(parsed.sent, `{"n":${i}}`);
      if (i % 2 === 0) assert.equal(parsed.x, "é");
    }
    assert.equal(s.connections, 1, "one kept-alive connection for sequential requests");
    assert.equal(pool.open, 1);
  } finally {
    pool.close();
    await s.stop();
  }
});

Deno.test("RawHttpPool: header names in any case, their values trimmed; the header map on demand", async () => {
  const heads: string[] = [];
  const s = server((request) => {
    heads.push(request.slice(0, request.indexOf("\r\n\r\n")));
    const body = '{"ok":"ü"}';
    return `HTTP/1.1 429 Too Many Requests\r\nRETRY-after:  7 \r\ncontent-LENGTH: ${
      encoder.encode(body).length
    }\r\nX-Content-Length: 1\r\n\r\n${body}`;
  });
  const pool = new RawHttpPool({ server: s.url });
  try {
    const answer = await pool.request({ method: "POST", target: "/y", headers: {}, body: "{}" });
    assert.equal(answer.status, 429);
    assert.equal(answer.text, '{"ok":"ü"}', "framed by the mixed-case Content-Length");
    assert.equal(answer.headers.get("retry-after"), "7");
    assert.equal(answer.headers.get("x-content-length"), "1");
    assert.match(heads[0]!, /\r\nContent-Length: 2$/);
  } finally {
    pool.close();
    await s.stop();
  }
});

Deno.test("RawHttpPool replaces a kept-alive connection the server closed while idle, once", async () => {
  const s = server((_request, i) => ok(JSON.stringify({ i })));
  const pool = new RawHttpPool({ server: s.url });
  try {
    assert.equal(
      JSON.parse((await pool.request({ method: "GET", target: "/", headers: {} })).text).i,
      0,
    );
    s.closeAll(); // the server's idle timeout
    await new Promise((r) => setTimeout(r, 50));
    const again = await pool.request({ method: "PATCH", target: "/", headers: {}, body: "{}" });
    assert.equal(JSON.parse(again.text).i, 1, "sent once more on a new connection, answered");
    assert.equal(s.requests, 2, "no request was sent twice");
    assert.equal(s.connections, 2);
  } finally {
    pool.close();
    await s.stop();
  }
});

Deno.test("RawHttpPool: Connection: close answers and answers until close end their connection", async () => {
  const s = server((_request, i) =>
    i === 0
      ? ok("{}", "Connection: close\r\n")
      : `HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"until":"close"}`
  );
  const pool = new RawHttpPool({ server: s.url });
  try {
    assert.equal((await pool.request({ method: "GET", target: "/", headers: {} })).text, "{}");
    // An answer without length is read until the server closes (the test server closes after
    // writing only if told to; here it keeps the socket, so close it from its side).
    const pending = pool.request({ method: "GET", target: "/", headers: {} });
    await new Promise((r) => setTimeout(r, 50));
    s.closeAll();
    assert.equal((await pending).text, '{"until":"close"}');
    assert.equal(pool.open, 0, "neither connection is kept");
  } finally {
    pool.close();
    await s.stop();
  }
});

Deno.test("RawHttpPool: at most maxConnections at once, the rest wait; an abort ends a request at once", async () => {
  const held: Array<() => void> = [];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const serving = (async () => {
    for await (const conn of listener) {
      accepted++;
      (async () => {
        const buf = new Uint8Array(4096);
        for (;;) {
          const n = await conn.read(buf).catch(() => null);
          if (n === null) return;
          // Answer only when released by the test.
          await new Promise<void>((resolve) => held.push(resolve));
          await conn.write(encoder.encode(ok("{}"))).catch(() => {});
        }
      })();
    }
  })().catch(() => {});
  const url = new URL(`http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`);
  const pool = new RawHttpPool({ server: url, maxConnections: 2 });
  try {
    const requests = Array.from(
      { length: 5 },
      () => pool.request({ method: "GET", target: "/", headers: {} }),
    );
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(accepted, 2, "two connections, the other requests wait");
    let done = 0;
    for (const request of requests) request.then(() => done++);
    while (done < requests.length) {
      held.shift()?.();
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(accepted, 2, "the waiting requests reused the two");
    const stop = new AbortController();
    const aborted = pool.request({ method: "GET", target: "/", headers: {}, signal: stop.signal });
    setTimeout(() => stop.abort(new Error("stopped")), 50);
    await assert.rejects(aborted, /stopped/);
    for (const release of held.splice(0)) release();
  } finally {
    pool.close();
    listener.close();
    await serving;
  }
});

Deno.test("RawHttpPool.closeIdle closes the spare idle connections of a burst, keeping the ones used last", async () => {
  // Answers come late enough that four requests at once need four connections.
  const s = server(() => ok("{}"));
  const pool = new RawHttpPool({ server: s.url });
  try {
    const burst = () =>
      Promise.all(
        Array.from({ length: 4 }, () => pool.request({ method: "GET", target: "/", headers: {} })),
      );
    await burst();
    assert.equal(pool.open, 4, "four requests at once: four connections, all idle now");
    assert.equal(pool.closeIdle(1), 3);
    assert.equal(pool.open, 1);
    assert.equal(pool.closeIdle(1), 0, "the one kept stays");
    const before = s.connections;
    await pool.request({ method: "GET", target: "/", headers: {} });
    assert.equal(s.connections, before, "the kept connection serves the next request");
    assert.equal(pool.closeIdle(), 1);
    assert.equal(pool.open, 0);
  } finally {
    pool.close();
    await s.stop();
  }
});

Deno.test("RawHttpPool: no answer head within headTimeoutMs is a TimeoutError", async () => {
  const s = server(() => "");
  const pool = new RawHttpPool({ server: s.url });
  try {
    await assert.rejects(
      pool.request({ method: "GET", target: "/", headers: {}, headTimeoutMs: 100 }),
      (error: unknown) => error instanceof DOMException && error.name === "TimeoutError",
    );
  } finally {
    pool.close();
    await s.stop();
  }
});
