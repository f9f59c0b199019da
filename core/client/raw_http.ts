/**
 * Requests with short answers (gets, lists, patches) over a pool of kept-alive HTTP/1.1
 * connections of its own, the answer read whole.
 *
 * Why not `fetch`: each `fetch` builds a Request, Headers, a body stream and a Response, and
 * reads the body through WHATWG streams — about 120 µs of CPU per patch here against about 55 µs
 * on a socket written and read directly (measured on the test control plane, docs/performance.md),
 * on the hot path of every processing cycle. The price is this small client: `Content-Length`
 * requests, answers with `Content-Length`, chunked, or until close; keep-alive; no redirects, no
 * compression (none is asked for), no proxies (the caller uses `fetch` when one is configured).
 * Sockets come from `_sockets.ts` (also the unverified TLS of `insecure-skip-tls-verify`).
 * @module
 */

import { openSocket, type RawSocket } from "./_sockets.ts";
import { concatBytes } from "../util/bytes.ts";

/** An answer read whole. */
export interface RawAnswer {
  /** The HTTP status. */
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>;
  /** The body as text (UTF-8). */
  readonly text: string;
}

/** What to send. */
export interface RawRequest {
  readonly method: string;
  /** The request target: path and query. */
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | undefined;
  /** Closes the connection and rejects with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
  /** Longest wait until the answer's head is read; 0 or unset: none. */
  readonly headTimeoutMs?: number | undefined;
}

/** Where to connect. */
export interface RawPoolOptions {
  /** The server (`https:` or `http:`). */
  readonly server: URL;
  /** TLS: the CA bundle, and a client certificate with its key (PEM). */
  readonly caPem?: string | undefined;
  readonly certPem?: string | undefined;
  readonly keyPem?: string | undefined;
  /** Do not verify the server's certificate (kubeconfig `insecure-skip-tls-verify`). */
  readonly insecureSkipTlsVerify?: boolean | undefined;
  /** Connections open at most; further requests wait for one. @default 64 */
  readonly maxConnections?: number | undefined;
  /** An idle connection is closed after this long (the API server's own limit is 90 s). */
  readonly idleMs?: number | undefined;
}

/** The connection failed before any byte of the answer: another connection may be tried. */
class StaleConnection extends Error {
  override name = "StaleConnection";
}

const SMALL = 16 * 1024;
const MAX_HEAD = 64 * 1024;
const encoder = new TextEncoder();
const utf8 = new TextDecoder();
const latin1 = new TextDecoder("latin1");
const NON_ASCII = /[\u0080-\uffff]/;

/** One kept-alive connection and its read buffer. */
class Connection {
  readonly #conn: RawSocket;
  buf = new Uint8Array(SMALL);
  start = 0;
  end = 0;
  /** Requests answered on it so far. */
  used = 0;
  idleSince = 0;
  closed = false;
  /** Counted out of the pool's open connections (once). */
  discarded = false;

  constructor(conn: RawSocket) {
    this.#conn = conn;
  }

  async write(bytes: Uint8Array): Promise<void> {
    for (let sent = 0; sent < bytes.length;) sent += await this.#conn.write(bytes.subarray(sent));
  }

  /** Reads more bytes; `false` at EOF. */
  async fill(): Promise<boolean> {
    if (this.start === this.end) this.start = this.end = 0;
    if (this.end === this.buf.length) {
      const unread = this.end - this.start;
      const bigger = unread * 2 > this.buf.length ? new Uint8Array(this.buf.length * 2) : this.buf;
      bigger.set(this.buf.subarray(this.start, this.end));
      this.buf = bigger;
      this.start = 0;
      this.end = unread;
    }
    const n = await this.#conn.read(this.buf.subarray(this.end));
    if (n === null) return false;
    this.end += n;
    return true;
  }

  /** After a large answer, the buffer goes back to its small size (idle connections add up). */
  shrink(): void {
    if (this.buf.length > SMALL && this.end - this.start <= SMALL) {
      const small = new Uint8Array(SMALL);
      small.set(this.buf.subarray(this.start, this.end));
      this.end -= this.start;
      this.start = 0;
      this.buf = small;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.#conn.close();
    } catch { /* already closed */ }
  }
}

