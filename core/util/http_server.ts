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
 * @module
 */

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

/** What an answer of the server's own says, and that the connection closes after it. */
class HttpError extends Error {
  override name = "HttpError";
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** The client went away (or the connection was closed under a read). */
class Gone extends Error {
  override name = "Gone";
}

const REASONS: Readonly<Record<number, string>> = {
  100: "Continue",
  200: "OK",
  201: "Created",
  202: "Accepted",
  204: "No Content",
  301: "Moved Permanently",
  302: "Found",
  304: "Not Modified",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  415: "Unsupported Media Type",
  417: "Expectation Failed",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  501: "Not Implemented",
  503: "Service Unavailable",
  505: "HTTP Version Not Supported",
};

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP\/(\d)\.(\d)$/;
const CHUNK_SIZE = /^([0-9A-Fa-f]+)[ \t]*(?:;.*)?$/;
const CR = 0x0d;
const LF = 0x0a;
const READ_SIZE = 16 * 1024;
const LINGER_MS = 1000;

/** The byte stream of one connection, and how to end it for good. */
interface Io {
  read(buffer: Uint8Array): Promise<number | null>;
  write(bytes: Uint8Array): Promise<number>;
  closeWrite(): Promise<void>;
  /** Ends the connection at once; pending reads and writes fail. */
  kill(): void;
  handshake?: () => Promise<unknown>;
}

interface ConnectionState {
  busy: boolean;
  readonly io: Io;
}

/** A relay of one accepted TCP connection to the loopback TLS listener. */
interface Relay {
  readonly outer: Deno.TcpConn;
  readonly loop: Deno.TcpConn;
  claimed: boolean;
  kill(): void;
}

class Server {
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

async function writeAll(to: { write(bytes: Uint8Array): Promise<number> }, bytes: Uint8Array) {
  let offset = 0;
  while (offset < bytes.length) offset += await to.write(bytes.subarray(offset));
}

/** Closes the connection when the time set last runs out. */
class Deadline {
  #timer: ReturnType<typeof setTimeout> | undefined;
  constructor(readonly expire: () => void) {}
  set(seconds: number): void {
    this.clear();
    this.#timer = setTimeout(this.expire, seconds * 1000);
  }
  clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** A read buffer over a connection; every byte received is counted by `onBytes`. */
class Reader {
  #data: Uint8Array<ArrayBuffer> = new Uint8Array(READ_SIZE);
  #start = 0;
  #end = 0;
  #scanned = 0;
  onBytes: (n: number) => void = () => {};

  constructor(readonly io: Io) {}

  get buffered(): number {
    return this.#end - this.#start;
  }

