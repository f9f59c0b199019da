/**
 * Typed errors for everything the client can fail at: API answers (by status code), transport
 * failures (connection, TLS, timeouts) and the decision whether a failure is worth retrying.
 *
 * Retry decisions go by type and status code, never by message text.
 * @module
 */

/** What the client was doing when it failed; included in messages. */
export interface RequestInfo {
  /** HTTP method. */
  readonly method: string;
  /** URL path with query, without the server part. */
  readonly path: string;
  /** Base URL of the server. */
  readonly server: string;
}

/** The `details` of a Kubernetes `Status` object. */
export interface StatusDetails {
  /** Name of the object concerned. */
  readonly name?: string;
  /** API group of the object concerned. */
  readonly group?: string;
  /** Kind (or plural) of the object concerned. */
  readonly kind?: string;
  /** UID of the object concerned. */
  readonly uid?: string;
  /** Per-field causes, e.g. of validation errors. */
  readonly causes?: ReadonlyArray<{ reason?: string; message?: string; field?: string }>;
  /** Seconds the server suggests to wait before retrying. */
  readonly retryAfterSeconds?: number;
}

/** A failed answer from the API server: a non-2xx status, usually with a `Status` body. */
export class ApiError extends Error {
  /** HTTP status code, e.g. 404. */
  readonly code: number;
  /** Kubernetes reason, e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Forbidden`. */
  readonly reason: string;
  /** The server's message (without our decorations). */
  readonly serverMessage: string;
  /** Structured details from the `Status` body. */
  readonly details: StatusDetails | undefined;
  /** The request that failed. */
  readonly request: RequestInfo;
  /** Milliseconds to wait before a retry, from `Retry-After` or `details.retryAfterSeconds`. */
  readonly retryAfterMs: number | undefined;

  /**
   * Creates the error; the client builds these from answers with `apiErrorFrom()`.
   *
   * @param init The parts of the failed answer.
   */
  constructor(init: {
    code: number;
    reason: string;
    message: string;
    details?: StatusDetails | undefined;
    request: RequestInfo;
    retryAfterMs?: number | undefined;
  }) {
    const what = `${init.request.method} ${init.request.path}`;
    super(`${init.reason} (${init.code}): ${init.message || "no message"} [${what}]`);
    this.name = "ApiError";
    this.code = init.code;
    this.reason = init.reason;
    this.serverMessage = init.message;
    this.details = init.details;
    this.request = init.request;
    this.retryAfterMs = init.retryAfterMs;
  }
}

/** A failure to talk to the server at all: refused, reset, DNS, TLS, or a timeout. */
export class TransportError extends Error {
  /** The request that failed. */
  readonly request: RequestInfo;
  /** `tls` when the server's certificate was not trusted (never retried), else `network`/`timeout`. */
  readonly kind: "network" | "tls" | "timeout";

  /**
   * Creates the error; the client builds these with `transportErrorFrom()`.
   *
   * @param message A one-line explanation with a hint at what to check.
   * @param request The request that failed.
   * @param kind Category of the failure.
   * @param cause The underlying error.
   */
  constructor(
    message: string,
    request: RequestInfo,
    kind: "network" | "tls" | "timeout",
    cause?: unknown,
  ) {
    super(message, { cause });
    this.name = "TransportError";
    this.request = request;
    this.kind = kind;
  }
}

const REASONS: Readonly<Record<number, string>> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  409: "Conflict",
  410: "Gone",
  415: "UnsupportedMediaType",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/**
 * Builds an {@link ApiError} from a failed answer's status code and body text.
 *
 * @param code HTTP status code.
 * @param bodyText The response body (a `Status` JSON object or anything else).
 * @param request The request that failed.
 * @param retryAfterMs Parsed `Retry-After`, if any.
 * @returns The error to throw.
 */
export function apiErrorFrom(
  code: number,
  bodyText: string,
  request: RequestInfo,
  retryAfterMs?: number,
): ApiError {
  let reason = REASONS[code] ?? (code >= 500 ? "InternalError" : "Unknown");
  let message = bodyText.trim().split("\n")[0]?.slice(0, 500) ?? "";
  let details: StatusDetails | undefined;
  try {
    const status = JSON.parse(bodyText) as Record<string, unknown>;
    if (status && status.kind === "Status") {
      if (typeof status.reason === "string" && status.reason) reason = status.reason;
      if (typeof status.message === "string") message = status.message;
      if (status.details && typeof status.details === "object") {
        details = status.details as StatusDetails;
      }
    }
  } catch {
    // Not JSON (e.g. a proxy's HTML page): the first line of the text is the message.
  }
  const fromDetails = details?.retryAfterSeconds ? details.retryAfterSeconds * 1000 : undefined;
  return new ApiError({
    code,
    reason,
    message,
    details,
    request,
    retryAfterMs: retryAfterMs ?? fromDetails,
  });
}

/**
 * Builds a {@link TransportError} with a readable message from whatever `fetch` threw.
 *
 * @param error What `fetch` or the body stream threw.
 * @param request The request that failed.
 * @param source Where the connection settings came from, to point the user at them.
 * @returns The error to throw.
 */
export function transportErrorFrom(
  error: unknown,
  request: RequestInfo,
  source: string,
): TransportError {
  const text = error instanceof Error
    ? `${error.message} ${String(error.cause ?? "")}`
    : String(error);
  // A connection cut in the middle (a server killed or restarted) also names TLS ("peer closed
  // connection without sending TLS close_notify"): that is a network failure, retried like any.
  const cut = /close_notify|unexpected eof|connection reset|broken pipe/i.test(text);
  if (!cut && /certificate|UnknownIssuer|tls|handshake|x509/i.test(text)) {
    return new TransportError(
      `Cannot verify the TLS certificate of ${request.server}: ${
        firstLine(text)
      }; check the CA in ${source}`,
      request,
      "tls",
      error,
    );
  }
  if (error instanceof DOMException && (error.name === "TimeoutError")) {
    return new TransportError(
      `Request timed out: ${request.method} ${request.server}${request.path}`,
      request,
      "timeout",
      error,
    );
  }
  return new TransportError(
    `Cannot reach the API server at ${request.server}: ${
      firstLine(text)
    }; is the cluster running and is ${source} right?`,
    request,
    "network",
    error,
  );
}

function firstLine(text: string): string {
  return (text.trim().split("\n")[0] ?? "").replace(/^(TypeError|Error):\s*/, "").slice(0, 300);
}

/**
 * Whether a failure may succeed when simply retried: transport failures (except TLS trust),
 * 429 and 5xx. Other 4xx answers never change by retrying the same request.
 *
 * @param error Any thrown value.
 * @returns `true` when a retry with backoff makes sense.
 */
export function isRetryable(error: unknown): boolean {
  if (error instanceof TransportError) return error.kind !== "tls";
  if (error instanceof ApiError) return error.code === 429 || error.code >= 500;
  return false;
}
