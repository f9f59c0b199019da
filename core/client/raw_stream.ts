/**
 * Long-lived response bodies (watch streams) read straight from a socket: one HTTP/1.1 request
 * over its own TCP/TLS connection, the chunked body decoded here.
 *
 * Why not `fetch`: its body is a WHATWG `ReadableStream`, and the API server flushes every watch
 * event as a chunk of its own, so a burst costs one stream read (an op, promises, a queue) per
 * event — 14% of an operator's CPU in a backlog's profile (docs/performance.md, finding 10). A
 * socket read returns whatever the kernel has buffered, often hundreds of events at once. The
 * price is this small HTTP/1.1 client: status line, headers, and a chunked, length-delimited or
 * until-close body; no redirects, no compression (none is asked for), no proxies (the caller
 * uses `fetch` when a proxy is configured). Sockets come from `_sockets.ts`, which also makes
 * the unverified TLS connections of `insecure-skip-tls-verify`.
 * @module
 */

import { openSocket, type RawSocket } from "./_sockets.ts";

/** A body as bytes, read in whatever pieces arrive. */
export interface ByteStream {
  /** The next bytes, or `null` at the end. The array may be reused by the next call. */
  read(): Promise<Uint8Array | null>;
  /** Closes the connection (idempotent). */
  close(): void;
}

/**
 * A `fetch` response's body as a {@link ByteStream} (closing it cancels the body once).
 * @param response The response, its body unread.
 * @returns The body's chunks.
 */
export function responseBytes(response: Response): ByteStream {
  const reader = response.body?.getReader();
  let closed = false;
  return {
    async read() {
      if (!reader) return null;
      const { value, done } = await reader.read();
      return done ? null : value;
    },
    close() {
      if (closed) return;
      closed = true;
      reader?.cancel().catch(() => {});
    },
  };
}

/** A response whose body is still unread. */
export interface RawResponse {
  readonly status: number;
  /** Header names in lower case. */
  readonly headers: ReadonlyMap<string, string>;
  readonly body: ByteStream;
}

/** What to connect to and what to send. */
export interface RawRequestOptions {
  readonly url: URL;
  readonly method: string;
  readonly headers: Record<string, string>;
  /** TLS: the CA bundle (PEM), and a client certificate with its key (PEM). */
  readonly caPem?: string | undefined;
  readonly certPem?: string | undefined;
  readonly keyPem?: string | undefined;
  /** Do not verify the server's certificate (kubeconfig `insecure-skip-tls-verify`). */
  readonly insecureSkipTlsVerify?: boolean | undefined;
  /** Closes the connection (the pending read then fails with the signal's reason). */
  readonly signal?: AbortSignal | undefined;
  /** Longest wait until the response head is read; 0 or unset: none. */
  readonly connectTimeoutMs?: number | undefined;
}

const READ_SIZE = 256 * 1024;
const MAX_HEAD = 64 * 1024;
const LF = 0x0a;
const encoder = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/** Reads from a connection into one reused buffer, with a cursor over unconsumed bytes. */
class Reader {
  #conn: RawSocket;
  buf = new Uint8Array(READ_SIZE);
  start = 0;
  end = 0;

  constructor(conn: RawSocket) {
    this.#conn = conn;
  }

  get available(): number {
    return this.end - this.start;
  }

  /** Reads more bytes (keeping the unconsumed ones); `false` at EOF. */
  async fill(): Promise<boolean> {
    if (this.start > 0 && this.start === this.end) this.start = this.end = 0;
    if (this.end === this.buf.length) {
      const unread = this.buf.subarray(this.start, this.end);
      const bigger = unread.length * 2 > this.buf.length
        ? new Uint8Array(this.buf.length * 2)
        : this.buf;
      bigger.set(unread);
      this.buf = bigger;
      this.end = unread.length;
      this.start = 0;
    }
    const n = await this.#conn.read(this.buf.subarray(this.end));
    if (n === null) return false;
    this.end += n;
    return true;
  }

  /** The next line (without CR LF), reading more as needed; `null` at EOF. */
  async line(limit: number): Promise<string | null> {
    for (;;) {
      const at = this.buf.subarray(this.start, this.end).indexOf(LF);
      if (at >= 0) {
        const line = latin1.decode(this.buf.subarray(this.start, this.start + at));
        this.start += at + 1;
        return line.endsWith("\r") ? line.slice(0, -1) : line;
      }
      if (this.available > limit) throw new Error("HTTP response: line too long");
      if (!await this.fill()) return null;
    }
  }
}

/**
 * Sends one request on a new connection and reads the response head; the body is left to read.
 *
 * @param options URL, method, headers, TLS material, cancellation.
 * @returns The status, headers and the body as a {@link ByteStream}.
 * @throws When connecting, TLS, or the response head fails (or the signal aborts).
 */
