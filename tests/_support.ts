/**
 * Shared helpers for integration tests: the run's control plane, a client for it, a fresh
 * namespace per test, CRD installation, and network fault tools (a pausable TCP proxy and an
 * HTTP fault injector placed in front of the real API server).
 * @module
 */

import { parseAllDocuments, stringify } from "yaml";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import { ApiError } from "../core/client/errors.ts";
import type { HttpClientOptions } from "../core/client/http.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { sleep } from "../core/util/backoff.ts";
import { createTestNamespace, sharedControlPlane } from "../testing/control_plane.ts";

export { sleep };

/** Core v1 resources used by tests. */
export const NAMESPACES: Resource = core("namespaces", "Namespace", false);
export const CONFIGMAPS: Resource = core("configmaps", "ConfigMap", true);
export const PODTEMPLATES: Resource = core("podtemplates", "PodTemplate", true);
export const SERVICEACCOUNTS: Resource = core("serviceaccounts", "ServiceAccount", true);

/** The example resource from crds/example.yaml. */
export const KOPFEXAMPLES: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  namespaced: true,
  verbs: [],
  shortNames: ["kopfexes", "kopfex", "kexes", "kex"],
  categories: [],
  subresources: [],
  preferred: true,
};

/** Kopf's default finalizer. */
export const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

/** Kopf's default diff-base annotation (the last handled essence). */
export const LAST_HANDLED = "kopf.zalando.org/last-handled-configuration";

/** A KopfExample object (crds/example.yaml) with the given spec and labels. */
export function kex(
  name: string,
  spec: Record<string, unknown> = {},
  labels?: Record<string, string>,
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: labels ? { name, labels } : { name },
    spec,
  };
}

function core(plural: string, kind: string, namespaced: boolean): Resource {
  return {
    group: "",
    version: "v1",
    plural,
    kind,
    singular: kind.toLowerCase(),
    namespaced,
    verbs: [],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
  };
}

/** The kubeconfig path of this run's shared control plane. */
export async function kubeconfigPath(): Promise<string> {
  return (await sharedControlPlane()).kubeconfigPath;
}

/** A new client for the shared control plane, with its own counters. */
export async function testClient(options: HttpClientOptions = {}): Promise<KubeClient> {
  const connection = await loadKubeconfig({ paths: [await kubeconfigPath()] });
  return new KubeClient(connection, options);
}

/** A fresh namespace for one test. */
export async function testNamespace(prefix = "t"): Promise<string> {
  return await createTestNamespace(await sharedControlPlane(), prefix);
}

/** Waits until `probe` returns a truthy value, polling; fails after `timeoutMs`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = 30_000,
  what = "condition",
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`Timed out waiting for ${what}${last ? `: ${last}` : ""}`);
    }
    await sleep(100);
  }
}

/** Creates (or keeps) the CRDs from a YAML file and waits until they are Established. */
export async function applyCrds(client: KubeClient, path: string): Promise<void> {
  const docs = parseAllDocuments(await Deno.readTextFile(path)).map((d) => d.toJS() as KubeObject);
  await applyCrdObjects(client, docs);
}

/** {@link applyCrds} with a client of its own, closed after. */
export async function applyCrdsFile(path: string): Promise<void> {
  const client = await testClient();
  try {
    await applyCrds(client, path);
  } finally {
    client[Symbol.dispose]();
  }
}

/** Creates (or keeps) CRD objects and waits until they are Established and discoverable. */
export async function applyCrdObjects(client: KubeClient, crds: KubeObject[]): Promise<void> {
  for (const crd of crds) {
    try {
      await client.api.create(CRD_RESOURCE, crd);
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409)) throw error;
    }
  }
  for (const crd of crds) {
    const name = crd.metadata!.name!;
    await eventually(
      async () => {
        const live = await client.api.get(CRD_RESOURCE, name);
        const conditions =
          ((live.status as { conditions?: Array<{ type: string; status: string }> })?.conditions) ??
            [];
        return conditions.some((c) => c.type === "Established" && c.status === "True");
      },
      30_000,
      `CRD ${name} to be Established`,
    );
  }
}

/** A temporary directory, removed with its contents on disposal. */
export interface TempDir extends AsyncDisposable {
  /** The directory's path. */
  readonly path: string;
}

/**
 * A fresh temporary directory for one test, removed with everything in it when disposed:
 * `await using dir = await tempDir("kopf-");` then `dir.path`. The removal is best-effort (a
 * process that still writes there must not turn a passing test into a failing one, nor hide
 * a failing test's own error).
 * @param prefix The directory name's prefix.
 * @returns The directory.
 */
export async function tempDir(prefix?: string): Promise<TempDir> {
  const path = await Deno.makeTempDir(prefix === undefined ? {} : { prefix });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true }).catch(() => {});
    },
  };
}

/**
 * A TCP proxy on 127.0.0.1 that can stop forwarding without closing connections, to simulate
 * a half-dead network path (the classic silent watch stall).
 */
export class PausableTcpProxy implements AsyncDisposable {
  readonly port: number;
  /** Connections accepted so far. */
  accepted = 0;
  #listener: Deno.TcpListener;
  #conns = new Set<Deno.Conn>();
  #paused = false;
  #resume: Array<() => void> = [];
  #target: { hostname: string; port: number };
  #accepting: Promise<void>;

  /**
   * A proxy in front of the API server that a client talks to.
   * @param client The client.
   * @returns The proxy.
   */
  static inFrontOf(client: KubeClient): PausableTcpProxy {
    const server = new URL(client.http.connection.server);
    return new PausableTcpProxy({ hostname: server.hostname, port: Number(server.port) });
  }