/** A pool of kept-alive HTTP/1.1 connections to one server. */
export class RawHttpPool {
  readonly #options: RawPoolOptions;
  readonly #max: number;
  readonly #idleMs: number;
  #idle: Connection[] = [];
  #open = 0;
  #waiters: Array<(connection: Connection | undefined) => void> = [];
  #closed = false;

  /** @param options The server and the TLS material. */
  constructor(options: RawPoolOptions) {
    this.#options = options;
    this.#max = Math.max(1, options.maxConnections ?? 64);
    this.#idleMs = options.idleMs ?? 60_000;
  }

  /** Connections open now (in use or idle). */
  get open(): number {
    return this.#open;
  }

  /**
   * Sends a request and reads its answer whole. A kept-alive connection that turns out closed
   * by the server before any byte of the answer came is replaced once, transparently.
   * @param request What to send.
   * @returns The status, headers and body text.
   * @throws The signal's reason when it aborts; errors of connecting, TLS, or the exchange.
   */
  async request(request: RawRequest): Promise<RawAnswer> {
    request.signal?.throwIfAborted();
    const bytes = this.#encode(request);
    for (let attempt = 0;; attempt++) {
      const connection = await this.#acquire(request.signal, attempt > 0);
      try {
        const answer = await this.#exchange(connection, bytes, request);
        this.#release(connection, answer.close);
        return answer.answer;
      } catch (error) {
        this.#discard(connection);
        if (request.signal?.aborted) throw request.signal.reason;
        if (error instanceof StaleConnection && attempt === 0) continue;
        throw error instanceof StaleConnection ? error.cause : error;
      }
    }
  }

  /**
   * Closes idle connections but the `keep` used last: a burst opens up to `maxConnections`, and
   * each idle one holds its buffers and TLS state on both ends until used again.
   * @param keep How many idle connections stay open.
   * @returns How many were closed.
   */
  closeIdle(keep = 0): number {
    // The idle list is in release order: the ones used last are at its end.
    const spare = this.#idle.slice(0, Math.max(0, this.#idle.length - keep));
    for (const connection of spare) this.#discard(connection);
    return spare.length;
  }

  /** Closes every connection; requests waiting for one fail. */
  close(): void {
    this.#closed = true;
    for (const connection of this.#idle.splice(0)) connection.close();
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }

  #encode(request: RawRequest): Uint8Array {
    const server = this.#options.server;
    let head = `${request.method} ${request.target} HTTP/1.1\r\nHost: ${server.host}\r\n`;
    for (const name in request.headers) head += `${name}: ${request.headers[name]}\r\n`;
    if (request.body === undefined) return encoder.encode(head + "Content-Length: 0\r\n\r\n");
    // Most bodies are ASCII: their length in bytes is known, and one encoding does it all.
    if (!NON_ASCII.test(request.body)) {
      return encoder.encode(`${head}Content-Length: ${request.body.length}\r\n\r\n${request.body}`);
    }
    const body = encoder.encode(request.body);
    const start = encoder.encode(head + `Content-Length: ${body.length}\r\n\r\n`);
    const bytes = new Uint8Array(start.length + body.length);
    bytes.set(start);
    bytes.set(body, start.length);
    return bytes;
  }

