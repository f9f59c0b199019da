/**
 * Sockets for the client's own HTTP/1.1 transports (`raw_http.ts`, `raw_stream.ts`): plain TCP,
 * TLS verified against the connection's CA, or — for a kubeconfig's `insecure-skip-tls-verify:
 * true` — TLS without verification of the server's certificate.
 *
 * Every socket is opened with `TCP_NODELAY` (Nagle's algorithm off), as Go's net/http and curl
 * do. With Nagle on (the default of `Deno.connect` and `Deno.connectTls`), the TLS handshake's
 * last flight waits for the server's delayed acknowledgement: the first request on each new
 * connection took ~45 ms instead of ~2 (loopback, kube-apiserver) — at start-up, for every
 * watch, and for every connection a burst opens. So TLS is a TCP connection with
 * `setNoDelay(true)` upgraded by `Deno.startTls`. Deno 2.9's `startTls` cannot present a client
 * certificate, and `Deno.connectTls` (which can) cannot switch Nagle off: connections with a
 * client certificate keep the ~40-ms first exchange.
 *
 * Deno 2.9's own TLS (`Deno.connectTls`, `Deno.startTls`, `Deno.createHttpClient`) cannot skip
 * the verification per connection: only the process-wide `--unsafely-ignore-certificate-errors`
 * does. Its `node:tls` can (`rejectUnauthorized: false`), so unverified connections are
 * `node:tls` sockets behind the same small interface. `node:tls` is loaded only then: it brings
 * Node's compatibility layer, megabytes that a verified connection does not need.
 * @module
 */

/** What the raw transports need of a socket (a `Deno.Conn` is one). */
export interface RawSocket {
  /** Reads into `buffer`; the number of bytes read, `null` at the end of the stream. */
  read(buffer: Uint8Array): Promise<number | null>;
  /** Writes some of `bytes`; the number written. */
  write(bytes: Uint8Array): Promise<number>;
  /** Closes the socket (idempotent for the wrapper; a `Deno.Conn` may throw the second time). */
  close(): void;
}

/** Where to connect and how to trust the server. */
export interface SocketOptions {
  /** Host name or IP address (without brackets). */
  readonly hostname: string;
  /** Port. */
  readonly port: number;
  /** TLS (`https:`) or plain TCP. */
  readonly tls: boolean;
  /** The CA bundle (PEM) that the server's certificate is verified against. */
  readonly caPem?: string | undefined;
  /** A client certificate and its key (PEM). */
  readonly certPem?: string | undefined;
  readonly keyPem?: string | undefined;
  /** Do not verify the server's certificate at all (kubeconfig `insecure-skip-tls-verify`). */
  readonly insecureSkipTlsVerify?: boolean | undefined;
}

/**
 * Opens a socket to the server.
 * @param options Address and TLS material.
 * @param net Deno's networking (tests replace it).
 * @returns The connected socket (after the TLS handshake for unverified connections).
 */
export async function openSocket(
  options: SocketOptions,
  net: SocketNet = DENO_NET,
): Promise<RawSocket> {
  const { hostname, port } = options;
  if (!options.tls) return await connectNoDelay(net, hostname, port);
  if (options.insecureSkipTlsVerify) return await connectUnverified(options);
  const caCerts = options.caPem ? { caCerts: [options.caPem] } : {};
  if (options.certPem && options.keyPem) {
    const cert = { cert: options.certPem, key: options.keyPem };
    return await net.connectTls({ hostname, port, ...caCerts, ...cert });
  }
  const tcp = await connectNoDelay(net, hostname, port);
  try {
    // `hostname` is what the server's certificate is verified against (an IP address too).
    return await net.startTls(tcp, { hostname, ...caCerts });
  } catch (error) {
    tcp.close();
    throw error;
  }
}

/** The parts of Deno's networking that {@link openSocket} uses (replaceable in tests). */
export interface SocketNet {
  /** `Deno.connect`. */
  connect(options: Deno.ConnectOptions): Promise<Deno.TcpConn>;
  /** `Deno.startTls`. */
  startTls(conn: Deno.TcpConn, options: Deno.StartTlsOptions): Promise<Deno.TlsConn>;
  /** `Deno.connectTls` (only for client certificates). */
  connectTls(options: Deno.ConnectTlsOptions & Deno.TlsCertifiedKeyPem): Promise<Deno.TlsConn>;
}