  /**
   * A client like `like` (same credentials and TLS), talking through this proxy.
   * @param like The client to copy.
   * @param options The new client's options.
   * @returns The client.
   */
  client(like: KubeClient, options: HttpClientOptions = {}): KubeClient {
    return new KubeClient(
      { ...like.http.connection, server: `https://127.0.0.1:${this.port}` },
      options,
    );
  }

  constructor(target: { hostname: string; port: number }) {
    this.#target = target;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  /** Stops forwarding bytes (connections stay open and silent). */
  pause(): void {
    this.#paused = true;
  }

  /** Resumes forwarding. */
  resume(): void {
    this.#paused = false;
    for (const wake of this.#resume.splice(0)) wake();
  }

  /** Closes every open connection (clients see a network error). */
  dropAll(): void {
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
    this.#conns.clear();
  }

  async #accept(): Promise<void> {
    for await (const inbound of this.#listener) {
      this.accepted++;
      this.#conns.add(inbound);
      Deno.connect(this.#target).then((outbound) => {
        this.#conns.add(outbound);
        this.#pipe(inbound, outbound);
        this.#pipe(outbound, inbound);
      }).catch(() => inbound.close());
    }
  }

  async #pipe(from: Deno.Conn, to: Deno.Conn): Promise<void> {
    const buffer = new Uint8Array(64 * 1024);
    try {
      for (;;) {
        const n = await from.read(buffer);
        if (n === null) break;
        while (this.#paused) await new Promise<void>((resolve) => this.#resume.push(resolve));
        let written = 0;
        while (written < n) written += await to.write(buffer.subarray(written, n));
      }
    } catch {
      // A side closed: close both.
    }
    for (const conn of [from, to]) {
      try {
        conn.close();
      } catch { /* already closed */ }
      this.#conns.delete(conn);
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.resume();
    this.#listener.close();
    for (const conn of this.#conns) {
      try {
        conn.close();
      } catch { /* already closed */ }
    }
    await this.#accepting.catch(() => {});
  }
}

/**
 * Captures a child process's stdout and stderr as lines.
 * @param child A process spawned with both streams piped.
 * @returns The growing list of lines and the exit code (resolved after all output was read).
 */
export function captureLines(
  child: Deno.ChildProcess,
): { lines: string[]; exited: Promise<number> } {
  const lines: string[] = [];
  const pump = async (stream: ReadableStream<Uint8Array>) => {
    let buffer = "";
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      const parts = buffer.split("\n");
      buffer = parts.pop()!;
      lines.push(...parts);
    }
    if (buffer) lines.push(buffer);
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  const exited = child.status.then(async (s) => {
    await pumps;
    return s.code;
  });
  return { lines, exited };
}

/**
 * The lines of an operator's log that show a permission problem: an HTTP 403, the API server's
 * "… is forbidden", the framework's "Permission missing". The timestamp in brackets at a line's
 * start is left out (its milliseconds can read 403), and so are numbers quoted, in a path or
 * after a colon (`"resourceVersion":"403"`, a stack frame's `processing.ts:403:11`): those are
 * not status codes (a refused request's JSON body says "Forbidden" as well).
 */
export function permissionErrors(lines: readonly string[]): string[] {
  return lines.filter((line) =>
    /(?<!["/:])\b403\b(?!["/:])|forbidden|Permission missing/i.test(
      line.replace(/^\[[^\]]*\]/, ""),
    )
  );
}

/**
 * Stops a spawned process: SIGTERM, then SIGKILL if it has not exited after `graceMs`.
 * @param child The process.
 * @param exited Its exit code, resolved once its output was read (see {@link captureLines}).
 * @param graceMs How long SIGTERM may take.
 * @returns The exit code.
 */
export async function terminate(
  child: Deno.ChildProcess,
  exited: Promise<number>,
  graceMs = 15_000,
): Promise<number> {
  try {
    child.kill("SIGTERM");
  } catch { /* already exited */ }
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
  }, graceMs);
  try {
    return await exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Kopf's example CRD with the status subresource, under its own names (tests/fixtures/status-crd.yaml). */
export const STATUS_EXAMPLES: Resource = {
  ...KOPFEXAMPLES,
  plural: "kopfstatusexamples",
  singular: "kopfstatusexample",
  kind: "KopfStatusExample",
  shortNames: [],
  subresources: ["status"],
};

/** The file of {@link STATUS_EXAMPLES}' CRD, for {@link applyCrds}. */
export const STATUS_CRD = "tests/fixtures/status-crd.yaml";

/**
 * A kubeconfig (0600) in `dir` for the shared plane with the given user entry, e.g. an exec
 * plugin or a client certificate; `server` and `ca` replace the plane's.
 */
export async function kubeconfigWith(
  dir: string,
  user: Record<string, unknown>,
  server?: string,
  ca?: string,
): Promise<string> {
  const plane = await sharedControlPlane();
  const path = `${dir}/kubeconfig`;
  await Deno.writeTextFile(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: "c",
        cluster: {
          server: server ?? plane.server,
          "certificate-authority-data": btoa(ca ?? plane.caPem),
        },
      }],
      users: [{ name: "u", user }],
      contexts: [{ name: "ctx", context: { cluster: "c", user: "u", namespace: "default" } }],
      "current-context": "ctx",
    }),
    { mode: 0o600 },
  );
  return path;
}