  /** Reads more; false at the end of the stream. */
  async fill(): Promise<boolean> {
    if (this.#data.length - this.#end < READ_SIZE) {
      const size = this.buffered;
      if (size + READ_SIZE > this.#data.length) {
        const data = new Uint8Array(Math.max(this.#data.length * 2, size + READ_SIZE));
        data.set(this.#data.subarray(this.#start, this.#end));
        this.#data = data;
      } else {
        this.#data.copyWithin(0, this.#start, this.#end);
      }
      this.#start = 0;
      this.#end = size;
    }
    const n = await this.io.read(this.#data.subarray(this.#end));
    if (n === null) return false;
    this.#end += n;
    this.onBytes(n);
    return true;
  }

  /** Gives back a large buffer once a request is done. */
  shrink(): void {
    if (this.#data.length > 4 * READ_SIZE && this.buffered <= READ_SIZE) {
      const data = new Uint8Array(READ_SIZE * 2);
      data.set(this.#data.subarray(this.#start, this.#end));
      this.#data = data;
      this.#end -= this.#start;
      this.#start = 0;
    }
  }

  /** A line without its CRLF; `limit` bounds its length (else `tooLong` is thrown). */
  async line(limit: number, tooLong: () => HttpError): Promise<string> {
    for (;;) {
      const from = this.#start + this.#scanned;
      const at = this.#data.subarray(from, this.#end).indexOf(LF);
      if (at >= 0) {
        const lf = from + at;
        if (lf === this.#start || this.#data[lf - 1] !== CR) {
          throw new HttpError(400, "A line ends with a bare LF (CRLF is required)");
        }
        const bytes = this.#data.subarray(this.#start, lf - 1);
        if (bytes.length > limit) throw tooLong();
        if (bytes.includes(CR)) throw new HttpError(400, "A line holds a bare CR");
        this.#start = lf + 1;
        this.#scanned = 0;
        return latin1(bytes);
      }
      this.#scanned = this.buffered;
      if (this.#scanned > limit + 1) throw tooLong();
      if (!(await this.fill())) throw new Gone();
    }
  }

  /** Up to `max` buffered bytes (copied), reading when none are buffered. */
  async take(max: number): Promise<Uint8Array<ArrayBuffer>> {
    if (this.buffered === 0 && !(await this.fill())) throw new Gone();
    const n = Math.min(max, this.buffered);
    const bytes = this.#data.slice(this.#start, this.#start + n);
    this.#start += n;
    if (this.#start === this.#end) this.#start = this.#end = 0;
    return bytes;
  }
}

function latin1(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return text;
}

interface Head {
  readonly method: string;
  readonly target: string;
  readonly minor: number;
  readonly headers: Headers;
  readonly length: number | "chunked";
  readonly close: boolean;
  readonly expectContinue: boolean;
}

/** One connection: requests one after another (keep-alive), each within its deadlines. */
class Connection {
  readonly #reader: Reader;
  readonly #deadline: Deadline;
  #held = 0;
  #killed = false;
  #lingering = false;

  constructor(readonly server: Server, readonly io: Io, readonly state: ConnectionState) {
    this.#reader = new Reader(io);
    this.#reader.onBytes = (n) => this.#hold(n);
    this.#deadline = new Deadline(() => {
      this.#killed = true;
      if (!this.#lingering) server.timedOut();
      io.kill();
    });
  }

  #hold(n: number): void {
    this.server.hold(n);
    this.#held += n;
  }

  #releaseAll(): void {
    this.server.release(this.#held);
    this.#held = 0;
  }

  async run(): Promise<void> {
    const { limits } = this.server;
    try {
      this.#deadline.set(limits.headerTimeout);
      if (this.io.handshake) await this.io.handshake();
      for (let first = true;; first = false) {
        if (!first) {
          if (this.#reader.buffered === 0) {
            this.#deadline.set(limits.idleTimeout);
            if (!(await this.#reader.fill())) return;
          }
          this.#deadline.set(limits.headerTimeout);
        }
        if (this.server.closing) return;
        const again = await this.#request();
        this.#releaseAll();
        this.#reader.shrink();
        if (!again || this.server.closing) return;
      }
    } catch (error) {
      if (error instanceof HttpError && !this.#killed) await this.#refuse(error);
      // Anything else: the client went away, or a deadline closed the connection.
    } finally {
      this.#deadline.clear();
      this.#releaseAll();
    }
  }

  /** Serves one request; whether the connection stays open for another. */
  async #request(): Promise<boolean> {
    const { limits } = this.server;
    const head = await this.#head();
    this.state.busy = true;
    this.#deadline.set(limits.bodyTimeout);
    if (typeof head.length === "number" && head.length > limits.maxBodyBytes) {
      throw tooLarge(limits.maxBodyBytes);
    }
    if (head.expectContinue && head.length !== 0) {
      await writeAll(this.io, new TextEncoder().encode("HTTP/1.1 100 Continue\r\n\r\n"));
    }
    const body = head.length === "chunked"
      ? await this.#chunked()
      : await this.#exactly(head.length);
    this.#deadline.clear();
    let response: Response;
    try {
      response = await this.#handle(head, body);
    } finally {
      // The request's bytes are no longer ours to count once it is answered.
      this.#releaseAll();
    }
    const close = head.close || this.server.closing;
    this.#deadline.set(limits.writeTimeout);
    await this.#respond(response, head.method === "HEAD", close);
    this.#deadline.clear();
    this.state.busy = false;
    return !close;
  }

  async #head(): Promise<Head> {
    const max = this.server.limits.maxHeaderBytes;
    const tooLong = () => new HttpError(431, "The request's headers are too large");
    let left = max;
    let line: string;
    do { // Empty lines before a request line are to be ignored (RFC 9112, 2.2).
      line = await this.#reader.line(left, tooLong);
      left -= line.length + 2;
      if (left < 0) throw tooLong();
    } while (line === "");
    const match = REQUEST_LINE.exec(line);
    if (!match) throw new HttpError(400, "Malformed request line");
    const [, method, target, major, minor] = match as unknown as [
      string,
      string,
      string,
      string,
      string,
    ];
    if (major !== "1" || (minor !== "0" && minor !== "1")) {
      throw new HttpError(505, "Only HTTP/1.0 and HTTP/1.1 are supported");
    }
    const headers = new Headers();
    const counts = new Map<string, number>();
    for (;;) {
      line = await this.#reader.line(left, tooLong);
      left -= line.length + 2;
      if (left < 0) throw tooLong();
      if (line === "") break;
      const colon = line.indexOf(":");
      if (line[0] === " " || line[0] === "\t") {
        throw new HttpError(400, "Folded header lines are not accepted");
      }
      const name = colon > 0 ? line.slice(0, colon) : "";
      if (!TOKEN.test(name)) throw new HttpError(400, "Malformed header line");
      const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
      // deno-lint-ignore no-control-regex
      if (/[\x00-\x08\x0a-\x1f\x7f]/.test(value)) {
        throw new HttpError(400, `The header ${name} holds control characters`);
      }
      const lower = name.toLowerCase();
      counts.set(lower, (counts.get(lower) ?? 0) + 1);
      try {
        headers.append(name, value);
      } catch {
        throw new HttpError(400, `The header ${name} has an invalid value`);
      }
    }
    const http11 = minor === "1";
    if (http11 && counts.get("host") !== 1) {
      throw new HttpError(400, "An HTTP/1.1 request needs exactly one Host header");
    }
    const connection = (headers.get("connection") ?? "").toLowerCase().split(",")
      .map((token) => token.trim());
    const close = !http11 ? !connection.includes("keep-alive") : connection.includes("close");
    const expect = headers.get("expect");
    if (expect !== null && expect.toLowerCase() !== "100-continue") {
      throw new HttpError(417, "Only Expect: 100-continue is supported");
    }
    return {
      method,
      target,
      minor: Number(minor),
      headers,
      length: this.#framing(headers, counts, http11),
      close,
      expectContinue: expect !== null && http11,
    };
  }

  /** How the body is delimited (RFC 9112, 6.3), refusing anything ambiguous. */
  #framing(headers: Headers, counts: Map<string, number>, http11: boolean): number | "chunked" {
    const te = headers.get("transfer-encoding");
    const cl = headers.get("content-length");
    if (te !== null && cl !== null) {
      throw new HttpError(400, "Both Content-Length and Transfer-Encoding were sent");
    }
    if (te !== null) {
      if (!http11) throw new HttpError(400, "Transfer-Encoding is not allowed in HTTP/1.0");
      if ((counts.get("transfer-encoding") ?? 0) > 1 || te.trim().toLowerCase() !== "chunked") {
        throw new HttpError(501, "Only Transfer-Encoding: chunked is supported");
      }
      return "chunked";
    }
    if (cl === null) return 0;
    if ((counts.get("content-length") ?? 0) > 1 || !/^\d+$/.test(cl)) {
      throw new HttpError(400, "Invalid Content-Length");
    }
    // A length of 16 digits and more is surely over any cap (and past exact numbers).
    return cl.replace(/^0+(?=\d)/, "").length > 15 ? Number.MAX_SAFE_INTEGER : Number(cl);
  }

  async #exactly(length: number): Promise<Uint8Array<ArrayBuffer>> {
    const chunks: Uint8Array<ArrayBuffer>[] = [];
    for (let left = length; left > 0;) {
      const piece = await this.#reader.take(left);
      chunks.push(piece);
      left -= piece.length;
    }
    return concat(chunks, length);
  }

  async #chunked(): Promise<Uint8Array<ArrayBuffer>> {
    const { maxBodyBytes, maxHeaderBytes } = this.server.limits;
    const chunks: Uint8Array<ArrayBuffer>[] = [];
    let total = 0;
    const tooLong = () => new HttpError(400, "A chunk-size line is too long");
    for (;;) {
      const line = await this.#reader.line(4096, tooLong);
      const match = CHUNK_SIZE.exec(line);
      if (!match) throw new HttpError(400, "Malformed chunk-size line");
      const digits = match[1]!.replace(/^0+(?=.)/, "");
      const size = digits.length > 12 ? Number.MAX_SAFE_INTEGER : parseInt(digits, 16);
      if (total + size > maxBodyBytes) throw tooLarge(maxBodyBytes);
      if (size === 0) break;
      for (let left = size; left > 0;) {
        const piece = await this.#reader.take(left);
        chunks.push(piece);
        left -= piece.length;
      }
      total += size;
      if (await this.#reader.line(0, () => new HttpError(400, "A chunk is longer than its size"))) {
        throw new HttpError(400, "A chunk is longer than its size");
      }
    }
    // Trailers are read and dropped.
    let left = maxHeaderBytes;
    const trailersTooLong = () => new HttpError(431, "The request's trailers are too large");
    for (;;) {
      const line = await this.#reader.line(left, trailersTooLong);
      left -= line.length + 2;
      if (line === "") break;
    }
    return concat(chunks, total);
  }

  async #handle(head: Head, body: Uint8Array<ArrayBuffer>): Promise<Response> {
    let request: Request;
    try {
      const path = head.target.startsWith("/") ? head.target : absolutePath(head.target);
      const host = head.headers.get("host") ?? "localhost";
      const authority = /^[A-Za-z0-9.\-]*(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/.test(host)
        ? host
        : "localhost";
      const url = new URL(`${this.server.scheme}://${authority}${path}`);
      const bodyless = head.method === "GET" || head.method === "HEAD";
      request = new Request(url, {
        method: head.method,
        headers: head.headers,
        ...(bodyless || (body.length === 0 && head.length === 0) ? {} : { body }),
      });
    } catch (error) {
      if (error instanceof HttpError) throw error;
      throw new HttpError(400, "The request cannot be represented (method or target)");
    }
    try {
      const response = await this.server.handler(request);
      if (!(response instanceof Response)) throw new TypeError("The handler gave no Response");
      return response;
    } catch (error) {
      this.server.onError?.(error);
      return new Response("Internal Server Error\n", {
        status: 500,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
  }

  async #respond(response: Response, head: boolean, close: boolean): Promise<void> {
    let body: Uint8Array<ArrayBuffer>;
    try {
      body = new Uint8Array(await response.arrayBuffer());
    } catch (error) {
      this.server.onError?.(error);
      response = new Response(null, { status: 500 });
      body = new Uint8Array(0);
    }
    const status = response.status;
    const reason = response.statusText || REASONS[status] || "Unknown";
    let text = `HTTP/1.1 ${status} ${reason}\r\n`;
    for (const [name, value] of response.headers) {
      if (/^(content-length|transfer-encoding|connection|keep-alive|date)$/i.test(name)) continue;
      text += `${name}: ${value}\r\n`;
    }
    text += `date: ${new Date().toUTCString()}\r\n`;
    const bodyless = status === 204 || status === 304 || status < 200;
    if (!bodyless) text += `content-length: ${body.length}\r\n`;
    if (close) text += "connection: close\r\n";
    text += "\r\n";
    const headBytes = encodeLatin1(text);
    const out = bodyless || head ? headBytes : concat([headBytes, body]);
    await writeAll(this.io, out);
  }

  /** Answers with the server's own error, then closes (after letting the client read it). */
  async #refuse(error: HttpError): Promise<void> {
    try {
      this.#deadline.set(this.server.limits.writeTimeout);
      await this.#respond(
        new Response(`${error.message}\n`, {
          status: error.status,
          headers: { "content-type": "text/plain; charset=utf-8" },
        }),
        false,
        true,
      );
      // The client may still be sending (a body we refused): closing now could reset the
      // connection before it reads the answer. Half-close, drop what comes for a moment.
      await this.io.closeWrite();
      this.#lingering = true;
      this.#deadline.set(LINGER_MS / 1000);
      const sink = new Uint8Array(READ_SIZE);
      while ((await this.io.read(sink)) !== null) { /* dropped */ }
    } catch { /* gone, or the linger ran out */ }
  }
}

function tooLarge(max: number): HttpError {
  return new HttpError(413, `The request body is larger than ${max} bytes`);
}

function absolutePath(target: string): string {
  const url = new URL(target);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new HttpError(400, "Malformed request target");
  }
  return `${url.pathname}${url.search}`;
}

function concat(
  chunks: Uint8Array<ArrayBuffer>[],
  total = chunks.reduce((n, c) => n + c.length, 0),
): Uint8Array<ArrayBuffer> {
  if (chunks.length === 1 && chunks[0]!.length === total) return chunks[0]!;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}

function encodeLatin1(text: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}
