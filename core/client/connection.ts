/**
 * What the client needs to reach and authenticate to one API server.
 *
 * Produced by `config.ts` (kubeconfig, in-cluster) and later by login handlers (`on.login`);
 * consumed only by `http.ts`. Credentials are an interface, not data, so that exec plugins,
 * rotating token files and custom login handlers can refresh them after a 401 (the seam for
 * Kopf's login handlers).
 * @module
 */

/** A source of authentication headers that can be refreshed after a 401. */
export interface Credentials {
  /**
   * Headers to add to each request, e.g. `{ Authorization: "Bearer …" }`.
   * May read a token file or run an exec plugin; implementations cache until expiry.
   *
   * @param signal Stops waiting (e.g. for an exec plugin).
   * @returns The headers.
   */
  headers(signal?: AbortSignal): Promise<Record<string, string>>;
  /**
   * Called after the server answered 401 Unauthorized. Drops cached material so the next
   * `headers()` re-reads or re-executes.
   *
   * @param rejected The headers the rejected request carried (as `headers()` returned them), so
   *   that a source of several credentials knows which one failed.
   * @returns `true` when a retry may succeed (something could be refreshed), `false` when
   *   retrying is pointless.
   */
  invalidate(rejected?: Readonly<Record<string, string>>): Promise<boolean>;
}

/** Everything needed to open connections to one API server. */
export interface ConnectionInfo {
  /** Base URL such as `https://127.0.0.1:6443`, without a trailing slash. */
  readonly server: string;
  /** PEM text of the CA bundle that signs the server's certificate. */
  readonly caPem?: string;
  /** Skip verification of the server's certificate (kubeconfig `insecure-skip-tls-verify`). */
  readonly insecureSkipTlsVerify?: boolean;
  /** PEM client certificate for mutual TLS. */
  readonly clientCertPem?: string;
  /** PEM private key for `clientCertPem`. */
  readonly clientKeyPem?: string;
  /** Default namespace (from the kubeconfig context or the service account). */
  readonly namespace?: string;
  /** Authentication headers; `NO_CREDENTIALS` when TLS client certificates suffice. */
  readonly credentials: Credentials;
  /** Where this came from, for error messages: e.g. `kubeconfig ~/.kube/config, context "kind"`. */
  readonly source: string;
  /**
   * When these credentials stop being valid (from a login handler): after this time they are
   * dropped, and when none are left the operator logs in again before the next request. A `Date`, or an ISO 8601 string; a string without
   * a time zone (`2099-12-31T23:59:59`) is UTC, as in Kopf. @default never
   */
  readonly expiration?: Date | string;
  /**
   * When several login handlers return credentials, the highest priority is used first (at
   * random among equals); lower ones only after those were rejected or expired. @default 0
   */
  readonly priority?: number;
}

/**
 * The moment an expiration means, in milliseconds since the epoch.
 *
 * @param expiration A `Date`, or an ISO 8601 string; without a time zone, it is UTC.
 * @returns The time, or `undefined` when there is no expiration.
 * @throws {TypeError} for a string that is not a date.
 */
export function expirationTime(expiration: Date | string | undefined): number | undefined {
  if (expiration === undefined) return undefined;
  if (expiration instanceof Date) return expiration.getTime();
  const text = expiration.trim();
  // JavaScript reads a date-time without a zone as local time; Kopf reads it as UTC.
  const naive = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?$/.test(text);
  const time = Date.parse(naive ? `${text.replace(" ", "T")}Z` : text);
  if (Number.isNaN(time)) throw new TypeError(`Not a date-time for an expiration: '${expiration}'`);
  return time;
}

/** Credentials that add no headers (anonymous, or client certificates only). */
export const NO_CREDENTIALS: Credentials = {
  headers: () => Promise.resolve({}),
  invalidate: () => Promise.resolve(false),
};
