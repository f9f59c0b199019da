/**
 * API discovery: which resources the server has, in which versions, with which verbs,
 * subresources, short names and categories.
 *
 * The catalogue is cached; it is refreshed on demand, on a cache miss (at most once per
 * `minRefreshIntervalMs`), and whenever a CustomResourceDefinition appears, changes or goes
 * away while {@link Discovery.followDefinitions} runs.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import type { KubeApi } from "./api.ts";
import { ApiError, TransportError } from "./errors.ts";
import { sleep } from "../util/backoff.ts";
import { watcher, type WatcherEvent } from "./watching.ts";

interface ApiResourceList {
  groupVersion: string;
  resources: Array<{
    name: string;
    singularName?: string;
    namespaced: boolean;
    kind: string;
    verbs?: string[];
    shortNames?: string[];
    categories?: string[];
  }>;
}

interface ApiGroupList {
  groups: Array<{
    name: string;
    versions: Array<{ groupVersion: string; version: string }>;
    preferredVersion?: { groupVersion: string; version: string };
  }>;
}

/** The resource of CustomResourceDefinitions themselves. */
export const CRD_RESOURCE: Resource = {
  group: "apiextensions.k8s.io",
  version: "v1",
  plural: "customresourcedefinitions",
  singular: "customresourcedefinition",
  kind: "CustomResourceDefinition",
  namespaced: false,
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
  shortNames: ["crd", "crds"],
  categories: ["api-extensions"],
  subresources: ["status"],
  preferred: true,
};

/** The core/v1 Namespaces resource (followed for namespace patterns; a known resource to check selectors against). */
export const NAMESPACES_RESOURCE: Resource = {
  group: "",
  version: "v1",
  plural: "namespaces",
  singular: "namespace",
  kind: "Namespace",
  namespaced: false,
  verbs: ["list", "watch"],
  shortNames: ["ns"],
  categories: [],
  subresources: [],
  preferred: true,
};

/** Options of {@link Discovery}. */
export interface DiscoveryOptions {
  /** Minimum time between refreshes caused by cache misses. @default 5000 */
  readonly minRefreshIntervalMs?: number;
}

/** A cached catalogue of the server's resources. */
export class Discovery {
  #api: KubeApi;
  #options: DiscoveryOptions;
  #resources: Resource[] | undefined;
  #loading: Promise<Resource[]> | undefined;
  #loadedAt = -Infinity;
  #listeners = new Set<() => void>();

  /**
   * Creates an empty catalogue; nothing is loaded until the first call.
   *
   * @param api Object operations (for the HTTP funnel).
   * @param options Refresh pacing.
   */
  constructor(api: KubeApi, options: DiscoveryOptions = {}) {
    this.#api = api;
    this.#options = options;
  }

