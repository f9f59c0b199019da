/**
 * A raw HTTP/1.1 client for tests of hostile input: writes bytes exactly as given (half a
 * request, a lying Content-Length, a trickle), reads responses framed by Content-Length, and
 * tells when the server has closed the connection.
 * @module
 */

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** How long a raw client waits for an answer or a close before it fails the test. */
export const PATIENCE_MS = 10_000;

/** A response as read off the wire. */
export interface RawResponse {
  /** The status code. */
  readonly status: number;
  /** The headers. */
  readonly headers: Headers;
  /** The body, as text. */
  readonly body: string;
}

/** A connection written and read byte by byte. */
export class RawHttp {
  #buffer = new Uint8Array(0);

  /** @param conn A connected TCP or TLS connection. */
  constructor(readonly conn: Deno.Conn) {}

  /**
   * Opens a plain TCP connection.
   * @param port The port on 127.0.0.1.
   * @returns The client.
   */
  static async open(port: number): Promise<RawHttp> {
    return new RawHttp(await Deno.connect({ hostname: "127.0.0.1", port }));
  }

  /**
   * Opens a TLS connection (handshake done).
   * @param port The port on 127.0.0.1.
   * @param caPem The CA to trust.
   * @returns The client.
   */
  static async openTls(port: number, caPem: string): Promise<RawHttp> {
    const conn = await Deno.connectTls({ hostname: "127.0.0.1", port, caCerts: [caPem] });
    await conn.handshake();
    return new RawHttp(conn);
  }

  /**
   * Writes all of `data`.
   * @param data Text or bytes.
   */
  async send(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    for (let offset = 0; offset < bytes.length;) {
      offset += await this.conn.write(bytes.subarray(offset));
    }
  }

  /** Reads more; false at EOF (or a reset); fails past PATIENCE_MS. */
  async #fill(): Promise<boolean> {
    const chunk = new Uint8Array(65536);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`The server neither answered nor closed in ${PATIENCE_MS} ms`)),
        PATIENCE_MS,
      );
    });
    try {
      const n = await Promise.race([this.conn.read(chunk).catch(() => null), timeout]);
      if (n === null) return false;
      const joined = new Uint8Array(this.#buffer.length + n);
      joined.set(this.#buffer);
      joined.set(chunk.subarray(0, n), this.#buffer.length);
      this.#buffer = joined;
      return true;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Reads one response (framed by its Content-Length).
   * @returns The response.
   * @throws {Error} when the connection closes first, or nothing comes in time.
   */
  async response(): Promise<RawResponse> {
    for (;;) {
      const text = decoder.decode(this.#buffer);
      const end = text.indexOf("\r\n\r\n");
      if (end >= 0) {
        const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
        const headers = new Headers(lines.map((line) => {
          const colon = line.indexOf(":");
          return [line.slice(0, colon), line.slice(colon + 1).trim()] as [string, string];
        }));
        const length = Number(headers.get("content-length") ?? 0);
        const headBytes = encoder.encode(text.slice(0, end + 4)).length;
        if (this.#buffer.length >= headBytes + length) {
          const body = decoder.decode(this.#buffer.subarray(headBytes, headBytes + length));
          this.#buffer = this.#buffer.slice(headBytes + length);
          return { status: Number(statusLine!.split(" ")[1]), headers, body };
        }
      }
      if (!(await this.#fill())) throw new Error(`Closed before a response: ${text}`);
    }
  }

  /** Resolves when the server has closed the connection (dropping whatever it sent). */
  async closed(): Promise<void> {
    while (await this.#fill()) { /* dropped */ }
  }

  /** Closes this side. */
  close(): void {
    try {
      this.conn.close();
    } catch { /* closed */ }
  }
}

/**
 * Sends one request on a connection of its own and reads the response.
 * @param port The port on 127.0.0.1.
 * @param request The raw request.
 * @param caPem With TLS: the CA to trust.
 * @returns The response.
 */
export async function exchange(
  port: number,
  request: string | Uint8Array,
  caPem?: string,
): Promise<RawResponse> {
  const raw = caPem ? await RawHttp.openTls(port, caPem) : await RawHttp.open(port);
  try {
    await raw.send(request);
    return await raw.response();
  } finally {
    raw.close();
  }
}
