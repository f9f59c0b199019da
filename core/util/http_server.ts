/**
 * A small HTTP/1.1 server for the operator's own endpoints (admission webhooks, liveness,
 * metrics) that bounds what a client can make it hold: how many connections, how long a TLS
 * handshake, a request's headers, its body and an idle keep-alive connection may take, and how
 * many bytes a request may have (checked against a declared `Content-Length` before reading
 * anything, and counted while a body is read, `Content-Length` and chunked alike). `Deno.serve`
 * offers none of these bounds; its handlers' `Request`/`Response` shape is kept.
 *
 * Answers of its own: 400 for a malformed request (request line, header line, bare CR or LF,
 * obs-fold, an invalid or repeated `Content-Length`, both `Content-Length` and
 * `Transfer-Encoding`, a missing or repeated `Host` in HTTP/1.1), 413 for a body over the cap,
 * 417 for an `Expect` other than `100-continue`, 431 for headers over their cap, 501 for a
 * transfer coding other than `chunked`, 503 when the server-wide buffer budget is spent, 505 for
 * an HTTP version other than 1.0/1.1, 500 when the handler fails. Each closes the connection.
 * A connection over the cap is closed as soon as it is accepted; a timed-out one is closed
 * without an answer. Responses are sent with a `Content-Length` (bodies are buffered: fit for
 * small answers, not for streaming). HTTP/2 is not offered (ALPN `http/1.1` only).
 *
 * TLS: Deno cannot close a TLS connection whose handshake has not finished (it waits for the
 * handshake, however long the client takes), so TLS connections are accepted as plain TCP and
 * relayed to a TLS listener on the loopback interface; a timed-out connection is ended by
 * closing its TCP side. Connections to that loopback port that do not come from the relay are
 * closed (only processes on the same host, or in the same Pod, can make them).
 *
 * The HTTP/1.1 wire protocol (reading a request, framing its body, writing the answer) is in
 * `http_wire.ts`; this module holds the listeners, the accept loops, the limits shared by all
 * connections (their count, the buffered bytes) and the TLS relay.
 * @module
 */

import {
  Connection,
  type ConnectionHost,
  type ConnectionState,
  HttpError,
  type Io,
  READ_SIZE,
  writeAll,
} from "./http_wire.ts";

/** Limits of an {@link HttpServer}; times are in seconds. */
export interface HttpServerLimits {
  /** Connections served at once; further ones are closed as soon as accepted. @default 256 */
  readonly maxConnections?: number;
  /** The request line and headers (and a chunked body's trailers), in bytes. @default 1 MiB */
  readonly maxHeaderBytes?: number;
  /** A request's body, in bytes: larger ones get 413. @default 7 MiB */
  readonly maxBodyBytes?: number;
  /**
   * Bytes received for requests in progress, over all connections; a request that would go past
   * it gets 503. Bounds the memory that many connections at their caps could take.
   * @default 64 MiB
   */
  readonly maxBufferedBytes?: number;
  /**
   * From the connection's acceptance (TLS handshake included), or from the first byte of a
   * further request on a kept-alive connection, until the end of the headers.
   * @default 32
   */
  readonly headerTimeout?: number;
  /** From the end of the headers until the end of the body. @default 32 */
  readonly bodyTimeout?: number;
  /** How long a kept-alive connection may wait for its next request. @default 90 */
  readonly idleTimeout?: number;
  /** How long writing a response may take (a client that does not read). @default 30 */
  readonly writeTimeout?: number;
}

/** The defaults of {@link HttpServerLimits} (controller-runtime's webhook server's, mostly). */
export const DEFAULT_HTTP_LIMITS: Readonly<Required<HttpServerLimits>> = Object.freeze({
  maxConnections: 256,
  maxHeaderBytes: 1 << 20,
  maxBodyBytes: 7 << 20,
  maxBufferedBytes: 64 << 20,
  headerTimeout: 32,
  bodyTimeout: 32,
  idleTimeout: 90,
  writeTimeout: 30,
});

/** Options of {@link serveHttp}. */
export interface HttpServerOptions extends HttpServerLimits {
  /** The address to listen on. @default "0.0.0.0" */
  readonly hostname?: string;
  /** The port; `0` picks a free one. @default 80 */
  readonly port?: number;
  /** The server certificate chain (PEM); with `key`, the server speaks HTTPS. */
  readonly cert?: string;
  /** The certificate's private key (PEM). */
  readonly key?: string;
  /** Stops the server: no new connections, idle ones closed, requests in progress finished. */
  readonly signal?: AbortSignal;
  /** Told of every error of the handler (answered with 500). */
  readonly onError?: (error: unknown) => void;
}

/** Answers one request. */
export type HttpHandler = (request: Request) => Response | Promise<Response>;

/** Counters of an {@link HttpServer}. */
export interface HttpServerStats {
  /** Connections open now. */
  readonly connections: number;
  /** Connections accepted since the start. */
  readonly accepted: number;
  /** Connections closed at once because the cap was reached. */
  readonly refused: number;
  /** Connections closed because a timeout ran out. */
  readonly timedOut: number;
  /** Bytes held now for requests in progress. */
  readonly bufferedBytes: number;
  /** The most bytes held at once. */
  readonly peakBufferedBytes: number;
}