export async function rawRequest(options: RawRequestOptions): Promise<RawResponse> {
  const { url, signal } = options;
  signal?.throwIfAborted();
  const tls = url.protocol === "https:";
  const connecting = openSocket({
    hostname: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(url.port || (tls ? 443 : 80)),
    tls,
    caPem: options.caPem,
    certPem: options.certPem,
    keyPem: options.keyPem,
    insecureSkipTlsVerify: options.insecureSkipTlsVerify,
  });
  // Until the head is read: a timer, and the caller's signal (a connection cannot be aborted
  // while it is being set up, so both race it and close it once it is there).
  const began = performance.now();
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const timeout = new Promise<never>((_, reject) => {
    const ms = options.connectTimeoutMs ?? 0;
    if (ms > 0) {
      timer = setTimeout(() => {
        timedOut = true;
        reject(new DOMException("Connect timeout", "TimeoutError"));
      }, ms);
    }
    onAbort = () => reject(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  timeout.catch(() => {});
  let conn: RawSocket;
  try {
    conn = await Promise.race([connecting, timeout]);
  } catch (error) {
    connecting.then((c) => c.close(), () => {});
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort!);
    throw error;
  }
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    signal?.removeEventListener("abort", close);
    try {
      conn.close();
    } catch { /* already closed */ }
  };
  signal?.removeEventListener("abort", onAbort!);
  signal?.addEventListener("abort", close, { once: true });
  if (signal?.aborted) close();
  if (timer !== undefined) {
    clearTimeout(timer);
    timer = setTimeout(() => {
      timedOut = true;
      close();
    }, Math.max(1, (options.connectTimeoutMs ?? 0) - (performance.now() - began)));
  }
  try {
    const head = [`${options.method} ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`];
    for (const [name, value] of Object.entries(options.headers)) head.push(`${name}: ${value}`);
    head.push("Connection: close", "", "");
    const bytes = encoder.encode(head.join("\r\n"));
    for (let sent = 0; sent < bytes.length;) sent += await conn.write(bytes.subarray(sent));

    const reader = new Reader(conn);
    const statusLine = await reader.line(MAX_HEAD);
    const match = statusLine?.match(/^HTTP\/1\.[01] (\d{3})/);
    if (!match) throw new Error(`HTTP response: bad status line ${JSON.stringify(statusLine)}`);
    const headers = new Map<string, string>();
    for (;;) {
      const line = await reader.line(MAX_HEAD);
      if (line === null) throw new Error("HTTP response: the connection closed in the headers");
      if (line === "") break;
      const colon = line.indexOf(":");
      if (colon > 0) {
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    const chunked = /\bchunked\b/i.test(headers.get("transfer-encoding") ?? "");
    const length = headers.has("content-length") ? Number(headers.get("content-length")) : NaN;
    const body = chunked
      ? chunkedBody(reader, close)
      : Number.isFinite(length)
      ? lengthBody(reader, length, close)
      : lengthBody(reader, Infinity, close);
    clearTimeout(timer);
    return { status: Number(match[1]), headers, body };
  } catch (error) {
    clearTimeout(timer);
    close();
    if (signal?.aborted) throw signal.reason;
    if (timedOut) throw new DOMException("Connect timeout", "TimeoutError");
    throw error;
  }
}

/** A body of `length` bytes (or until the connection closes, for `Infinity`). */
function lengthBody(reader: Reader, length: number, close: () => void): ByteStream {
  let left = length;
  return {
    async read() {
      if (left <= 0) return null;
      if (!reader.available && !await reader.fill()) {
        if (Number.isFinite(left)) throw new Error("HTTP response: the body ended early");
        return null;
      }
      const take = Math.min(left, reader.available);
      const out = reader.buf.slice(reader.start, reader.start + take);
      reader.start += take;
      left -= take;
      return out;
    },
    close,
  };
}

/**
 * A chunked body: each `read()` returns the data of all complete and partial chunks that are
 * buffered, so one socket read of many small chunks (one per watch event) is one `read()` here.
 */
function chunkedBody(reader: Reader, close: () => void): ByteStream {
  let inChunk = 0; // data bytes left in the current chunk
  let done = false;
  let out = new Uint8Array(READ_SIZE);
  return {
    async read() {
      if (done) return null;
      let size = 0;
      for (;;) {
        // Copy out what is buffered: chunk data, chunk boundaries skipped.
        while (reader.available > 0) {
          if (inChunk > 0) {
            const take = Math.min(inChunk, reader.available);
            if (size + take > out.length) {
              const bigger = new Uint8Array(Math.max(out.length * 2, size + take));
              bigger.set(out.subarray(0, size));
              out = bigger;
            }
            out.set(reader.buf.subarray(reader.start, reader.start + take), size);
            size += take;
            reader.start += take;
            inChunk -= take;
            if (inChunk === 0) inChunk = -2; // the CR LF after the data
            continue;
          }
          if (inChunk < 0) { // skipping the CR LF after a chunk's data
            const skip = Math.min(-inChunk, reader.available);
            reader.start += skip;
            inChunk += skip;
            continue;
          }
          // A chunk-size line: hex size, optional extensions.
          const lf = reader.buf.subarray(reader.start, reader.end).indexOf(LF);
          if (lf < 0) break; // incomplete: read more
          const line = latin1.decode(reader.buf.subarray(reader.start, reader.start + lf));
          reader.start += lf + 1;
          const chunkSize = parseInt(line, 16);
          if (!Number.isFinite(chunkSize)) throw new Error(`HTTP response: bad chunk ${line}`);
          if (chunkSize === 0) { // the last chunk (trailers are ignored)
            done = true;
            close();
            return size ? out.subarray(0, size) : null;
          }
          inChunk = chunkSize;
        }
        if (size > 0) return out.subarray(0, size);
        if (!await reader.fill()) {
          done = true;
          throw new Error("HTTP response: the connection closed in a chunked body");
        }
      }
    },
    close,
  };
}
