/**
 * An in-memory Kubernetes API emulator served over real HTTP(S) on 127.0.0.1, so that
 * fetch-based clients, `kubectl` and operators talk to it unchanged — for tests and for trying
 * operators without a cluster.
 *
 * It serves discovery, built-in core resources (namespaces, configmaps, secrets, pods,
 * services, serviceaccounts, events, podtemplates), apps/v1 deployments (without a controller),
 * CustomResourceDefinitions (Established shortly after creation) and their custom resources;
 * get/list (pagination, label and field selectors)/watch (resume, bookmarks, 410 Gone after
 * compaction)/create/update/patch (merge, JSON, simplified strategic)/delete, `/status`
 * subresource rules, `metadata.generation`, resourceVersion conflicts, finalizers, owner
 * garbage collection and namespace deletion. It records a history of requests and of object
 * versions and can inject faults. The differences from a real API server are listed in
 * `docs/emulator.md`.
 *
 * @example
 * ```ts
 * import { Emulator } from "./mod.ts";
 *
 * await using emulator = await Emulator.start();
 * await emulator.applyYaml(await Deno.readTextFile("crds/example.yaml"));
 * // kubectl --kubeconfig "$path" get kopfexamples
 * console.log(emulator.kubeconfigPath);
 * ```
 * @module
 */

import { parseAllDocuments, stringify } from "yaml";
import { Cluster } from "./cluster.ts";
import { reconcile } from "./controllers.ts";
import { Faults } from "./faults.ts";
import { History } from "./history.ts";
import { Front } from "./proxy.ts";
import { CRDS } from "./registry.ts";
import { createHandler } from "./router.ts";
import { createServingCertificate } from "./tls.ts";
import { isObject, type KubeObject, resourceKey } from "./types.ts";

export { ApiFailure } from "./errors.ts";
export type { StatusCause, StatusDetails } from "./errors.ts";
export { Faults } from "./faults.ts";
export type { Fault, FaultAction, FaultMatch, FaultOptions, RequestInfo } from "./faults.ts";
export { History } from "./history.ts";
export type { RequestFilter, RequestRecord } from "./history.ts";
export type { ChangeType, ObjectVersion } from "./storage.ts";
export type { KubeObject, ObjectMeta, OwnerReference } from "./types.ts";

/** Options of {@link Emulator.start}. */
export interface EmulatorOptions {
  /** Serve HTTPS with a fresh self-signed CA (`caPem`); `false` serves plain HTTP. @default true */
  readonly tls?: boolean;
  /** Port on 127.0.0.1. @default a free port */
  readonly port?: number;
  /**
   * How many recent changes are kept for watch resumption and consistent pagination; older
   * resourceVersions get 410 Gone. See also {@link Emulator.compact}. @default 10000
   */
  readonly compactionWindow?: number;
  /** Interval of periodic BOOKMARK events on watches that allow them. @default 60000 */
  readonly bookmarkIntervalMs?: number;
  /** The bearer token to accept. @default a random one */
  readonly token?: string;
}

/** A running emulator. Start it with {@link Emulator.start}; stop it with `stop()` or `await using`. */
export class Emulator implements AsyncDisposable {
  /** Base URL, e.g. `https://127.0.0.1:41234`. */
  readonly server: string;
  /** PEM of the CA that signed the serving certificate (`""` without TLS). */
  readonly caPem: string;
  /** The bearer token the emulator accepts (others get 401). */
  readonly token: string;
  /** A kubeconfig (in a temporary directory, removed on stop) for kubectl and clients. */
  readonly kubeconfigPath: string;
  /** Requests answered and object versions stored. */
  readonly history: History;
  /** Fault injection. */
  readonly faults: Faults;
  #cluster: Cluster;
  #http: Deno.HttpServer;
  #front: Front;
  #dir: string;
  #stopped: Promise<void> | undefined;

  private constructor(init: {
    server: string;
    caPem: string;
    token: string;
    kubeconfigPath: string;
    dir: string;
    cluster: Cluster;
    http: Deno.HttpServer;
    front: Front;
    faults: Faults;
    history: History;
  }) {
    this.server = init.server;
    this.caPem = init.caPem;
    this.token = init.token;
    this.kubeconfigPath = init.kubeconfigPath;
    this.#dir = init.dir;
    this.#cluster = init.cluster;
    this.#http = init.http;
    this.#front = init.front;
    this.faults = init.faults;
    this.history = init.history;
  }

