/**
 * Tests of the client's sockets: TLS verified against the given CA and the server's name on a
 * real TLS server, and the socket options (Nagle off) on Deno's networking as `openSocket` calls it.
 * @module
 */
import assert from "node:assert/strict";
import { openSocket, type RawSocket, type SocketNet } from "./_sockets.ts";
import { selfSignedServerCertificate } from "../../kits/certificates.ts";

/** A TLS server answering every request line with `200` and the line's path. */
async function tlsServer(hostnames: string[]) {
  const issued = await selfSignedServerCertificate(hostnames);
  const listener = Deno.listenTls({
    hostname: "127.0.0.1",
    port: 0,
    cert: issued.certPem,
    key: issued.keyPem,
  });
  const serving = (async () => {
    for await (const conn of listener) {
      (async () => {
        try {
          const buffer = new Uint8Array(4096);
          const n = await conn.read(buffer);
          if (n === null) return;
          const path = new TextDecoder().decode(buffer.subarray(0, n)).split(" ")[1] ?? "";
          await conn.write(new TextEncoder().encode(
            `HTTP/1.1 200 OK\r\nContent-Length: ${path.length}\r\n\r\n${path}`,
          ));
        } catch {
          /* a client that gave up on the handshake */
        } finally {
          try {
            conn.close();
          } catch { /* closed */ }
        }
      })();
    }
  })();
  return {
    port: listener.addr.port,
    caPem: issued.caPem,
    async [Symbol.asyncDispose]() {
      listener.close();
      await serving.catch(() => {});
    },
  };
}

async function get(socket: RawSocket, path: string): Promise<string> {
  try {
    await socket.write(new TextEncoder().encode(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
    let text = "";
    const buffer = new Uint8Array(4096);
    for (;;) {
      const n = await socket.read(buffer);
      if (n === null) return text;
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
  } finally {
    socket.close();
  }
}

/** A request to 127.0.0.1:port over TLS verified against `caPem`. */
async function getVerified(port: number, caPem: string, path: string): Promise<string> {
  return await get(await openSocket({ hostname: "127.0.0.1", port, tls: true, caPem }), path);
}

Deno.test("openSocket: TLS verified against the given CA, for the name connected to", async () => {
  await using server = await tlsServer(["127.0.0.1"]);
  const answer = await getVerified(server.port, server.caPem, "/verified");
  assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
  assert.ok(answer.endsWith("/verified"));
});

Deno.test("openSocket: a server certificate of another CA is refused", async () => {
  await using server = await tlsServer(["127.0.0.1"]);
  const other = await selfSignedServerCertificate(["127.0.0.1"]);
  await assert.rejects(
    () => getVerified(server.port, other.caPem, "/unverified"),
    /certificate|UnknownIssuer/i,
  );
});

Deno.test("openSocket: a server certificate for another name is refused", async () => {
  // Issued for "localhost" only; connected to as 127.0.0.1.
  await using server = await tlsServer(["localhost"]);
  await assert.rejects(
    () => getVerified(server.port, server.caPem, "/wrong-name"),
    /certificate|NotValidForName/i,
  );
});

/** Deno's networking as `openSocket` uses it, recording the calls; sockets are not connected. */
function recordingNet(options: { failTls?: boolean } = {}) {
  const calls: string[] = [];
  const conn = (name: string) =>
    ({
      setNoDelay: (on = true) => calls.push(`${name}.setNoDelay(${on})`),
      close: () => calls.push(`${name}.close()`),
    }) as unknown as Deno.TcpConn;
  const net: SocketNet = {
    connect: (o) => {
      calls.push(`connect ${o.hostname}:${o.port}`);
      return Promise.resolve(conn("tcp"));
    },
    startTls: (_tcp, o) => {
      calls.push(`startTls ${o.hostname} ca=${o.caCerts?.length ?? 0}`);
      return options.failTls
        ? Promise.reject(new Error("handshake failed"))
        : Promise.resolve(conn("tls") as unknown as Deno.TlsConn);
    },
    connectTls: (o) => {
      calls.push(`connectTls ${o.hostname}:${o.port} cert=${o.cert.length > 0}`);
      return Promise.resolve(conn("tls") as unknown as Deno.TlsConn);
    },
  };
  return { net, calls };
}

Deno.test("openSocket: Nagle's algorithm is off on plain and TLS sockets", async () => {
  const plain = recordingNet();
  await openSocket({ hostname: "h", port: 80, tls: false }, plain.net);
  assert.deepEqual(plain.calls, ["connect h:80", "tcp.setNoDelay(true)"]);

  // TLS: the TCP connection gets TCP_NODELAY before it is upgraded (Deno.connectTls cannot).
  const tls = recordingNet();
  await openSocket({ hostname: "h", port: 443, tls: true, caPem: "CA" }, tls.net);
  assert.deepEqual(tls.calls, ["connect h:443", "tcp.setNoDelay(true)", "startTls h ca=1"]);
});

Deno.test("openSocket: a client certificate is presented through Deno.connectTls", async () => {
  // Deno 2.9's startTls cannot present one: such connections keep Nagle's algorithm.
  const { net, calls } = recordingNet();
  await openSocket(
    { hostname: "h", port: 443, tls: true, caPem: "CA", certPem: "C", keyPem: "K" },
    net,
  );
  assert.deepEqual(calls, ["connectTls h:443 cert=true"]);
});

Deno.test("openSocket: a failed TLS upgrade closes its TCP connection", async () => {
  const { net, calls } = recordingNet({ failTls: true });
  await assert.rejects(
    () => openSocket({ hostname: "h", port: 443, tls: true }, net),
    /handshake failed/,
  );
  assert.deepEqual(calls, [
    "connect h:443",
    "tcp.setNoDelay(true)",
    "startTls h ca=0",
    "tcp.close()",
  ]);
});
