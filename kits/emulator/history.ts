/**
 * What happened, for assertions: every request the emulator answered, and every version of
 * every object.
 * @module
 */

import type { Store } from "./storage.ts";
import type { ObjectVersion } from "./storage.ts";

/** One answered request. */
export interface RequestRecord {
  /** Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
   * `deletecollection`), or `discovery`/`other` for non-resource paths. */
  readonly verb: string;
  /** HTTP method. */
  readonly method: string;
  /** URL path (without the query). */
  readonly path: string;
  /** URL query (without `?`), possibly empty. */
  readonly query: string;
  /** API group (`""` for core). */
  readonly group: string;
  /** Plural resource, with `/subresource` when one is addressed; `""` for other paths. */
  readonly resource: string;
  /** Namespace, if addressed. */
  readonly namespace: string | undefined;
  /** Object name, if addressed. */
  readonly name: string | undefined;
  /** HTTP status code of the answer (0 for a dropped connection). */
  readonly code: number;
  /** When the request arrived (ms since the epoch). */
  readonly time: number;
  /** How long it took until the answer started (ms). */
  readonly durationMs: number;
}

/** Which requests to count or find; omitted parts match anything. */
export interface RequestFilter {
  /** Verb(s). */
  readonly verb?: string | readonly string[];
  /** Plural resource (with `/subresource`). */
  readonly resource?: string;
  /** API group. */
  readonly group?: string;
  /** Namespace. */
  readonly namespace?: string;
  /** Object name. */
  readonly name?: string;
  /** HTTP status code. */
  readonly code?: number;
}

/** The request log and object versions (see the `history` property of the emulator). */
export class History {
  #requests: RequestRecord[] = [];
  #store: Store;

  /**
   * Creates an empty request log over a store.
   *
   * @param store Where object versions are recorded.
   */
  constructor(store: Store) {
    this.#store = store;
  }

  /** Every answered request, oldest first. */
  get requests(): readonly RequestRecord[] {
    return this.#requests;
  }

  /**
   * Records one request (used by the router).
   *
   * @param record The request and its answer.
   */
  record(record: RequestRecord): void {
    this.#requests.push(record);
  }

  /**
   * The requests matching a filter.
   *
   * @param filter What to match.
   * @returns The matching requests, oldest first.
   */
  find(filter: RequestFilter = {}): RequestRecord[] {
    const verbs = filter.verb === undefined
      ? undefined
      : typeof filter.verb === "string"
      ? [filter.verb]
      : filter.verb;
    return this.#requests.filter((r) =>
      (!verbs || verbs.includes(r.verb)) &&
      (filter.resource === undefined || r.resource === filter.resource) &&
      (filter.group === undefined || r.group === filter.group) &&
      (filter.namespace === undefined || r.namespace === filter.namespace) &&
      (filter.name === undefined || r.name === filter.name) &&
      (filter.code === undefined || r.code === filter.code)
    );
  }

  /**
   * Counts the requests matching a filter.
   *
   * @param filter What to match.
   * @returns How many there were.
   */
  count(filter: RequestFilter = {}): number {
    return this.find(filter).length;
  }

  /**
   * Every stored version of one object, including deletions (`type: "DELETED"`) and earlier
   * objects of the same name.
   *
   * @param resource The plural resource, `plural.group` for non-core groups (e.g.
   *   `configmaps`, `kopfexamples.kopf.dev`).
   * @param name The object's name.
   * @param namespace The object's namespace; omit for cluster-scoped objects.
   * @returns The versions, oldest first.
   */
  versions(resource: string, name: string, namespace = ""): ObjectVersion[] {
    const dot = resource.indexOf(".");
    const key = dot < 0 ? `/${resource}` : `${resource.slice(dot + 1)}/${resource.slice(0, dot)}`;
    return this.#store.versions(key, namespace, name);
  }

  /** Forgets the recorded requests (object versions stay). */
  clear(): void {
    this.#requests = [];
  }
}