/** A running server. */
export interface HttpServer {
  /** The address bound. */
  readonly addr: Deno.NetAddr;
  /** The port bound (useful with port 0). */
  readonly port: number;
  /** Resolves when the server has stopped and every connection is closed. */
  readonly finished: Promise<void>;
  /** The counters now. */
  stats(): HttpServerStats;
  /** Stops the server (as its signal would) and waits until it has finished. */
  shutdown(): Promise<void>;
}

/**
 * Starts an HTTP/1.1 server (HTTPS with `cert` and `key`).
 *
 * @param options Address, certificate, limits, stop signal.
 * @param handler Answers each request; a failure is answered with 500.
 * @returns The server.
 * @throws {RangeError} for a limit that is not a positive number.
 * @throws {Deno.errors.AddrInUse} when the port is taken.
 * @example Serve until aborted
 * ```ts
 * import { serveHttp } from "./http_server.ts";
 *
 * const controller = new AbortController();
 * const server = serveHttp(
 *   { hostname: "127.0.0.1", port: 0, signal: controller.signal, headerTimeout: 5 },
 *   (request) => new Response(`${request.method} ${new URL(request.url).pathname}\n`),
 * );
 * controller.abort();
 * await server.finished;
 * ```
 */
export function serveHttp(options: HttpServerOptions, handler: HttpHandler): HttpServer {
  const limits = resolveLimits(options);
  const hostname = (options.hostname ?? "0.0.0.0").replace(/^\[(.*)\]$/, "$1");
  const port = options.port ?? 80;
  const tls = options.cert !== undefined || options.key !== undefined;
  if (tls && (!options.cert || !options.key)) {
    throw new TypeError("An HTTPS server needs both cert and key");
  }
  const listener = Deno.listen({ hostname, port });
  let inner: Deno.TlsListener | undefined;
  try {
    inner = tls
      ? Deno.listenTls({
        hostname: "127.0.0.1",
        port: 0,
        cert: options.cert!,
        key: options.key!,
        alpnProtocols: ["http/1.1"],
      })
      : undefined;
  } catch (error) {
    listener.close();
    throw error;
  }
  const server = new Server(limits, handler, options.onError, tls ? "https" : "http");
  const addr = listener.addr;
  const tasks: Promise<void>[] = [server.acceptLoop(listener, inner)];
  if (inner) tasks.push(server.innerLoop(inner));
  const stop = () => {
    server.stop();
    for (const l of [listener, inner]) {
      try {
        l?.close();
      } catch { /* already closed */ }
    }
  };
  if (options.signal?.aborted) stop();
  else options.signal?.addEventListener("abort", stop, { once: true });
  const finished = Promise.all(tasks).then(() => server.drained()).finally(() => {
    options.signal?.removeEventListener("abort", stop);
  });
  return {
    addr,
    port: addr.port,
    finished,
    stats: () => server.stats(),
    shutdown: () => {
      stop();
      return finished;
    },
  };
}

function resolveLimits(options: HttpServerLimits): Required<HttpServerLimits> {
  const limits = { ...DEFAULT_HTTP_LIMITS };
  for (const key of Object.keys(DEFAULT_HTTP_LIMITS) as (keyof HttpServerLimits)[]) {
    const value = options[key];
    if (value === undefined) continue;
    if (typeof value !== "number" || !(value > 0) || !Number.isFinite(value)) {
      throw new RangeError(`The HTTP server's ${key} must be a positive number, got ${value}`);
    }
    limits[key] = value;
  }
  return limits;
}

/** A relay of one accepted TCP connection to the loopback TLS listener. */
interface Relay {
  readonly outer: Deno.TcpConn;
  readonly loop: Deno.TcpConn;
  claimed: boolean;
  kill(): void;
}

class Server implements ConnectionHost {
  #closing = false;
  #conns = new Set<ConnectionState>();
  #tasks = new Set<Promise<void>>();
  #relays = new Map<number, Relay>();
  #open = 0;
  #accepted = 0;
  #refused = 0;
  #timedOut = 0;
  #buffered = 0;
  #peak = 0;

  constructor(
    readonly limits: Required<HttpServerLimits>,
    readonly handler: HttpHandler,
    readonly onError: ((error: unknown) => void) | undefined,
    readonly scheme: string,
  ) {}

  stats(): HttpServerStats {
    return {
      connections: this.#open,
      accepted: this.#accepted,
      refused: this.#refused,
      timedOut: this.#timedOut,
      bufferedBytes: this.#buffered,
      peakBufferedBytes: this.#peak,
    };
  }