  async #exchange(
    connection: Connection,
    bytes: Uint8Array,
    request: RawRequest,
  ): Promise<{ answer: RawAnswer; close: boolean }> {
    const reused = connection.used > 0;
    let received = false;
    const abort = () => connection.close();
    request.signal?.addEventListener("abort", abort, { once: true });
    let timedOut = false;
    const headTimer = request.headTimeoutMs && request.headTimeoutMs > 0
      ? setTimeout(() => {
        timedOut = true;
        connection.close();
      }, request.headTimeoutMs)
      : undefined;
    try {
      await connection.write(bytes);
      // The head: status line and headers, up to the empty line.
      let at: number;
      for (let scanned = 0;;) { // bytes of the head already searched, kept across reads
        at = headEnd(connection.buf, connection.start + Math.max(0, scanned - 3), connection.end);
        if (at >= 0) break;
        scanned = connection.end - connection.start;
        if (connection.end - connection.start > MAX_HEAD) {
          throw new Error("HTTP answer: head too long");
        }
        if (!await connection.fill()) throw new Error("HTTP answer: the connection closed");
        received = true;
      }
      clearTimeout(headTimer);
      // Only what framing needs is looked up; the header map is made if someone asks for it.
      const head = latin1.decode(connection.buf.subarray(connection.start, at));
      connection.start = at + 4;
      const match = /^HTTP\/1\.([01]) (\d{3})/.exec(head);
      if (!match) {
        throw new Error(`HTTP answer: bad status line ${JSON.stringify(head.split("\r\n")[0])}`);
      }
      const status = Number(match[2]);
      const connectionHeader = (headerIn(head, "connection") ?? "").toLowerCase();
      let close = connectionHeader.includes("close") ||
        (match[1] === "0" && !connectionHeader.includes("keep-alive"));
      let text: string;
      const length = headerIn(head, "content-length");
      if (request.method === "HEAD" || status === 204 || status === 304 || status < 200) {
        text = "";
      } else if (/\bchunked\b/i.test(headerIn(head, "transfer-encoding") ?? "")) {
        text = utf8.decode(await readChunked(connection));
      } else if (length !== undefined) {
        // Decoded in place: the buffer is not read into again before the text is made.
        text = utf8.decode(await readLength(connection, Number(length), false));
      } else {
        text = utf8.decode(await readToEnd(connection));
        close = true;
      }
      connection.used++;
      return { answer: new Answer(status, head, text), close };
    } catch (error) {
      if (timedOut) throw new DOMException("Connect timeout", "TimeoutError");
      // Nothing came back on a connection that served before: the server closed it while idle.
      if (reused && !received && !request.signal?.aborted) {
        throw new StaleConnection("the kept-alive connection was closed", { cause: error });
      }
      throw error;
    } finally {
      clearTimeout(headTimer);
      request.signal?.removeEventListener("abort", abort);
    }
  }

  async #acquire(signal: AbortSignal | undefined, fresh: boolean): Promise<Connection> {
    for (;;) {
      if (this.#closed) throw new Error("the connection pool is closed");
      const now = performance.now();
      while (!fresh && this.#idle.length) {
        const connection = this.#idle.pop()!;
        if (now - connection.idleSince < this.#idleMs) return connection;
        this.#discard(connection); // idle too long: the server may close it any moment
      }
      if (this.#open < this.#max) {
        this.#open++;
        try {
          return new Connection(await this.#connect(signal));
        } catch (error) {
          this.#open--;
          this.#wakeOne();
          throw error;
        }
      }
      if (fresh && this.#idle.length) { // at the limit: an idle one makes room for a fresh one
        this.#discard(this.#idle.shift()!);
        continue;
      }
      const connection = await new Promise<Connection | undefined>((resolve, reject) => {
        const cancel = () => {
          this.#waiters = this.#waiters.filter((w) => w !== grant);
          reject(signal?.reason);
        };
        const grant = (c: Connection | undefined) => {
          signal?.removeEventListener("abort", cancel);
          resolve(c);
        };
        this.#waiters.push(grant);
        signal?.addEventListener("abort", cancel, { once: true });
      });
      if (connection && !fresh) return connection;
      if (connection) this.#release(connection, false);
    }
  }

  #connect(signal: AbortSignal | undefined): Promise<RawSocket> {
    const { server, caPem, certPem, keyPem, insecureSkipTlsVerify } = this.#options;
    const tls = server.protocol === "https:";
    const connecting = openSocket({
      hostname: server.hostname.replace(/^\[(.*)\]$/, "$1"),
      port: Number(server.port || (tls ? 443 : 80)),
      tls,
      caPem,
      certPem,
      keyPem,
      insecureSkipTlsVerify,
    });
    if (!signal) return connecting;
    // A connection being set up cannot be aborted: race it, and close it if it comes late.
    return new Promise((resolve, reject) => {
      const cancel = () => reject(signal.reason);
      signal.addEventListener("abort", cancel, { once: true });
      connecting.then((conn) => {
        signal.removeEventListener("abort", cancel);
        if (signal.aborted) conn.close();
        else resolve(conn);
      }, (error) => {
        signal.removeEventListener("abort", cancel);
        reject(error);
      });
    });
  }

  #release(connection: Connection, close: boolean): void {
    if (close || this.#closed || connection.closed) {
      this.#discard(connection);
      return;
    }
    connection.shrink();
    const waiter = this.#waiters.shift();
    if (waiter) {
      waiter(connection);
      return;
    }
    connection.idleSince = performance.now();
    this.#idle.push(connection);
  }

  #discard(connection: Connection): void {
    connection.close();
    const at = this.#idle.indexOf(connection);
    if (at >= 0) this.#idle.splice(at, 1);
    if (connection.discarded) return;
    connection.discarded = true;
    this.#open--;
    this.#wakeOne();
  }

  #wakeOne(): void {
    // A waiter gets no connection, only the news that it may open one now.
    this.#waiters.shift()?.(undefined);
  }
}