  /**
   * Starts an emulator with the namespaces `default`, `kube-system`, `kube-public` and
   * `kube-node-lease`, and writes its kubeconfig.
   *
   * @param options TLS, port, compaction window, bookmark interval, token.
   * @returns The running emulator.
   */
  static async start(options: EmulatorOptions = {}): Promise<Emulator> {
    const tls = options.tls ?? true;
    const token = options.token ?? Array.from(
      crypto.getRandomValues(new Uint8Array(24)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    const material = tls ? await createServingCertificate() : undefined;
    const cluster = new Cluster(reconcile, {
      compactionWindow: options.compactionWindow,
      caPem: material?.caPem,
    });
    const history = new History(cluster.store);
    const ports: { front?: Front } = {};
    const faults = new Faults(() => ports.front?.dropAll());
    const handler = createHandler({
      cluster,
      token,
      faults,
      history,
      bookmarkIntervalMs: options.bookmarkIntervalMs ?? 60_000,
      serverAddress: () => `127.0.0.1:${ports.front?.port ?? 0}`,
      dropConnection: (port) => ports.front?.drop(port),
    });
    const http = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, handler);
    const front = ports.front = new Front(
      http.addr.port,
      options.port ?? 0,
      material ? { cert: material.certPem, key: material.keyPem } : undefined,
    );
    const server = `${tls ? "https" : "http"}://127.0.0.1:${front.port}`;
    // The kubeconfig holds the token: private to this user (a 0700 directory, a 0600 file),
    // whatever the umask, as kubectl and ssh expect of credentials.
    const dir = await Deno.makeTempDir({ prefix: "kopf-emulator-" });
    await Deno.chmod(dir, 0o700);
    const kubeconfigPath = `${dir}/kubeconfig`;
    await Deno.writeTextFile(kubeconfigPath, kubeconfig(server, token, material?.caPem), {
      mode: 0o600,
    });
    await Deno.chmod(kubeconfigPath, 0o600);
    return new Emulator({
      server,
      caPem: material?.caPem ?? "",
      token,
      kubeconfigPath,
      dir,
      cluster,
      http,
      front,
      faults,
      history,
    });
  }

  /** The same as {@link token}, named as in `ClusterAccess` of `testing/control_plane.ts`. */
  get adminToken(): string {
    return this.token;
  }

  /** The latest resourceVersion (the global write counter). */
  get resourceVersion(): string {
    return String(this.#cluster.store.resourceVersion);
  }

  /**
   * Creates or updates (merge patch) every object of a multi-document YAML text — CRDs, their
   * custom resources, anything served — in order; waits for CRDs to become Established before
   * the next document. Namespaced objects without a namespace go to `default`.
   *
   * @param text YAML documents (a `kind: List` document applies its `items`).
   * @returns The stored objects.
   * @throws {ApiFailure} as the API would answer, or an `Error` for unknown kinds.
   */
  async applyYaml(text: string): Promise<KubeObject[]> {
    const docs: KubeObject[] = [];
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length) throw new Error(`Invalid YAML: ${doc.errors[0]!.message}`);
      const value = doc.toJS() as unknown;
      if (!isObject(value)) continue;
      if (value.kind === "List" && Array.isArray(value.items)) {
        docs.push(...value.items.filter(isObject) as KubeObject[]);
      } else {
        docs.push(value as KubeObject);
      }
    }
    const applied: KubeObject[] = [];
    for (const doc of docs) applied.push(await this.apply(doc));
    return applied;
  }

  /**
   * Creates an object, or merge-patches it if it exists (see {@link applyYaml}).
   *
   * @param object The object, with `apiVersion`, `kind` and `metadata.name`.
   * @returns The stored object.
   */
  async apply(object: KubeObject): Promise<KubeObject> {
    const cluster = this.#cluster;
    await cluster.settled();
    const apiVersion = String(object.apiVersion ?? "");
    const def = cluster.registry.byKind(apiVersion, String(object.kind ?? ""));
    if (!def) throw new Error(`No resource serves ${apiVersion} ${object.kind}`);
    const version = apiVersion.split("/").at(-1)!;
    const namespace = def.namespaced ? object.metadata?.namespace ?? "default" : "";
    const name = object.metadata?.name;
    const exists = name && cluster.store.get(resourceKey(def), namespace, name);
    const stored = exists
      ? cluster.patch(def, namespace, name, "merge", object, undefined, version)
      : cluster.create(def, namespace, object, version);
    if (def === CRDS) await cluster.settled();
    return cluster.present(def, stored, version);
  }

  /** Forgets the change history up to now: watches and continue tokens from before get 410. */
  compact(): void {
    this.#cluster.store.compact();
  }

  /** Resolves when the background controllers (CRDs, GC, namespaces) are idle. */
  settled(): Promise<void> {
    return this.#cluster.settled();
  }

  /** Stops serving: drops all connections, stops the controllers, removes the kubeconfig. */
  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.faults.clear();
      this.#cluster.stop();
      await this.#front.close();
      await this.#http.shutdown();
      await Deno.remove(this.#dir, { recursive: true }).catch(() => {});
    })();
    return this.#stopped;
  }

  /** Same as {@link stop}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }
}

function kubeconfig(server: string, token: string, caPem: string | undefined): string {
  const ca = caPem ? btoa(caPem) : undefined;
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{
      name: "kopf-emulator",
      cluster: { server, ...(ca ? { "certificate-authority-data": ca } : {}) },
    }],
    users: [{ name: "kopf-emulator", user: { token } }],
    contexts: [{
      name: "kopf-emulator",
      context: { cluster: "kopf-emulator", user: "kopf-emulator", namespace: "default" },
    }],
    "current-context": "kopf-emulator",
  });
}
