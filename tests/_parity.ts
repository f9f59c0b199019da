/**
 * Scaffolding of the parity tests (tests/parity_*_test.ts), which prove docs/parity.md's rows
 * against the real control plane: {@link FaultProxy}, a proxy that injects API faults in front
 * of it; {@link runOperator}, an operator that connects by a kubeconfig as `kopf run` does; and
 * waits for an object's status, for its removal, or for a promise within a time limit.
 * @module
 */

import type { LogEntry } from "../core/actions/loggers.ts";
import type { KubeClient } from "../core/client/client.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { operator, type OperatorOptions } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { type ClusterAccess, sharedControlPlane } from "../testing/control_plane.ts";
import { eventually, KOPFEXAMPLES, sleep } from "./_support.ts";

/** A reply the proxy sends instead of forwarding, or `undefined` to forward. */
export type Rule = (
  request: Request,
  url: URL,
) => Response | undefined | Promise<Response | undefined>;

/**
 * A plain-HTTP proxy in front of the shared plane (it authenticates as the admin), with rules
 * that answer some requests themselves; it records every request and every watch stream.
 */
export class FaultProxy implements AsyncDisposable {
  /** Every request: method, path, and whether a rule answered it. */
  readonly requests: Array<{ method: string; path: string; faulted: boolean }> = [];
  /** Every watch stream passed through, and whether it is still open. */
  readonly watches: Array<{ path: string; open: boolean; cancel: () => void }> = [];
  /** Consulted in order for each request. */
  readonly rules: Rule[] = [];
  /** A kubeconfig (anonymous user) pointing at the proxy. */
  readonly kubeconfig: string;
  /** The proxy's own address (plain HTTP, no credentials needed). */
  readonly url: string;
  #server: Deno.HttpServer<Deno.NetAddr>;
  #tls: Deno.HttpClient;

