/**
 * The harness's own API access (User-Agent `kopf-bench-driver`, so that the audit log tells it
 * apart from the contenders): creating, changing and deleting the benchmark objects, and an
 * {@link Observer} that watches a namespace and timestamps what the operators did.
 * @module
 */
import type { ClusterAccess } from "../../testing/control_plane.ts";

export const DRIVER_USER_AGENT = "kopf-bench-driver";
const GROUP_VERSION = "kopf.dev/v1";

/** The custom resource the harness works on (one per CRD variant). */
export interface BenchResource {
  readonly plural: string;
  readonly kind: string;
}

/** `crds/example.yaml`: no status subresource. */
export const KOPFEXAMPLES: BenchResource = { plural: "kopfexamples", kind: "KopfExample" };

/** A benchmark object as far as the harness reads it. */
export interface BenchObject {
  metadata: {
    name: string;
    resourceVersion: string;
    deletionTimestamp?: string;
    finalizers?: string[];
  };
  spec?: Record<string, unknown>;
  status?: {
    create_fn?: { message?: string; started?: number };
    update_fn?: { value?: unknown; started?: number };
  };
}

/** The harness's HTTP access to the API server. */
export class Api implements Disposable {
  readonly access: ClusterAccess;
  readonly resource: BenchResource;
  readonly #client: Deno.HttpClient;

  constructor(access: ClusterAccess, resource: BenchResource = KOPFEXAMPLES) {
    this.access = access;
    this.resource = resource;
    this.#client = Deno.createHttpClient({ caCerts: [access.caPem] });
  }

  /** Sends a request; returns the status and the parsed JSON body (if any). */
  async request(
    method: string,
    path: string,
    body?: unknown,
    options: { contentType?: string; timeoutMs?: number } = {},
  ): Promise<{ status: number; body: unknown }> {
    const response = await fetch(`${this.access.server}${path}`, {
      method,
      client: this.#client,
      signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
      headers: {
        authorization: `Bearer ${this.access.adminToken}`,
        "user-agent": DRIVER_USER_AGENT,
        accept: "application/json",
        ...(body === undefined
          ? {}
          : { "content-type": options.contentType ?? "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON
    }
    return { status: response.status, body: parsed };
  }

  /** A raw streaming request (for watches). */
  stream(path: string, signal: AbortSignal): Promise<Response> {
    return fetch(`${this.access.server}${path}`, {
      client: this.#client,
      signal,
      headers: {
        authorization: `Bearer ${this.access.adminToken}`,
        "user-agent": DRIVER_USER_AGENT,
        accept: "application/json",
      },
    });
  }

  /** Path of the benchmark resource in a namespace (optionally of one object). */
  path(namespace: string, name?: string): string {
    return `/apis/${GROUP_VERSION}/namespaces/${namespace}/${this.resource.plural}${
      name ? `/${name}` : ""
    }`;
  }

  /** Creates one benchmark object; throws unless the API server answers 201. */
  async create(namespace: string, name: string): Promise<void> {
    const { status, body } = await this.request("POST", this.path(namespace), {
      apiVersion: GROUP_VERSION,
      kind: this.resource.kind,
      metadata: { name, labels: { "bench.kopf.dev/object": "yes" } },
      spec: { duration: "1m", field: "value", items: ["item1", "item2"], value: 0 },
    });
    if (status !== 201) {
      throw new Error(`create ${namespace}/${name}: HTTP ${status}: ${JSON.stringify(body)}`);
    }
  }

  /** Sets `spec.value` (a merge patch). */
  async setValue(namespace: string, name: string, value: number): Promise<void> {
    const { status, body } = await this.request(
      "PATCH",
      this.path(namespace, name),
      { spec: { value } },
      { contentType: "application/merge-patch+json" },
    );
    if (status !== 200) {
      throw new Error(`patch ${namespace}/${name}: HTTP ${status}: ${JSON.stringify(body)}`);
    }
  }

  /** Deletes one object (a missing one is fine). */
  async delete(namespace: string, name: string): Promise<void> {
    const { status, body } = await this.request("DELETE", this.path(namespace, name));
    if (status >= 300 && status !== 404) {
      throw new Error(`delete ${namespace}/${name}: HTTP ${status}: ${JSON.stringify(body)}`);
    }
  }

  /**
   * Removes all benchmark objects of a namespace (after their operator stopped), dropping
   * finalizers that nobody will remove any more, and the namespace's Events.
   */
  async clear(namespace: string): Promise<void> {
    // The API server ends a request after its own timeout (60 s): deleting tens of thousands of
    // objects takes several collection deletions, each one deleting a part.
    for (let attempt = 1;; attempt++) {
      try {
        await this.request("DELETE", this.path(namespace), undefined, { timeoutMs: 120_000 });
        break;
      } catch (error) {
        if (attempt >= 10) throw error;
        await new Promise((resolve) => setTimeout(resolve, 2_000));
      }
    }
    const { body } = await this.request("GET", this.path(namespace));
    const items = (body as { items?: BenchObject[] } | undefined)?.items ?? [];
    await pool(items, 16, async (item) => {
      if (item.metadata.finalizers?.length) {
        await this.request(
          "PATCH",
          this.path(namespace, item.metadata.name),
          { metadata: { finalizers: null } },
          { contentType: "application/merge-patch+json" },
        );
      }
    });
    await this.request("DELETE", `/api/v1/namespaces/${namespace}/events`, undefined, {
      timeoutMs: 120_000,
    });
  }

  [Symbol.dispose](): void {
    this.#client.close();
  }
}

/** Runs `fn` over the items with at most `limit` in flight. */
export async function pool<T>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      await fn(items[index]!, index);
    }
  });
  await Promise.all(workers);
}