  /**
   * All resources in all served versions (cached).
   * @param signal Cancels the load.
   * @returns The catalogue, sorted core first, then by group and version.
   */
  resources(signal?: AbortSignal): Promise<Resource[]> {
    if (this.#resources) return Promise.resolve(this.#resources);
    return this.refresh(signal);
  }

  /**
   * Reloads the catalogue from the server (concurrent callers share one load).
   * @param signal Cancels the load.
   * @returns The fresh catalogue.
   */
  refresh(signal?: AbortSignal): Promise<Resource[]> {
    this.#loading ??= this.#load(signal).then((resources) => {
      this.#resources = resources;
      this.#loadedAt = performance.now();
      return resources;
    }).finally(() => {
      this.#loading = undefined;
    });
    return this.#loading;
  }

  /**
   * Finds resources matching a predicate; on a miss, refreshes once (rate-limited) and retries.
   * @param predicate Which resources are wanted.
   * @param signal Cancels a refresh.
   * @returns The matching resources (possibly empty).
   */
  async find(
    predicate: (resource: Resource) => boolean,
    signal?: AbortSignal,
  ): Promise<Resource[]> {
    let found = (await this.resources(signal)).filter(predicate);
    const interval = this.#options.minRefreshIntervalMs ?? 5000;
    if (found.length === 0 && performance.now() - this.#loadedAt >= interval) {
      found = (await this.refresh(signal)).filter(predicate);
    }
    return found;
  }

  /**
   * Registers a callback for catalogue changes caused by CRD events.
   * @param listener Called after each refresh triggered by a CRD change.
   * @returns A function that unregisters the listener.
   */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Whether an established CRD's resource is in the loaded catalogue (true when unsure). */
  #knows(crd: KubeObject): boolean {
    const resources = this.#resources;
    if (!resources) return true; // nothing loaded: the first listing refreshes anyway
    const spec = crd.spec as { group?: unknown; names?: { plural?: unknown } } | undefined;
    const conditions = (crd.status as { conditions?: Array<{ type?: string; status?: string }> })
      ?.conditions ?? [];
    if (!conditions.some((c) => c.type === "Established" && c.status === "True")) return true;
    return resources.some((r) => r.group === spec?.group && r.plural === spec?.names?.plural);
  }

  /**
   * Watches CustomResourceDefinitions and refreshes the catalogue whenever one is added,
   * changed (e.g. becomes Established or gains a version) or deleted. Runs until aborted.
   * Failures of the watch are retried with backoff; each is reported to `onError` (e.g. a 403
   * when the operator may not list or watch CRDs), which would otherwise go unnoticed.
   * @param signal Stops following.
   * @param onError Told about each failed attempt and when the next one is made.
   */
  async followDefinitions(
    signal: AbortSignal,
    onError?: (error: Error, retryInMs: number) => void,
  ): Promise<void> {
    let listed = false;
    let unknown = false; // an established CRD of the first listing missing from the catalogue
    for await (const event of watcher(this.#api, CRD_RESOURCE, { signal })) {
      if (event.type === "error") onError?.(event.error, event.retryInMs);
      if (event.type === "initApply" && !listed && !unknown) unknown = !this.#knows(event.object);
      // The first listing only confirms the catalogue just loaded — unless a CRD was created
      // between the loading and the listing; a relist (after 410) may hide changes, so it
      // refreshes. Changes after the listing always refresh.
      const relisted = event.type === "initDone" && listed;
      const first = event.type === "initDone" && !listed;
      if (event.type === "initDone") listed = true;
      const changed = event.type === "apply" || event.type === "delete" || relisted ||
        (first && (this.#resources === undefined || unknown));
      if (listed && changed) {
        try {
          await this.#refreshAfter(event, signal);
        } catch (error) {
          if (signal.aborted) return;
          if (!(error instanceof ApiError || error instanceof TransportError)) throw error;
          continue; // A transient failure: the next CRD event or cache miss refreshes again.
        }
        for (const listener of this.#listeners) listener();
      }
    }
  }

  /**
   * Reloads the catalogue after a CRD event, until it shows the change. A load that began before
   * the event is not reused (it may predate the change), and the API server updates its
   * discovery documents a little after the CRD itself: a deleted CRD's resource can still be
   * listed for a moment (a test on the real API server saw it stay in a catalogue loaded right
   * after the DELETED event, with no later event to refresh it). A few retries, then give up: the
   * next CRD event or cache miss refreshes again.
   */
  async #refreshAfter(event: WatcherEvent, signal: AbortSignal): Promise<void> {
    await this.#loading?.catch(() => {});
    const crd = "object" in event ? event.object : undefined;
    for (let attempt = 0;; attempt++) {
      await this.refresh(signal);
      if (!crd || attempt >= 6) return;
      const spec = crd.spec as { group?: unknown; names?: { plural?: unknown } } | undefined;
      const listed = this.#resources?.some((r) =>
        r.group === spec?.group && r.plural === spec?.names?.plural
      );
      if (event.type === "delete" ? !listed : this.#knows(crd)) return;
      await sleep(100 * 2 ** attempt, signal); // up to 6.3 s in all
    }
  }

  async #load(signal?: AbortSignal): Promise<Resource[]> {
    // Aggregated discovery (Kubernetes ≥ 1.30): the whole catalogue in two requests instead of
    // one per group version. Older servers answer with the legacy lists: then go the long way.
    const aggregated = await Promise.all(
      ["/api", "/apis"].map((path) =>
        this.#api.http.json<AggregatedList | { kind?: string }>({
          path,
          signal,
          accept: AGGREGATED,
        })
      ),
    );
    if (aggregated.every((list) => list.kind === "APIGroupDiscoveryList")) {
      return aggregated.flatMap((list) => fromAggregated(list as AggregatedList));
    }
    return await this.#loadLegacy(signal);
  }

  async #loadLegacy(signal?: AbortSignal): Promise<Resource[]> {
    const http = this.#api.http;
    const core = http.json<{ versions: string[] }>({ path: "/api", signal });
    const groups = http.json<ApiGroupList>({ path: "/apis", signal });
    const lists: Array<Promise<Resource[]>> = [];
    for (const version of (await core).versions ?? []) {
      lists.push(this.#loadGroupVersion("", version, true, signal));
    }
    for (const group of (await groups).groups ?? []) {
      for (const v of group.versions) {
        const preferred =
          (group.preferredVersion?.version ?? group.versions[0]?.version) === v.version;
        lists.push(this.#loadGroupVersion(group.name, v.version, preferred, signal));
      }
    }
    return (await Promise.all(lists)).flat();
  }

  async #loadGroupVersion(
    group: string,
    version: string,
    preferred: boolean,
    signal?: AbortSignal,
  ): Promise<Resource[]> {
    const path = group ? `/apis/${group}/${version}` : `/api/${version}`;
    let list: ApiResourceList;
    try {
      list = await this.#api.http.json<ApiResourceList>({ path, signal });
    } catch (error) {
      // A group version that vanished (CRD deleted) or an unavailable aggregated API between
      // listing groups and reading them: skip it rather than fail the whole catalogue.
      if (error instanceof ApiError && (error.code === 404 || error.code === 503)) return [];
      throw error;
    }
    const subresources = new Map<string, string[]>();
    for (const r of list.resources ?? []) {
      const [main, sub] = r.name.split("/", 2) as [string, string | undefined];
      if (sub) subresources.set(main, [...(subresources.get(main) ?? []), sub]);
    }
    return (list.resources ?? []).filter((r) => !r.name.includes("/")).map((r) => ({
      group,
      version,
      plural: r.name,
      singular: r.singularName || r.kind.toLowerCase(),
      kind: r.kind,
      namespaced: r.namespaced,
      verbs: r.verbs ?? [],
      shortNames: r.shortNames ?? [],
      categories: r.categories ?? [],
      subresources: subresources.get(r.name) ?? [],
      preferred,
    }));
  }
}

const AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
  "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

interface AggregatedList {
  kind: "APIGroupDiscoveryList";
  items?: Array<{
    metadata?: { name?: string };
    versions?: Array<{
      version: string;
      freshness?: string;
      resources?: Array<{
        resource: string;
        responseKind?: { kind?: string };
        scope?: "Namespaced" | "Cluster";
        singularResource?: string;
        verbs?: string[];
        shortNames?: string[];
        categories?: string[];
        subresources?: Array<{ subresource: string }>;
      }>;
    }>;
  }>;
}

/** Resources from an aggregated discovery document; the first version of a group is preferred. */
function fromAggregated(list: AggregatedList): Resource[] {
  const resources: Resource[] = [];
  for (const group of list.items ?? []) {
    const name = group.metadata?.name ?? "";
    (group.versions ?? []).forEach((version, index) => {
      for (const r of version.resources ?? []) {
        const kind = r.responseKind?.kind ?? "";
        resources.push({
          group: name,
          version: version.version,
          plural: r.resource,
          singular: r.singularResource || kind.toLowerCase(),
          kind,
          namespaced: r.scope === "Namespaced",
          verbs: r.verbs ?? [],
          shortNames: r.shortNames ?? [],
          categories: r.categories ?? [],
          subresources: (r.subresources ?? []).map((s) => s.subresource),
          preferred: index === 0,
        });
      }
    });
  }
  return resources;
}
