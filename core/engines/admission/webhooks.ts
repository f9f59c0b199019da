/**
 * Webhook servers: HTTPS listeners (`serveHttp`, an HTTP/1.1 server with bounded connections,
 * timeouts and request sizes) that route `POST <path>/<handler id>` to the framework's review
 * function and report where Kubernetes reaches them. The K3d and Minikube variants only differ
 * in the host name put into URLs and certificates; the auto server picks one by the cluster's
 * version string and the names of its CA.
 *
 * Certificates: a server given `certfile`/`pkeyfile` uses them; `insecure: true` serves plain
 * HTTP (Kubernetes refuses it; for curl and tunnels); otherwise a self-signed CA and a server
 * certificate are issued at startup by a {@link CertificateIssuer} — the `certificates` option,
 * else the default one, which `kits/certificates.ts` installs when it is loaded (the package's
 * main module loads it). Core code cannot import kits, so the default comes from above.
 *
 * Not supported: client-certificate verification (Deno's server API cannot request client
 * certificates, so `sslpeer` is always `null`), encrypted private keys, ngrok tunnels.
 * @module
 */

import { handleWebhookRequest as handle } from "./webhook_requests.ts";
import { DEFAULT_HTTP_LIMITS, type HttpServerLimits, serveHttp } from "../../util/http_server.ts";
import { certificateNames } from "../../util/x509_names.ts";
import type {
  WebhookClientConfig,
  WebhookFn,
  WebhookServeOptions,
  WebhookServerProtocol,
} from "../../structs/admission.ts";

/** A server certificate with the CA that signed it, all PEM. */
export interface IssuedServerCertificate {
  /** The server certificate (chain). */
  readonly certPem: string;
  /** Its private key (PKCS#8). */
  readonly keyPem: string;
  /** The CA bundle clients must trust (goes into `caBundle`). */
  readonly caPem: string;
}

/**
 * Issues a server certificate for host names and IP addresses (the first non-IP name is the
 * common name, by convention).
 */
export type CertificateIssuer = (hostnames: readonly string[]) => Promise<IssuedServerCertificate>;

const ISSUER_KEY = Symbol.for("kopf.defaultCertificateIssuer");
type WithIssuer = { [ISSUER_KEY]?: CertificateIssuer };

/**
 * Sets the issuer that webhook servers use when they need a self-signed certificate and were
 * given none (`kits/certificates.ts` installs one when loaded).
 *
 * @param issuer The issuer.
 * @example
 * ```ts
 * import { setDefaultCertificateIssuer } from "./webhooks.ts";
 *
 * setDefaultCertificateIssuer(async (hostnames) => {
 *   const pem = await Deno.readTextFile("/etc/webhook/tls.crt");
 *   return { certPem: pem, keyPem: await Deno.readTextFile("/etc/webhook/tls.key"), caPem: pem };
 * });
 * ```
 */
export function setDefaultCertificateIssuer(issuer: CertificateIssuer): void {
  (globalThis as WithIssuer)[ISSUER_KEY] = issuer;
}

/**
 * The issuer installed with {@link setDefaultCertificateIssuer}, if any.
 *
 * @returns The issuer, or `undefined`.
 */
export function getDefaultCertificateIssuer(): CertificateIssuer | undefined {
  return (globalThis as WithIssuer)[ISSUER_KEY];
}