const DENO_NET: SocketNet = {
  connect: (options) => Deno.connect(options),
  startTls: (conn, options) => Deno.startTls(conn, options),
  connectTls: (options) => Deno.connectTls(options),
};

async function connectNoDelay(net: SocketNet, hostname: string, port: number) {
  const tcp = await net.connect({ hostname, port });
  tcp.setNoDelay(true);
  return tcp;
}

/** Unread bytes above which the socket is paused until they are read. */
const HIGH_WATER = 256 * 1024;

async function connectUnverified(options: SocketOptions): Promise<RawSocket> {
  const tls = await import("node:tls");
  const { isIP } = await import("node:net");
  return await new Promise<RawSocket>((resolve, reject) => {
    const socket = tls.connect({
      host: options.hostname,
      port: options.port,
      // SNI takes host names only.
      ...(isIP(options.hostname) ? {} : { servername: options.hostname }),
      rejectUnauthorized: false,
      ...(options.certPem && options.keyPem ? { cert: options.certPem, key: options.keyPem } : {}),
    });
    socket.setNoDelay(true);
    const failed = (error: Error) => reject(error);
    socket.once("error", failed);
    socket.once("secureConnect", () => {
      socket.off("error", failed);
      resolve(new NodeSocket(socket));
    });
  });
}

/** The part of a `node:tls` socket that {@link NodeSocket} uses. */
interface NodeDuplex {
  on(event: "data", listener: (chunk: Uint8Array) => void): unknown;
  on(event: "end" | "close", listener: () => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  write(chunk: Uint8Array, callback: (error?: Error | null) => void): boolean;
  destroy(): unknown;
}

/** A `node:tls` socket read and written as a `Deno.Conn`: pull-based reads with backpressure. */
class NodeSocket implements RawSocket {
  readonly #socket: NodeDuplex;
  readonly #chunks: Uint8Array[] = [];
  #buffered = 0;
  #ended = false;
  #closed = false;
  #error: Error | undefined;
  #wake: (() => void) | undefined;

  constructor(socket: NodeDuplex) {
    this.#socket = socket;
    socket.on("data", (chunk) => {
      this.#chunks.push(chunk);
      this.#buffered += chunk.length;
      if (this.#buffered > HIGH_WATER) socket.pause();
      this.#notify();
    });
    socket.on("end", () => this.#finish());
    socket.on("close", () => this.#finish());
    socket.on("error", (error) => {
      this.#error ??= error;
      this.#notify();
    });
  }

  #finish(): void {
    this.#ended = true;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  async read(buffer: Uint8Array): Promise<number | null> {
    while (this.#chunks.length === 0 || this.#closed) {
      // As a Deno.Conn: a read pending or started after close() fails, it does not end.
      if (this.#closed) throw new Deno.errors.Interrupted("The socket was closed");
      if (this.#error) throw this.#error;
      if (this.#ended) return null;
      await new Promise<void>((resolve) => this.#wake = resolve);
    }
    let n = 0;
    while (n < buffer.length && this.#chunks.length) {
      const chunk = this.#chunks[0]!;
      const take = Math.min(chunk.length, buffer.length - n);
      buffer.set(chunk.subarray(0, take), n);
      n += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    this.#buffered -= n;
    if (this.#buffered <= HIGH_WATER) this.#socket.resume();
    return n;
  }

  write(bytes: Uint8Array): Promise<number> {
    if (this.#error) return Promise.reject(this.#error);
    if (this.#ended || this.#closed) {
      return Promise.reject(new Deno.errors.BrokenPipe("The socket is closed"));
    }
    // A copy: the caller may reuse its buffer once this resolves, Node may still hold it.
    const copy = bytes.slice();
    return new Promise((resolve, reject) => {
      this.#socket.write(copy, (error) => error ? reject(error) : resolve(copy.length));
    });
  }

  close(): void {
    this.#closed = true;
    this.#socket.destroy();
    this.#notify();
  }
}