  stop(): void {
    if (this.#closing) return;
    this.#closing = true;
    for (const state of this.#conns) if (!state.busy) state.io.kill();
    for (const relay of this.#relays.values()) if (!relay.claimed) relay.kill();
  }

  get closing(): boolean {
    return this.#closing;
  }

  async drained(): Promise<void> {
    while (this.#tasks.size) await Promise.allSettled([...this.#tasks]);
  }

  #track(task: Promise<void>): void {
    // Connection tasks catch their own errors; anything left must not become unhandled.
    const settled: Promise<void> = task.catch((error) => this.onError?.(error))
      .finally(() => this.#tasks.delete(settled));
    this.#tasks.add(settled);
  }

  /** Takes `bytes` from the server-wide budget, or refuses with 503. */
  hold(bytes: number): void {
    if (this.#buffered + bytes > this.limits.maxBufferedBytes) {
      throw new HttpError(503, "The server is busy: too many bytes in requests in progress");
    }
    this.#buffered += bytes;
    if (this.#buffered > this.#peak) this.#peak = this.#buffered;
  }

  release(bytes: number): void {
    this.#buffered -= bytes;
  }

  timedOut(): void {
    this.#timedOut++;
  }

  async acceptLoop(listener: Deno.TcpListener, inner: Deno.TlsListener | undefined): Promise<void> {
    for (;;) {
      let conn: Deno.TcpConn;
      try {
        conn = await listener.accept();
      } catch (error) {
        if (this.#closing || error instanceof Deno.errors.BadResource) return;
        // E.g. out of file descriptors: give the others time to end.
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      if (this.#closing || this.#open >= this.limits.maxConnections) {
        if (!this.#closing) this.#refused++;
        closeQuietly(conn);
        continue;
      }
      this.#open++;
      this.#accepted++;
      // Nagle off, as for the client's sockets (core/client/_sockets.ts): with it, an answer
      // written after an unacknowledged write (a relayed TLS flight, a head before its body)
      // waited ~40 ms for the peer's delayed acknowledgement.
      conn.setNoDelay(true);
      const task = inner ? this.#relay(conn, inner.addr.port) : this.#serve(plainIo(conn));
      this.#track(task.finally(() => this.#open--));
    }
  }

  /** Accepts the relayed TLS connections and serves each with its relay as the kill switch. */
  async innerLoop(inner: Deno.TlsListener): Promise<void> {
    for (;;) {
      let conn: Deno.TlsConn;
      try {
        conn = await inner.accept();
      } catch (error) {
        if (this.#closing || error instanceof Deno.errors.BadResource) return;
        continue;
      }
      this.#track(this.#serveRelayed(conn));
    }
  }

  async #serveRelayed(conn: Deno.TlsConn): Promise<void> {
    const port = conn.remoteAddr.port;
    let found = this.#relays.get(port);
    // The relay's connect() may resolve a moment after this side's accept().
    for (let i = 0; !found && i < 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      found = this.#relays.get(port);
    }
    if (!found || found.claimed) {
      closeQuietly(conn);
      return;
    }
    const relay = found;
    relay.claimed = true;
    const io: Io = {
      read: (buffer) => conn.read(buffer),
      write: (bytes) => conn.write(bytes),
      closeWrite: () => conn.closeWrite(),
      kill: () => {
        relay.kill();
        closeQuietly(conn);
      },
      handshake: () => conn.handshake(),
    };
    await this.#serve(io);
  }

  async #relay(outer: Deno.TcpConn, port: number): Promise<void> {
    let loop: Deno.TcpConn;
    try {
      loop = await Deno.connect({ hostname: "127.0.0.1", port });
      loop.setNoDelay(true);
    } catch {
      closeQuietly(outer);
      return;
    }
    let killed = false;
    const relay: Relay = {
      outer,
      loop,
      claimed: false,
      kill: () => {
        if (killed) return;
        killed = true;
        closeQuietly(outer);
        closeQuietly(loop);
      },
    };
    const key = loop.localAddr.port;
    this.#relays.set(key, relay);
    // Until the server side takes it over (and its own deadlines), the header timeout applies.
    const unclaimed = setTimeout(() => {
      if (!relay.claimed) relay.kill();
    }, this.limits.headerTimeout * 1000);
    try {
      await Promise.all([pump(outer, loop), pump(loop, outer)]);
    } finally {
      clearTimeout(unclaimed);
      this.#relays.delete(key);
      relay.kill();
    }
  }

  async #serve(io: Io): Promise<void> {
    const state: ConnectionState = { busy: false, io };
    this.#conns.add(state);
    try {
      await new Connection(this, io, state).run();
    } finally {
      this.#conns.delete(state);
      io.kill();
    }
  }
}

function plainIo(conn: Deno.Conn): Io {
  return {
    read: (buffer) => conn.read(buffer),
    write: (bytes) => conn.write(bytes),
    closeWrite: () => conn.closeWrite(),
    kill: () => closeQuietly(conn),
  };
}

function closeQuietly(conn: { close(): void }): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

/** Copies one direction of a relay; at its end, half-closes the other side. */
async function pump(from: Deno.TcpConn, to: Deno.TcpConn): Promise<void> {
  const buffer = new Uint8Array(READ_SIZE);
  try {
    for (;;) {
      const n = await from.read(buffer);
      if (n === null) break;
      await writeAll(to, buffer.subarray(0, n));
    }
    await to.closeWrite();
  } catch {
    // One side is gone: so is the connection.
    closeQuietly(from);
    closeQuietly(to);
  }
}