/** Options of {@link WebhookServer}. */
export interface WebhookServerOptions {
  /** Where to listen. @default "0.0.0.0" (all interfaces) */
  readonly addr?: string;
  /** The port; `0` picks a free one. @default 9443 */
  readonly port?: number;
  /** The root path; handler ids follow it. @default "" */
  readonly path?: string;
  /** The host name in URLs and certificates. @default addr, else "localhost" */
  readonly host?: string;
  /** The CA bundle (PEM) reported as `caBundle`, instead of the certificate's own CA. */
  readonly cadata?: string;
  /** A file with the CA bundle reported as `caBundle`. */
  readonly cafile?: string;
  /** Write the CA bundle clients need to this file (e.g. for `curl --cacert`). */
  readonly cadump?: string;
  /** Serve plain HTTP (for curl and tunnels; Kubernetes requires HTTPS). @default false */
  readonly insecure?: boolean;
  /** The server certificate file (PEM). Generated (self-signed) when not given. */
  readonly certfile?: string;
  /** The private key file (PEM, unencrypted). */
  readonly pkeyfile?: string;
  /** More host names / IPs for the generated certificate. @default [] */
  readonly extraSans?: readonly string[];
  /** Issues the self-signed certificate. @default the default issuer */
  readonly certificates?: CertificateIssuer;
  /**
   * The largest request body (an AdmissionReview) in bytes; larger ones get 413, and a larger
   * declared `Content-Length` is refused before anything of the body is read.
   * @default 7340032 (7 MiB, as controller-runtime)
   */
  readonly maxBodyBytes?: number;
  /** The largest request line and headers, in bytes; larger ones get 431. @default 1048576 */
  readonly maxHeaderBytes?: number;
  /**
   * Connections served at once; further ones are closed as soon as accepted (the API server
   * opens one per concurrent admission call over HTTP/1.1).
   * @default 256
   */
  readonly maxConnections?: number;
  /**
   * Bytes of requests in progress held at once, over all connections; a request past it gets
   * 503. Bounds the memory that many connections at `maxBodyBytes` could take.
   * @default 67108864 (64 MiB)
   */
  readonly maxBufferedBytes?: number;
  /**
   * Seconds from a connection's acceptance (the TLS handshake included), or from the first byte
   * of a further request on it, until the end of the request's headers.
   * @default 32 (as controller-runtime)
   */
  readonly headerTimeout?: number;
  /** Seconds from the end of the headers until the end of the body. @default 32 */
  readonly bodyTimeout?: number;
  /** Seconds a kept-alive connection may wait for its next request. @default 90 */
  readonly idleTimeout?: number;
  /** Seconds that writing a response may take. @default 30 */
  readonly writeTimeout?: number;
}

const LIMIT_KEYS = Object.keys(DEFAULT_HTTP_LIMITS) as (keyof HttpServerLimits)[];

/** Options of the servers for local clusters (the host has its own default). */
export type LocalClusterServerOptions = WebhookServerOptions;

const WILDCARD = new Set(["0.0.0.0", "::", "[::]"]);

/**
 * A local HTTPS webhook server: Kubernetes calls `POST <scheme>://<host>:<port><path>/<id>`.
 * Set it as `settings.admission.server` in a startup handler.
 *
 * @example
 * ```ts
 * import { on, WebhookServer } from "../../../mod.ts";
 *
 * on.startup(function configure({ settings }) {
 *   settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 9443 });
 *   settings.admission.managed = "auto.kopf.dev";
 * });
 * ```
 */
export class WebhookServer implements WebhookServerProtocol {
  /** The host used when neither `host` nor `addr` is given. */
  static readonly DEFAULT_HOST: string | undefined = undefined;
  /** The options as given. */
  readonly options: WebhookServerOptions;
  /** The port actually bound, once listening. */
  port: number | undefined;

  /**
   * Creates a server; nothing listens until the operator starts it.
   *
   * @param options Address, port, path, host, certificates.
   */
  constructor(options: WebhookServerOptions = {}) {
    this.options = options;
  }

  /** The host name for URLs and certificates. */
  get host(): string {
    const own = (this.constructor as typeof WebhookServer).DEFAULT_HOST;
    const addr = this.options.addr && !WILDCARD.has(this.options.addr)
      ? this.options.addr
      : undefined;
    return this.options.host ?? own ?? addr ?? "localhost";
  }

  /**
   * Listens until the signal aborts, answering reviews with `fn`; yields the client config once.
   *
   * @param fn The framework's review function.
   * @param options The stop signal.
   * @returns The client config (URL and CA bundle).
   * @throws {Error} when no certificate can be had, or the port cannot be bound.
   */
  async *serve(fn: WebhookFn, options: WebhookServeOptions): AsyncGenerator<WebhookClientConfig> {
    const tls = await this.#tls();
    const root = (this.options.path ?? "").replace(/\/+$/, "");
    const limits: Record<string, number> = {};
    for (const key of LIMIT_KEYS) {
      const value = this.options[key];
      if (value !== undefined) limits[key] = value;
    }
    const server = serveHttp({
      hostname: this.options.addr ?? "0.0.0.0",
      port: this.options.port ?? 9443,
      signal: options.signal,
      ...limits,
      ...(tls ? { cert: tls.certPem, key: tls.keyPem } : {}),
    }, (request) => handle(request, root, fn));
    try {
      this.port = server.addr.port;
      const host = this.host.includes(":") ? `[${this.host}]` : this.host;
      const url = `${tls ? "https" : "http"}://${host}:${this.port}${root}`;
      yield { url, ...(tls?.caPem ? { caBundle: btoa(tls.caPem) } : {}) };
      await server.finished;
    } finally {
      if (!options.signal.aborted) await server.shutdown();
    }
  }

