/**
 * The client facade: one object holding the HTTP funnel, object operations and discovery for
 * one API server, created from a kubeconfig, the in-cluster service account, or explicit
 * connection settings.
 * @module
 */

import { KubeApi } from "./api.ts";
import { autoConfigure } from "./config.ts";
import type { ConnectionInfo } from "./connection.ts";
import type { RequestCounters } from "./counters.ts";
import { Discovery } from "./discovery.ts";
import { HttpClient, type HttpClientOptions } from "./http.ts";

/** Options of {@link KubeClient.connect}. */
export interface ConnectOptions extends HttpClientOptions {
  /** Kubeconfig file(s) to use instead of `KUBECONFIG` / `~/.kube/config`. */
  readonly kubeconfig?: string | readonly string[];
  /** Kubeconfig context to use instead of the current one. */
  readonly context?: string;
}

/** A connection to one Kubernetes API server. Dispose it to close connections. */
export class KubeClient implements Disposable {
  /** The HTTP funnel: retries, rate limit, counters. */
  readonly http: HttpClient;
  /** Object operations: get, list, create, patch, delete, watch. */
  readonly api: KubeApi;
  /** The cached catalogue of resources. */
  readonly discovery: Discovery;

  /**
   * Creates a client for explicit connection settings; see {@link KubeClient.connect} for the
   * usual way (kubeconfig or in-cluster). Nothing is requested until the first call.
   *
   * @param connection Server, TLS material and credentials.
   * @param options Timeouts, retries, rate limit, counters.
   */
  constructor(connection: ConnectionInfo, options: HttpClientOptions = {}) {
    this.http = new HttpClient(connection, options);
    this.api = new KubeApi(this.http);
    this.discovery = new Discovery(this.api);
  }

  /**
   * Connects using an explicit kubeconfig or context; else, inside a running operator (its
   * handlers, daemons, anything it started), that operator's own connection — the cluster it
   * watches, whether it got there by `--embedded`, `--kubeconfig`, `--context` or a login
   * handler; else in-cluster credentials when running in a Pod; else `KUBECONFIG` /
   * `~/.kube/config`. With several operators in one process, a call outside all of them uses
   * the environment. Handlers need not call it: `ctx.client` is their operator's client.
   * Nothing is requested until the first call.
   *
   * @param options Kubeconfig, context, and HTTP options.
   * @returns A client.
   * @throws {ConfigError} when no usable configuration is found, with one line saying why.
   * @example Listing namespaces
   * ```ts ignore
   * using client = await KubeClient.connect();
   * const { items } = await client.api.list({ group: "", version: "v1", plural: "namespaces", namespaced: false });
   * ```
   */
  static async connect(options: ConnectOptions = {}): Promise<KubeClient> {
    const paths = options.kubeconfig === undefined
      ? undefined
      : ([] as string[]).concat(options.kubeconfig);
    const connection = await autoConfigure({
      ...(paths ? { paths } : {}),
      ...(options.context ? { context: options.context } : {}),
    });
    return new KubeClient(connection, options);
  }

  /** Request counts by verb, resource and status code. */
  get counters(): RequestCounters {
    return this.http.counters;
  }

  /** Closes the connection pool. */
  [Symbol.dispose](): void {
    this.http[Symbol.dispose]();
  }
}
