/**
 * The public listener: accepts client connections (terminating TLS when configured) and
 * forwards the plain bytes to the internal HTTP server, so that a connection can be really
 * dropped (closed without an answer) — something `Deno.serve` alone cannot do.
 * @module
 */

interface Pair {
  readonly inbound: Deno.Conn;
  readonly outbound: Deno.Conn;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

/** A forwarder on 127.0.0.1 in front of the internal server. */
export class Front {
  /** The public port. */
  readonly port: number;
  #listener: Deno.Listener;
  #target: number;
  #pairs = new Map<number, Pair>();
  #accepting: Promise<void>;
  #pipes = new Set<Promise<void>>();

  /**
   * Starts listening.
   *
   * @param targetPort The internal (plain HTTP) server's port on 127.0.0.1.
   * @param port The public port (0 for any free one).
   * @param tls Certificate and key (PEM) to serve TLS with, if any.
   */
  constructor(targetPort: number, port = 0, tls?: { cert: string; key: string }) {
    this.#target = targetPort;
    this.#listener = tls
      ? Deno.listenTls({ hostname: "127.0.0.1", port, ...tls })
      : Deno.listen({ hostname: "127.0.0.1", port });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  async #accept(): Promise<void> {
    try {
      for await (const inbound of this.#listener) this.#connect(inbound);
    } catch { /* listener closed */ }
  }

  async #connect(inbound: Deno.Conn): Promise<void> {
    let outbound: Deno.Conn;
    try {
      outbound = await Deno.connect({ hostname: "127.0.0.1", port: this.#target });
    } catch {
      closeQuietly(inbound);
      return;
    }
    for (const conn of [inbound, outbound]) (conn as Deno.TcpConn).setNoDelay?.(true);
    const peerPort = (outbound.localAddr as Deno.NetAddr).port;
    const pair = { inbound, outbound };
    this.#pairs.set(peerPort, pair);
    const done = Promise.allSettled([
      inbound.readable.pipeTo(outbound.writable),
      outbound.readable.pipeTo(inbound.writable),
    ]).then(() => {
      this.#pairs.delete(peerPort);
      closeQuietly(inbound);
      closeQuietly(outbound);
    });
    this.#pipes.add(done);
    done.finally(() => this.#pipes.delete(done));
  }

  /**
   * Closes the client connection whose forwarded connection has this local port.
   *
   * @param peerPort The port the internal server sees as the remote port.
   */
  drop(peerPort: number): void {
    const pair = this.#pairs.get(peerPort);
    if (!pair) return;
    this.#pairs.delete(peerPort);
    closeQuietly(pair.inbound);
    closeQuietly(pair.outbound);
  }

  /** Closes every client connection. */
  dropAll(): void {
    for (const port of [...this.#pairs.keys()]) this.drop(port);
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    try {
      this.#listener.close();
    } catch { /* already closed */ }
    this.dropAll();
    await this.#accepting;
    await Promise.allSettled([...this.#pipes]);
  }
}