  async #tls(): Promise<{ certPem: string; keyPem: string; caPem?: string } | undefined> {
    const { insecure, certfile, pkeyfile, cafile, cadata, cadump } = this.options;
    if (insecure) return undefined;
    let issued: { certPem: string; keyPem: string; caPem?: string };
    if (certfile || pkeyfile) {
      if (!certfile || !pkeyfile) {
        throw new TypeError("WebhookServer needs both certfile and pkeyfile");
      }
      issued = {
        certPem: await Deno.readTextFile(certfile),
        keyPem: await Deno.readTextFile(pkeyfile),
      };
    } else {
      const issuer = this.options.certificates ?? getDefaultCertificateIssuer();
      if (!issuer) {
        throw new Error(
          "WebhookServer has no certificate: give certfile and pkeyfile, or a `certificates` " +
            "issuer, or import the package's main module (it installs a self-signed issuer)",
        );
      }
      const names = [this.host, this.options.addr, ...(this.options.extraSans ?? [])]
        .filter((n): n is string => Boolean(n) && !WILDCARD.has(n!));
      issued = await issuer([...new Set(names)]);
    }
    const caPem = cadata ?? (cafile ? await Deno.readTextFile(cafile) : issued.caPem);
    if (cadump && caPem) await Deno.writeTextFile(cadump, caPem);
    return { ...issued, ...(caPem ? { caPem } : {}) };
  }
}

/** A server for K3d/K3s clusters on this host: URLs use `host.k3d.internal`. */
export class WebhookK3dServer extends WebhookServer {
  /** The host name K3d resolves to the host machine. */
  static override readonly DEFAULT_HOST: string | undefined = "host.k3d.internal";
}

/** A server for Minikube clusters on this host: URLs use `host.minikube.internal`. */
export class WebhookMinikubeServer extends WebhookServer {
  /** The host name Minikube resolves to the host machine. */
  static override readonly DEFAULT_HOST: string | undefined = "host.minikube.internal";
}

/** A local cluster whose magic host name reaches the host machine. */
export type LocalCluster = "k3s" | "minikube";

/**
 * Tells a K3s/K3d or Minikube cluster from its version and the CA that signs its API server:
 * K3s by a `+k3s` version or a CA named after it (`k3s-server-ca@…`), Minikube by a CA named after
 * it (`minikubeCA`). Kopf reads the names from the API server's own certificate, which Deno does
 * not show; its issuer is this CA, so the CA's names tell the same.
 * @param options The cluster's `gitVersion` and the PEM CA bundle the operator trusts for it.
 * @returns The cluster, or `undefined` when it is neither (or nothing tells).
 * @example
 * ```ts
 * import { detectLocalCluster } from "./webhooks.ts";
 * detectLocalCluster({ gitVersion: "v1.33.3+k3s1" }); // "k3s"
 * detectLocalCluster({ gitVersion: "v1.36.3" }); // undefined
 * ```
 */
export function detectLocalCluster(
  options: Pick<WebhookServeOptions, "gitVersion" | "caPem">,
): LocalCluster | undefined {
  if (options.gitVersion?.includes("+k3s")) return "k3s";
  let names: string[] = [];
  try {
    names = certificateNames(options.caPem ?? "").flatMap((cert) =>
      [...cert.subject, ...cert.issuer].map((a) => a.value.toLowerCase())
    );
  } catch {
    return undefined; // an unreadable CA tells nothing; the plain server still works
  }
  if (names.some((name) => name.includes("k3s"))) return "k3s";
  if (names.some((name) => name.includes("minikube"))) return "minikube";
  return undefined;
}

/**
 * Picks the K3d server for K3s clusters and the Minikube server for Minikube clusters
 * ({@link detectLocalCluster}), else a plain local server. Never tunnels.
 */
export class WebhookAutoServer extends WebhookServer {
  /**
   * Serves as the detected variant would.
   *
   * @param fn The framework's review function.
   * @param options The stop signal and the cluster's version.
   * @returns The client config.
   */
  override async *serve(
    fn: WebhookFn,
    options: WebhookServeOptions,
  ): AsyncGenerator<WebhookClientConfig> {
    const cluster = detectLocalCluster(options);
    const server = cluster === "k3s"
      ? new WebhookK3dServer(this.options)
      : cluster === "minikube"
      ? new WebhookMinikubeServer(this.options)
      : new WebhookServer(this.options);
    for await (const config of server.serve(fn, options)) {
      this.port = server.port;
      yield config;
    }
  }
}