/** An answer whose header map is parsed from its head when first asked for. */
class Answer implements RawAnswer {
  readonly status: number;
  readonly text: string;
  readonly #head: string;
  #headers: Map<string, string> | undefined;

  constructor(status: number, head: string, text: string) {
    this.status = status;
    this.#head = head;
    this.text = text;
  }

  get headers(): ReadonlyMap<string, string> {
    if (this.#headers) return this.#headers;
    const headers = this.#headers = new Map();
    const lines = this.#head.split("\r\n");
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      if (colon > 0) {
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    return headers;
  }
}

/** The value of the first header of that name (lower case) in a head, trimmed; or undefined. */
function headerIn(head: string, name: string): string | undefined {
  // Compared by character codes in place: this runs three times for every answer.
  lines: for (let at = head.indexOf("\n"); at >= 0; at = head.indexOf("\n", at + 1)) {
    const from = at + 1;
    if (head.charCodeAt(from + name.length) !== 58) continue; // ":"
    for (let i = 0; i < name.length; i++) {
      const c = head.charCodeAt(from + i);
      if (c !== name.charCodeAt(i) && !(c >= 65 && c <= 90 && c + 32 === name.charCodeAt(i))) {
        continue lines;
      }
    }
    const end = head.indexOf("\r", from);
    return head.slice(from + name.length + 1, end < 0 ? head.length : end).trim();
  }
  return undefined;
}

/** Where the empty line (CR LF CR LF) that ends a head starts in `buf[from, to)`, or -1. */
function headEnd(buf: Uint8Array, from: number, to: number): number {
  // A plain loop: a few hundred bytes, where a builtin call per line costs more than the scan.
  for (let i = Math.max(from, 0); i + 3 < to; i++) {
    if (buf[i + 3] === 10 && buf[i + 2] === 13 && buf[i + 1] === 10 && buf[i] === 13) return i;
  }
  return -1;
}

/**
 * The next `length` bytes of the answer: a copy, or (`copy` false) a view into the read buffer,
 * valid only until the connection is read from again.
 */
async function readLength(
  connection: Connection,
  length: number,
  copy = true,
): Promise<Uint8Array> {
  if (!Number.isFinite(length) || length < 0) throw new Error("HTTP answer: bad Content-Length");
  while (connection.end - connection.start < length) {
    if (!await connection.fill()) throw new Error("HTTP answer: the body ended early");
  }
  const { start } = connection;
  const body = copy
    ? connection.buf.slice(start, start + length)
    : connection.buf.subarray(start, start + length);
  connection.start += length;
  return body;
}

async function readToEnd(connection: Connection): Promise<Uint8Array> {
  while (await connection.fill()) { /* until the server closes */ }
  const body = connection.buf.slice(connection.start, connection.end);
  connection.start = connection.end;
  return body;
}

async function readChunked(connection: Connection): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let lf: number;
    while ((lf = connection.buf.subarray(connection.start, connection.end).indexOf(10)) < 0) {
      if (!await connection.fill()) throw new Error("HTTP answer: the body ended early");
    }
    const line = latin1.decode(connection.buf.subarray(connection.start, connection.start + lf));
    connection.start += lf + 1;
    const size = parseInt(line, 16);
    if (!Number.isFinite(size) || size < 0) throw new Error(`HTTP answer: bad chunk ${line}`);
    if (size === 0) {
      // Trailers (none expected), then the empty line.
      for (;;) {
        while ((lf = connection.buf.subarray(connection.start, connection.end).indexOf(10)) < 0) {
          if (!await connection.fill()) throw new Error("HTTP answer: the body ended early");
        }
        const empty = lf === 0 || (lf === 1 && connection.buf[connection.start] === 13);
        connection.start += lf + 1;
        if (empty) break;
      }
      break;
    }
    parts.push(await readLength(connection, size));
    total += size;
    await readLength(connection, 2); // the CR LF after the data
  }
  return concatBytes(parts, total);
}