/** What the observer saw of one object (times in ms since the epoch, on the harness's clock). */
export interface Seen {
  /** When `status.create_fn` first appeared. */
  handledAt?: number;
  /** `status.create_fn.started`: when the create handler began (the operator's clock). */
  createStarted?: number;
  /** The last `status.update_fn.value` seen, when it appeared, and when the handler began. */
  updateValue?: unknown;
  updateAt?: number;
  updateStarted?: number;
  /** When the object disappeared (DELETED). */
  deletedAt?: number;
}

/** Watches the benchmark objects of one namespace and timestamps their changes. */
export class Observer {
  readonly seen = new Map<string, Seen>();
  readonly #api: Api;
  readonly #namespace: string;
  readonly #stop = new AbortController();
  #loop: Promise<void> | undefined;
  #tick!: Promise<void>;
  #wake!: () => void;
  #ready!: Promise<void>;
  #readyResolve!: () => void;
  error: unknown;

  constructor(api: Api, namespace: string) {
    this.#api = api;
    this.#namespace = namespace;
    this.#rearm();
    this.#ready = new Promise((resolve) => (this.#readyResolve = resolve));
  }

  #rearm(): void {
    this.#tick = new Promise((resolve) => (this.#wake = resolve));
  }

  /** Starts watching; resolves once the watch stream is open. */
  async start(): Promise<void> {
    this.#loop = this.#run().catch((error) => {
      if (!this.#stop.signal.aborted) this.error = error;
    });
    await Promise.race([
      this.#ready,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error("observer: the watch did not open in 30 s")), 30_000)
      ),
    ]);
  }

  /** Stops watching (waits at most 10 s for the stream to close). */
  async stop(): Promise<void> {
    this.#stop.abort();
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.#loop, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
    clearTimeout(timer);
  }

  get(name: string): Seen {
    let seen = this.seen.get(name);
    if (!seen) {
      seen = {};
      this.seen.set(name, seen);
    }
    return seen;
  }

  #observe(type: string, obj: BenchObject): void {
    const now = Date.now();
    const seen = this.get(obj.metadata.name);
    if (type === "DELETED") {
      seen.deletedAt ??= now;
    } else {
      const create = obj.status?.create_fn;
      if (create && seen.handledAt === undefined) {
        seen.handledAt = now;
        seen.createStarted = create.started;
      }
      const update = obj.status?.update_fn;
      if (update && update.value !== seen.updateValue) {
        seen.updateValue = update.value;
        seen.updateAt = now;
        seen.updateStarted = update.started;
      }
    }
    const wake = this.#wake;
    this.#rearm();
    wake();
  }

  async #run(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      const listed = await this.#api.request("GET", this.#api.path(this.#namespace));
      if (listed.status !== 200) throw new Error(`observer list: HTTP ${listed.status}`);
      const list = listed.body as { metadata: { resourceVersion: string }; items: BenchObject[] };
      for (const item of list.items) this.#observe("ADDED", item);
      let rv = list.metadata.resourceVersion;
      let gone = false;
      while (!gone && !signal.aborted) {
        const response = await this.#api.stream(
          `${this.#api.path(this.#namespace)}?watch=true&allowWatchBookmarks=true` +
            `&timeoutSeconds=600&resourceVersion=${rv}`,
          signal,
        );
        if (!response.ok || !response.body) {
          await response.body?.cancel();
          gone = true;
          break;
        }
        this.#readyResolve();
        // Cancel the body explicitly on stop: aborting the fetch alone did not always end a
        // long-running read of an HTTP/2 watch stream (it then lasted until timeoutSeconds).
        const reader = response.body.getReader();
        const cancel = () => void reader.cancel().catch(() => {});
        signal.addEventListener("abort", cancel, { once: true });
        const decoder = new TextDecoder();
        let buffer = "";
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            let newline;
            while ((newline = buffer.indexOf("\n")) >= 0) {
              const line = buffer.slice(0, newline);
              buffer = buffer.slice(newline + 1);
              if (!line.trim()) continue;
              const event = JSON.parse(line) as { type: string; object: BenchObject };
              if (event.type === "ERROR") {
                gone = true;
                break;
              }
              rv = event.object.metadata.resourceVersion;
              if (event.type !== "BOOKMARK") this.#observe(event.type, event.object);
            }
            if (gone) {
              cancel();
              break;
            }
          }
        } catch (error) {
          if (signal.aborted) return;
          throw error;
        } finally {
          signal.removeEventListener("abort", cancel);
        }
      }
    }
  }

  /**
   * Waits until `done()` holds, re-checking after every observed change (and every 500 ms).
   * @returns `true` if it held before the deadline.
   */
  async waitUntil(done: () => boolean, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (this.error) throw this.error;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([
        this.#tick,
        new Promise((resolve) => (timer = setTimeout(resolve, Math.min(left, 500)))),
      ]);
      clearTimeout(timer);
    }
    return true;
  }

  /** How many of the names have `status.create_fn`. */
  countHandled(names: readonly string[]): number {
    let n = 0;
    for (const name of names) if (this.seen.get(name)?.handledAt !== undefined) n++;
    return n;
  }

  /** How many of the names are gone. */
  countDeleted(names: readonly string[]): number {
    let n = 0;
    for (const name of names) if (this.seen.get(name)?.deletedAt !== undefined) n++;
    return n;
  }
}