  private constructor(plane: ClusterAccess, kubeconfig: string) {
    this.#tls = Deno.createHttpClient({ caCerts: [plane.caPem] });
    this.#server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (request) => this.#handle(request, plane),
    );
    this.url = `http://127.0.0.1:${this.#server.addr.port}`;
    this.kubeconfig = kubeconfig;
  }

  /** Starts a proxy, with no rules yet, and writes its kubeconfig. */
  static async start(): Promise<FaultProxy> {
    const kubeconfig = await Deno.makeTempFile({ prefix: "kopf-proxy-", suffix: ".yaml" });
    const proxy = new FaultProxy(await sharedControlPlane(), kubeconfig);
    await Deno.writeTextFile(
      kubeconfig,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [{ name: "proxy", cluster: { server: proxy.url } }],
        users: [{ name: "anonymous", user: {} }],
        contexts: [{ name: "proxy", context: { cluster: "proxy", user: "anonymous" } }],
        "current-context": "proxy",
      }),
    );
    return proxy;
  }

  /** How many requests match. */
  count(method: string, path: RegExp, faulted?: boolean): number {
    return this.requests.filter((r) =>
      r.method === method && path.test(r.path) && (faulted === undefined || r.faulted === faulted)
    ).length;
  }

  async #handle(request: Request, plane: ClusterAccess): Promise<Response> {
    const url = new URL(request.url);
    const record = { method: request.method, path: url.pathname, faulted: false };
    this.requests.push(record);
    for (const rule of this.rules) {
      const reply = await rule(request, url);
      if (reply) {
        record.faulted = true;
        return reply;
      }
    }
    const headers = Object.fromEntries(request.headers);
    delete headers.host;
    let upstream: Response;
    try {
      upstream = await fetch(`${plane.server}${url.pathname}${url.search}`, {
        method: request.method,
        headers: { ...headers, authorization: `Bearer ${plane.adminToken}` },
        body: request.body,
        client: this.#tls,
      });
    } catch (error) {
      return new Response(String(error), { status: 502 });
    }
    const watching = url.searchParams.get("watch");
    if (!upstream.body || (watching !== "true" && watching !== "1")) {
      return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
    }
    const reader = upstream.body.getReader();
    const entry = {
      path: url.pathname,
      open: true,
      cancel: () => void reader.cancel().catch(() => {}),
    };
    this.watches.push(entry);
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { value, done } = await reader.read();
          if (done) {
            entry.open = false;
            controller.close();
          } else controller.enqueue(value);
        } catch (error) {
          entry.open = false;
          controller.error(error);
        }
      },
      cancel() {
        entry.open = false;
        reader.cancel().catch(() => {});
      },
    });
    return new Response(body, { status: upstream.status, headers: upstream.headers });
  }

  /** Cuts the watch streams, stops the proxy and removes its kubeconfig. */
  async [Symbol.asyncDispose](): Promise<void> {
    for (const watch of this.watches) watch.cancel();
    await Promise.race([this.#server.shutdown(), sleep(5_000)]);
    this.#tls.close();
    await Deno.remove(this.kubeconfig).catch(() => {});
  }
}

/** A JSON Status answer, as the API server would send it. */
export function apiStatus(code: number, message = "injected"): Response {
  return Response.json({ kind: "Status", apiVersion: "v1", code, message }, { status: code });
}

/** An operator run by `operator()` with no client given: it connects as `kopf run` does. */
export interface Running {
  /** Log entries so far. */
  readonly logs: LogEntry[];
  /** Resolves when the operator is ready, or has ended. */
  readonly ready: Promise<void>;
  /** The operator's end (a rejection is kept here, not thrown). */
  readonly done: Promise<unknown>;
  /** Stops it; rejects with the error the operator ended with, if any. */
  stop(): Promise<void>;
}

/**
 * Runs an operator with `registry`'s handlers and no client: it connects by `options.kubeconfig`
 * (or the default), as `kopf run` does, so the settings reach its client. Posting aggregates
 * over 0.2 s unless `options.settings` says otherwise.
 * @param registry The handlers.
 * @param options Namespaces, kubeconfig, settings…; `signal` stops it too.
 * @returns The running operator.
 */
export function runOperator(
  registry: OperatorRegistry,
  options: Partial<OperatorOptions> = {},
): Running {
  const logs: LogEntry[] = [];
  const controller = new AbortController();
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const running = operator({
    standalone: true,
    settings: createSettings({ posting: { aggregationWindow: 0.2 } }),
    ...options,
    registry,
    listeners: [(entry) => logs.push(entry)],
    signal: options.signal
      ? AbortSignal.any([options.signal, controller.signal])
      : controller.signal,
    onReady: markReady,
  });
  const done = running.then(() => undefined, (error: unknown) => error);
  done.then(() => markReady());
  return {
    logs,
    ready,
    done,
    stop: async () => {
      controller.abort();
      const error = await done;
      if (error) throw error;
    },
  };
}

/** `status.<field>` of an object, read directly from the API server. */
export async function statusOf(
  client: KubeClient,
  name: string,
  namespace: string,
): Promise<Record<string, unknown>> {
  const body = await client.api.get<KubeObject>(KOPFEXAMPLES, name, { namespace });
  return (body.status ?? {}) as Record<string, unknown>;
}

/** Resolves with `promise`, or fails after `ms` saying what did not happen. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      promise,
      sleep(ms, timer.signal).then(() => {
        throw new Error(`Timed out after ${ms} ms: ${what}`);
      }),
    ]);
  } finally {
    timer.abort();
  }
}

/** Waits until an object is gone from the API server. */
export async function gone(
  client: KubeClient,
  resource: Resource,
  name: string,
  namespace: string,
  timeoutMs = 15_000,
): Promise<void> {
  await eventually(
    async () => {
      try {
        await client.api.get(resource, name, { namespace });
        return false;
      } catch {
        return true;
      }
    },
    timeoutMs,
    `${name} to be gone`,
  );
}

/** A promise with its resolver, for handlers that wait for the test. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
