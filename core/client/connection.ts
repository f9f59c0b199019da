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
   * @returns `true` when a retry may succeed (something could be refreshed), `false` when
   *   retrying is pointless.
   */
  invalidate(): Promise<boolean>;
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
}

/** Credentials that add no headers (anonymous, or client certificates only). */
export const NO_CREDENTIALS: Credentials = {
  headers: () => Promise.resolve({}),
  invalidate: () => Promise.resolve(false),
};
