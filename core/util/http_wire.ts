/**
 * The HTTP/1.1 wire protocol of the server in `http_server.ts`, which uses it: one
 * {@link Connection} reads its requests (request line, headers, `Content-Length` and chunked
 * bodies) within the deadlines and byte caps it is given, refusing anything malformed or
 * ambiguous with an {@link HttpError}, hands each to the handler and writes the answer. The
 * listeners, the accept loops, the connection cap, the server-wide byte budget and the TLS relay
 * stay in `http_server.ts`, behind {@link ConnectionHost}.
 * @module
 */

import { concatBytes } from "./bytes.ts";

/** What an answer of the server's own says, and that the connection closes after it. */
export class HttpError extends Error {
  /** The error's name: `HttpError`. */
  override name = "HttpError";
  /**
   * An answer of the server's own.
   *
   * @param status The answer's status code.
   * @param message The answer's body (a line of text).
   */
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
/** How many bytes one read asks for (and a connection's read buffer starts with). */
export const READ_SIZE = 16 * 1024;
const LINGER_MS = 1000;

/** The byte stream of one connection, and how to end it for good. */
export interface Io {
  /** Reads into `buffer`: the count of bytes read, or null at the end of the stream. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes some of `bytes`: the count written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Ends the sending side (the peer reads the end of the stream). */
  closeWrite(): Promise<void>;
  /** Ends the connection at once; pending reads and writes fail. */
  kill(): void;
  /** The TLS handshake, for a TLS connection. */
  handshake?: () => Promise<unknown>;
}

/** What the server knows of one of its connections (to close the idle ones when it stops). */
export interface ConnectionState {
  /** Whether a request is in progress (from the end of its headers until its answer is sent). */
  busy: boolean;
  /** The connection's byte stream. */
  readonly io: Io;
}

/** What a {@link Connection} needs of its server: its limits, its handler, its byte budget. */
export interface ConnectionHost {
  /** The limits, in bytes and seconds (as in `HttpServerLimits`). */
  readonly limits: {
    readonly maxHeaderBytes: number;
    readonly maxBodyBytes: number;
    readonly headerTimeout: number;
    readonly bodyTimeout: number;
    readonly idleTimeout: number;
    readonly writeTimeout: number;
  };
  /** Answers one request. */
  readonly handler: (request: Request) => Response | Promise<Response>;
  /** Told of every error of the handler (answered with 500). */
  readonly onError: ((error: unknown) => void) | undefined;
  /** The scheme of the requests' URLs: `http` or `https`. */
  readonly scheme: string;
  /** Whether the server is stopping (no further request is read). */
  readonly closing: boolean;
  /** Takes `bytes` from the server-wide budget, or throws an {@link HttpError} (503). */
  hold(bytes: number): void;
  /** Gives back `bytes` taken with `hold`. */
  release(bytes: number): void;
  /** Counts a connection closed because a timeout ran out. */
  timedOut(): void;
}

/** Writes all of `bytes` to `to` (a connection's writes may take only part of them). */
export async function writeAll(
  to: { write(bytes: Uint8Array): Promise<number> },
  bytes: Uint8Array,
): Promise<void> {
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
export class Connection {
  readonly #reader: Reader;
  readonly #deadline: Deadline;
  #held = 0;
  #killed = false;
  #lingering = false;

  /**
   * A connection served on behalf of `server`; {@link Connection.run} serves it.
   *
   * @param server The server's limits, handler and byte budget.
   * @param io The connection's byte stream.
   * @param state The server's record of the connection; `busy` is kept up to date.
   */
  constructor(readonly server: ConnectionHost, readonly io: Io, readonly state: ConnectionState) {
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

  /**
   * Serves requests until the connection ends, the client asks to close, or the server stops;
   * refuses a bad request with the server's own answer. Never throws; does not close `io`.
   */
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
    return concatBytes(chunks, length);
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
    return concatBytes(chunks, total);
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
    const out = bodyless || head ? headBytes : concatBytes([headBytes, body]);
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

function encodeLatin1(text: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i) & 0xff;
  return out;
}
