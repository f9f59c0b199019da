/**
 * The one funnel through which every HTTP request to the API server goes.
 *
 * Owns TLS (`Deno.createHttpClient`), authentication headers (after a 401, refreshed or other
 * credentials are tried), request and connect timeouts, retries with exponential backoff and
 * jitter (network errors, 429 honouring `Retry-After`, 5xx; never other 4xx), an optional
 * client-side rate limit (`throttle.ts`), and request counting.
 * It knows paths, not resources: `api.ts` builds the paths.
 * @module
 */

import { backoffDelay, type BackoffOptions, parseRetryAfter, sleep } from "../util/backoff.ts";
import type { ConnectionInfo } from "./connection.ts";
import { classify, RequestCounters } from "./counters.ts";
import { type ByteStream, rawRequest, responseBytes } from "./raw_stream.ts";
import { type Deadline, Deadlines } from "./deadlines.ts";
import { type RawAnswer, RawHttpPool } from "./raw_http.ts";
import { RequestThrottle } from "./throttle.ts";
import { mayTrace } from "../util/tracing_presence.ts";
import {
  ApiError,
  apiErrorFrom,
  isRetryable,
  type RequestInfo,
  TransportError,
  transportErrorFrom,
} from "./errors.ts";

/** How many rejected (401) credentials one request tries past before it gives up. */
const MAX_CREDENTIALS_PER_REQUEST = 16;

/** The `fetch` signature the client uses; replaceable for in-process servers. */
export type FetchFn = (
  input: Request | URL | string,
  init?: RequestInit & { client?: Deno.HttpClient },
) => Promise<Response>;

/** Options of {@link HttpClient}. */
export interface HttpClientOptions {
  /** Per-request timeout in milliseconds (not applied to streams once they started). @default 60000 */
  readonly timeoutMs?: number;
  /**
   * Longest wait for the response headers of one attempt, in milliseconds; 0 or unset: none
   * (the request timeout still applies). Deno's `fetch` has no separate TCP/TLS-connect timeout,
   * so this bounds connecting, the TLS handshake, sending, and the server's time to answer.
   * Streams (watches) without a connect timeout of their own or here fall back to `timeoutMs`.
   * @default 0
   */
  readonly connectTimeoutMs?: number;
  /** How many times a retryable failure is retried. @default 6 */
  readonly retries?: number;
  /** Growth of the delays between retries. */
  readonly backoff?: BackoffOptions;
  /** Longest `Retry-After` honoured, in milliseconds. @default 60000 */
  readonly maxRetryAfterMs?: number;
  /** Client-side rate limit: sustained requests per second (0 = unlimited). @default 0 */
  readonly qps?: number;
  /** Client-side rate limit: burst size. @default max(1, qps) */
  readonly burst?: number;
  /** Counters to record into (shared between clients if given). */
  readonly counters?: RequestCounters;
  /** `User-Agent` header. @default "kopf-ts" */
  readonly userAgent?: string;
  /** Replacement for the global `fetch` (e.g. an in-process emulator). */
  readonly fetch?: FetchFn;
  /**
   * Kept-alive HTTP/1.1 connections at most, for requests with short answers (gets, lists,
   * patches); watches have a connection each besides. @default 64
   */
  readonly maxConnections?: number;
  /** Called after every answer (or transport failure, code 0), e.g. to log API traffic. */
  readonly onResponse?: (info: { method: string; path: string; code: number; ms: number }) => void;
}

/** One request to make. */
export interface HttpRequest {
  /** HTTP method. @default "GET" */
  readonly method?: string;
  /** Absolute path on the server, e.g. `/api/v1/namespaces`. */
  readonly path: string;
  /** Query parameters; `undefined` values are skipped. */
  readonly query?: Record<string, string | number | boolean | undefined>;
  /** JSON-serialisable body. */
  readonly body?: unknown;
  /** Content type of the body. @default "application/json" */
  readonly contentType?: string;
  /** Cancels the request (and its retries). */
  readonly signal?: AbortSignal;
  /** Overrides the client's timeout; `0` disables it. */
  readonly timeoutMs?: number;
  /** Overrides the client's connect timeout (until the response headers); `0` disables it. */
  readonly connectTimeoutMs?: number;
  /** Overrides the client's retry count (e.g. `0` for the watch stream). */
  readonly retries?: number;
  /**
   * Overrides the client's retries and their delays: one retry after each delay (ms), no jitter
   * (e.g. Events with `settings.posting.defaultBackoffs`). A `Retry-After` still wins.
   */
  readonly backoffDelaysMs?: readonly number[];
  /** Overrides the `Accept` header. @default "application/json" */
  readonly accept?: string;
  /**
   * A long-lived stream (a watch): sent over its own HTTP/1.1 connection instead of the shared
   * HTTP/2 one. The kernel's socket buffer then absorbs a burst of events while the operator is
   * busy; on a shared HTTP/2 connection the server may send only as far ahead as the stream's
   * flow-control window, which frees up only as the stream is read, and the API server closes
   * watches it cannot write to for a while ("unresponsive watcher"). @default false
   */
  readonly stream?: boolean;
}

/** Sends requests to one API server. Dispose it to close its connection pool. */
export class HttpClient implements Disposable {
  /** Where requests go and how they authenticate. */
  readonly connection: ConnectionInfo;
  /** Request counts by verb, resource and status code. */
  readonly counters: RequestCounters;
  #options: HttpClientOptions;
  #tls: Deno.HttpClient | undefined;
  #streams: Deno.HttpClient | undefined;
  #fetch: FetchFn;
  #deadlines = new Deadlines();
  #raw: RawHttpPool | null | undefined;
  #serverPrefix: string | undefined;
  readonly #throttle: RequestThrottle;

  /**
   * Creates the funnel; its connections (and, for `https:` servers, the TLS clients with the
   * connection's CA and client certificate) are made on first use.
   *
   * @param connection Server, TLS material and credentials.
   * @param options Timeouts, retries, rate limit.
   */
  constructor(connection: ConnectionInfo, options: HttpClientOptions = {}) {
    this.connection = connection;
    this.#options = options;
    this.counters = options.counters ?? new RequestCounters();
    this.#fetch = options.fetch ?? fetch;
    this.#throttle = new RequestThrottle(options.qps ?? 0, options.burst);
  }

  #clientOptions(
    extra: Deno.CreateHttpClientOptions = {},
  ): Deno.CreateHttpClientOptions & Partial<Deno.TlsCertifiedKeyPem> {
    const connection = this.connection;
    return {
      ...(connection.caPem ? { caCerts: [connection.caPem] } : {}),
      ...(connection.clientCertPem && connection.clientKeyPem
        ? { cert: connection.clientCertPem, key: connection.clientKeyPem }
        : {}),
      ...extra,
    };
  }

  /** The client for a request: streams get HTTP/1.1 connections of their own (see `stream`). */
  #clientFor(request: HttpRequest): Deno.HttpClient | undefined {
    // Made on first use: most requests go over the client's own connections (`#pool`).
    if (!this.connection.server.startsWith("https:") || this.#options.fetch) return undefined;
    this.#tls ??= Deno.createHttpClient(this.#clientOptions());
    if (!request.stream) return this.#tls;
    return this.#streams ??= Deno.createHttpClient(
      this.#clientOptions({ http1: true, http2: false }),
    );
  }

  /**
   * Sends a request and parses the JSON answer, retrying what is worth retrying.
   *
   * @param request What to send.
   * @returns The parsed JSON body.
   * @throws {ApiError} for non-2xx answers (after retries for 429/5xx).
   * @throws {TransportError} when the server cannot be reached (after retries).
   */
  async json<T = unknown>(request: HttpRequest): Promise<T> {
    // The hot path (every patch, get and list): a deadline per attempt from the shared
    // Deadlines instead of a timer and a dependent signal of its own; open until the body is in.
    let deadline: Deadline | undefined;
    const pool = this.#pool();
    if (pool) {
      try {
        const text = await this.#attempts(request, (auth) => {
          deadline?.close();
          deadline = this.#deadlines.open(request.signal, this.#timeoutMs(request));
          return this.#onceText(pool, request, auth, deadline);
        });
        return (text ? JSON.parse(text) : {}) as T;
      } finally {
        deadline?.close();
      }
    }
    try {
      const response = await this.#attempts(request, (auth) => {
        deadline?.close();
        deadline = this.#deadlines.open(request.signal, this.#timeoutMs(request));
        return this.#once(request, auth, deadline);
      });
      const text = await response.text();
      return (text ? JSON.parse(text) : {}) as T;
    } finally {
      deadline?.close();
    }
  }

  /**
   * Sends a request and returns the successful response with its body unread (for streams).
   *
   * @param request What to send.
   * @returns The response with a 2xx status.
   * @throws {ApiError} for non-2xx answers (after retries for 429/5xx).
   * @throws {TransportError} when the server cannot be reached (after retries).
   */
  send(request: HttpRequest): Promise<Response> {
    return this.#attempts(request, (auth) => this.#once(request, auth));
  }

  /**
   * Opens a long-lived stream (a watch) and returns its body as bytes. Where it can, the body
   * is read from a socket of its own (`raw_stream.ts`: far less overhead per event than a
   * `fetch` body); it goes through `fetch` when `fetch` is replaced (an in-process server) or
   * when a proxy is configured in the environment (`loadKubeconfig` refuses
   * `insecure-skip-tls-verify` then: Deno's `fetch` cannot skip verification).
   *
   * @param request What to send (`stream` is implied).
   * @returns The body of a 2xx answer; close it when done.
   * @throws {ApiError} for non-2xx answers (after retries for 429/5xx).
   * @throws {TransportError} when the server cannot be reached (after retries).
   */
  async openStream(request: HttpRequest): Promise<ByteStream> {
    if (!this.#rawStreams()) return responseBytes(await this.send({ ...request, stream: true }));
    return await this.#attempts(request, (auth) => this.#onceRaw(request, auth));
  }

  #rawStreams(): boolean {
    if (this.#options.fetch) return false;
    if (!/^https?:/.test(this.connection.server)) return false;
    try {
      const proxies = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"];
      return !proxies.some((name) => Deno.env.get(name));
    } catch {
      return true; // no permission to read the environment: fetch could not see a proxy either
    }
  }

  async #attempts<T>(
    request: HttpRequest,
    once: (auth: Record<string, string>) => Promise<T>,
  ): Promise<T> {
    const delays = request.backoffDelaysMs;
    const retries = delays?.length ?? request.retries ?? this.#options.retries ?? 6;
    // After a 401, the next credentials (or refreshed ones) are tried, as long as they differ
    // from all rejected so far in this request, and not endlessly.
    let rejected: Set<string> | undefined; // made on the first 401 only
    for (let attempt = 0;; attempt++) {
      const auth = await this.connection.credentials.headers(request.signal);
      try {
        return await once(auth);
      } catch (error) {
        if (request.signal?.aborted) throw request.signal.reason;
        if (error instanceof ApiError && error.code === 401) {
          const key = JSON.stringify(auth);
          rejected ??= new Set();
          if (!rejected.has(key) && rejected.size < MAX_CREDENTIALS_PER_REQUEST) {
            rejected.add(key);
            if (await this.connection.credentials.invalidate(auth)) continue;
          }
        }
        if (!isRetryable(error) || attempt >= retries) throw error;
        const hinted = error instanceof ApiError ? error.retryAfterMs : undefined;
        const max = this.#options.maxRetryAfterMs ?? 60_000;
        const delay = hinted !== undefined
          ? Math.min(hinted, max)
          : delays
          ? delays[Math.min(attempt, delays.length - 1)]!
          : backoffDelay(attempt, this.#options.backoff);
        await sleep(delay, request.signal);
      }
    }
  }

  /** One attempt of {@link openStream} over a socket of its own. */
  async #onceRaw(request: HttpRequest, auth: Record<string, string>): Promise<ByteStream> {
    await this.#throttle.wait(request.signal);
    const method = (request.method ?? "GET").toUpperCase();
    const url = new URL(this.connection.server + request.path);
    for (const [key, value] of Object.entries(request.query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    const info: RequestInfo = {
      method,
      path: url.pathname + url.search,
      server: this.connection.server,
    };
    const { verb, resource } = classify(method, url.pathname, url.searchParams);
    const connectMs = this.#connectTimeoutMs({ ...request, stream: true });
    const began = performance.now();
    const report = (code: number) =>
      this.#options.onResponse?.({
        method,
        path: info.path,
        code,
        ms: Math.round(performance.now() - began),
      });
    let response;
    try {
      response = await rawRequest({
        url,
        method,
        headers: {
          Accept: request.accept ?? "application/json",
          "User-Agent": this.#options.userAgent ?? "kopf-ts",
          ...auth,
        },
        caPem: this.connection.caPem,
        certPem: this.connection.clientCertPem,
        keyPem: this.connection.clientKeyPem,
        insecureSkipTlsVerify: this.connection.insecureSkipTlsVerify,
        signal: request.signal,
        connectTimeoutMs: connectMs,
      });
    } catch (error) {
      this.counters.record({ verb, resource, code: 0 });
      report(0);
      if (request.signal?.aborted) throw request.signal.reason;
      if (error instanceof DOMException && error.name === "TimeoutError") {
        throw new TransportError(
          `No response from ${info.server} within the connect timeout of ${connectMs} ms: ${method} ${info.path}`,
          info,
          "timeout",
          error,
        );
      }
      throw transportErrorFrom(error, info, this.connection.source);
    }
    this.counters.record({ verb, resource, code: response.status });
    report(response.status);
    if (response.status >= 200 && response.status < 300) return response.body;
    const text = await readText(response.body).catch(() => "");
    throw apiErrorFrom(
      response.status,
      text,
      info,
      parseRetryAfter(response.headers.get("retry-after") ?? null),
    );
  }

  /** What every attempt of a request needs: its URL, description, counter key and headers. */
  #prepare(request: HttpRequest, auth: Record<string, string>) {
    const method = (request.method ?? "GET").toUpperCase();
    const query = Object.entries(request.query ?? {}).filter(([, value]) => value !== undefined);
    // Most requests (patches, gets) have no query: no URL object to build and parse for them.
    let url: URL | string, pathname: string, search: string, params: URLSearchParams | undefined;
    if (query.length === 0 && !request.path.includes("?")) {
      url = this.connection.server + request.path;
      pathname = request.path;
      search = "";
    } else {
      const parsed = new URL(this.connection.server + request.path);
      for (const [key, value] of query) parsed.searchParams.set(key, String(value));
      url = parsed;
      pathname = parsed.pathname;
      search = parsed.search;
      params = parsed.searchParams;
    }
    const info: RequestInfo = { method, path: pathname + search, server: this.connection.server };
    const { verb, resource } = classify(method, pathname, params);
    const headers: Record<string, string> = {
      Accept: request.accept ?? "application/json",
      "User-Agent": this.#options.userAgent ?? "kopf-ts",
      ...auth,
    };
    if (request.body !== undefined) {
      headers["Content-Type"] = request.contentType ?? "application/json";
    }
    return { method, url, pathname, search, info, verb, resource, headers };
  }

  /**
   * The kept-alive connections for short requests (`raw_http.ts`), where they can be used: not
   * with a replaced `fetch` (an in-process server), a proxy in the environment, or OpenTelemetry
   * on — unless `insecureSkipTlsVerify`, which only these connections can honour (Deno's `fetch`
   * cannot skip verification; its requests are then not traced); decided once.
   */
  #pool(): RawHttpPool | undefined {
    if (this.#raw === undefined) {
      // With OpenTelemetry on, requests go through `fetch`, which Deno traces (the spans of a
      // cycle's requests are part of its trace); the client's own connections are not traced.
      const insecure = Boolean(this.connection.insecureSkipTlsVerify);
      this.#raw = this.#rawStreams() && (insecure || !mayTrace())
        ? new RawHttpPool({
          server: new URL(this.connection.server),
          caPem: this.connection.caPem,
          certPem: this.connection.clientCertPem,
          keyPem: this.connection.clientKeyPem,
          insecureSkipTlsVerify: insecure,
          maxConnections: this.#options.maxConnections,
        })
        : null;
    }
    return this.#raw ?? undefined;
  }

  /** One attempt of {@link json} over the kept-alive connections: the answer's text. */
  async #onceText(
    pool: RawHttpPool,
    request: HttpRequest,
    auth: Record<string, string>,
    deadline: Deadline,
  ): Promise<string> {
    await this.#throttle.wait(request.signal);
    const { method, url, pathname, search, info, verb, resource, headers } = this.#prepare(
      request,
      auth,
    );
    const prefix = typeof url === "string" ? this.#serverPath() : "";
    const began = performance.now();
    let answer: RawAnswer;
    try {
      answer = await pool.request({
        method,
        target: typeof url === "string" ? prefix + pathname + search : url.pathname + url.search,
        headers,
        body: request.body !== undefined ? JSON.stringify(request.body) : undefined,
        signal: deadline.signal,
        headTimeoutMs: this.#connectTimeoutMs(request),
      });
    } catch (error) {
      this.counters.record({ verb, resource, code: 0 }, (performance.now() - began) / 1000);
      this.#report(method, info.path, 0, began);
      if (request.signal?.aborted) throw request.signal.reason;
      if (
        error instanceof DOMException && error.message === "Connect timeout" &&
        !deadline.signal.aborted
      ) {
        throw new TransportError(
          `No response from ${info.server} within the connect timeout of ${
            this.#connectTimeoutMs(request)
          } ms: ${method} ${info.path}`,
          info,
          "timeout",
          error,
        );
      }
      // The deadline's own reason tells a timeout apart from a failure.
      throw transportErrorFrom(
        deadline.signal.aborted ? deadline.signal.reason : error,
        info,
        this.connection.source,
      );
    }
    const seconds = (performance.now() - began) / 1000;
    this.counters.record({ verb, resource, code: answer.status }, seconds);
    this.#report(method, info.path, answer.status, began);
    if (answer.status >= 200 && answer.status < 300) return answer.text;
    throw apiErrorFrom(
      answer.status,
      answer.text,
      info,
      parseRetryAfter(answer.headers.get("retry-after") ?? null),
    );
  }

  /** The server URL's own path (a proxy's prefix), without a trailing slash. */
  #serverPath(): string {
    return this.#serverPrefix ??= new URL(this.connection.server).pathname.replace(/\/$/, "");
  }

  #report(method: string, path: string, code: number, began: number): void {
    this.#options.onResponse?.({ method, path, code, ms: Math.round(performance.now() - began) });
  }

  async #once(
    request: HttpRequest,
    auth: Record<string, string>,
    deadline?: Deadline,
  ): Promise<Response> {
    await this.#throttle.wait(request.signal);
    const { method, url, info, verb, resource, headers } = this.#prepare(request, auth);
    const timeoutMs = this.#timeoutMs(request);
    const timeout = deadline
      ? undefined
      : timeoutMs > 0
      ? AbortSignal.timeout(timeoutMs)
      : undefined;
    const connectMs = this.#connectTimeoutMs(request);
    // A timer, not AbortSignal.timeout(): it must stop counting once the headers are here.
    const connecting = connectMs > 0 ? new AbortController() : undefined;
    const connectTimer = connecting &&
      setTimeout(
        () => connecting.abort(new DOMException("Connect timeout", "TimeoutError")),
        connectMs,
      );
    // A dependent signal only when there are several to combine (one per request adds up).
    const signals = deadline
      ? [deadline.signal, connecting?.signal].filter((x) => x !== undefined)
      : [request.signal, timeout, connecting?.signal].filter((x) => x !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    let response: Response;
    const client = this.#clientFor(request);
    const began = performance.now();
    const report = (code: number) =>
      this.#options.onResponse?.({
        method,
        path: info.path,
        code,
        ms: Math.round(performance.now() - began),
      });
    try {
      response = await this.#fetch(url, {
        method,
        headers,
        signal,
        ...(request.body !== undefined ? { body: JSON.stringify(request.body) } : {}),
        ...(client ? { client } : {}),
      });
    } catch (error) {
      this.counters.record({ verb, resource, code: 0 }, (performance.now() - began) / 1000);
      report(0);
      if (request.signal?.aborted) throw request.signal.reason;
      const timedOut = deadline ? deadline.signal.aborted : timeout?.aborted;
      if (connecting?.signal.aborted && !timedOut) {
        throw new TransportError(
          `No response from ${info.server} within the connect timeout of ${connectMs} ms: ${method} ${info.path}`,
          info,
          "timeout",
          error,
        );
      }
      throw transportErrorFrom(error, info, this.connection.source);
    } finally {
      clearTimeout(connectTimer);
    }
    this.counters.record(
      { verb, resource, code: response.status },
      (performance.now() - began) / 1000,
    );
    report(response.status);
    if (response.ok) return response;
    const text = await response.text().catch(() => "");
    throw apiErrorFrom(
      response.status,
      text,
      info,
      parseRetryAfter(response.headers.get("Retry-After")),
    );
  }

  /** The time a request may take: the request's, the client's, else 60 s; 0: no limit. */
  #timeoutMs(request: HttpRequest): number {
    return request.timeoutMs ?? this.#options.timeoutMs ?? 60_000;
  }

  /** The bound until the response headers: the request's, the client's, or for streams Kopf's
   * fallback to the request timeout (a watch has no request timeout of its own). */
  #connectTimeoutMs(request: HttpRequest): number {
    return request.connectTimeoutMs ?? this.#options.connectTimeoutMs ??
      (request.stream ? this.#options.timeoutMs ?? 0 : 0);
  }

  /**
   * Closes the kept-alive connections that wait idle, but the `keep` used last (after a burst).
   * @param keep How many idle connections stay open.
   * @returns How many were closed.
   */
  closeIdle(keep = 0): number {
    return this.#raw?.closeIdle(keep) ?? 0;
  }

  /** Closes the TLS connection pool. */
  [Symbol.dispose](): void {
    this.#deadlines.stop();
    this.#raw?.close();
    this.#raw = undefined;
    this.#tls?.close();
    this.#tls = undefined;
    this.#streams?.close();
    this.#streams = undefined;
  }
}

/** The whole of a (small) body as text, e.g. an error's. */
async function readText(body: ByteStream): Promise<string> {
  const decoder = new TextDecoder();
  let text = "";
  try {
    for (let bytes = await body.read(); bytes; bytes = await body.read()) {
      text += decoder.decode(bytes, { stream: true });
      if (text.length > 1 << 20) break;
    }
  } finally {
    body.close();
  }
  return text + decoder.decode();
}
