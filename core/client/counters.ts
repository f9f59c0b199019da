/**
 * Counts every request the client makes, by verb, resource and status code.
 *
 * Tests read the counts to assert API-friendliness ("one write per cycle"); metrics read them
 * later. Kept free of I/O and of the HTTP machinery so it can be shared by several clients.
 * @module
 */

/** The Kubernetes verb of a request, as the API server's audit log would name it. */
export type Verb =
  | "get"
  | "list"
  | "watch"
  | "create"
  | "update"
  | "patch"
  | "delete"
  | "deletecollection"
  | "discovery"
  | "other";

/** One classified request. */
export interface RequestKey {
  /** The Kubernetes verb. */
  readonly verb: Verb;
  /** Plural resource name, with `/subresource` when one is addressed (e.g. `kopfexamples/status`). */
  readonly resource: string;
  /** HTTP status code, or 0 when no answer came (transport failure). */
  readonly code: number;
}

/**
 * Receives every request as it is recorded, with how long it took until the answer's headers
 * (the metrics engine turns these into request counts and latency histograms).
 */
export type RequestListener = (key: RequestKey, seconds: number) => void;

/** A counter of requests, filterable by any part of the {@link RequestKey}. */
export class RequestCounters {
  #counts = new Map<string, number>();
  #listeners = new Set<RequestListener>();

  /**
   * Records one request.
   * @param key What was requested and how it ended.
   * @param seconds How long it took until the answer's headers (0 when unknown).
   */
  record(key: RequestKey, seconds = 0): void {
    const id = `${key.verb} ${key.resource} ${key.code}`;
    this.#counts.set(id, (this.#counts.get(id) ?? 0) + 1);
    for (const listener of this.#listeners) listener(key, seconds);
  }

  /**
   * Calls `listener` for every request recorded from now on.
   * @param listener Receives the request and its duration.
   * @returns A function that stops the calls.
   */
  listen(listener: RequestListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Counts requests matching all the given parts.
   *
   * @param filter Verb(s), resource and/or code to match; omitted parts match anything.
   * @returns The number of matching requests.
   */
  count(filter: { verb?: Verb | readonly Verb[]; resource?: string; code?: number } = {}): number {
    const verbs = filter.verb === undefined ? undefined : ([] as Verb[]).concat(filter.verb);
    let total = 0;
    for (const entry of this.entries()) {
      if (verbs && !verbs.includes(entry.verb)) continue;
      if (filter.resource !== undefined && entry.resource !== filter.resource) continue;
      if (filter.code !== undefined && entry.code !== filter.code) continue;
      total += entry.count;
    }
    return total;
  }

  /**
   * Counts the writes (create, update, patch, delete, deletecollection) matching the filter.
   *
   * @param filter The resource to match; omitted matches any.
   * @returns The number of matching writes.
   */
  writes(filter: { resource?: string } = {}): number {
    return this.count({
      ...filter,
      verb: ["create", "update", "patch", "delete", "deletecollection"],
    });
  }

  /**
   * Lists all counts.
   *
   * @returns One entry per distinct verb, resource and code, with its count.
   */
  entries(): Array<RequestKey & { count: number }> {
    return [...this.#counts].map(([id, count]) => {
      const [verb, resource, code] = id.split(" ") as [Verb, string, string];
      return { verb, resource, code: Number(code), count };
    });
  }

  /**
   * Copies the current counts, to compare before/after an action with
   * {@link RequestCounters.since}.
   *
   * @returns An independent copy that does not change with later requests.
   */
  snapshot(): RequestCounters {
    const copy = new RequestCounters();
    for (const [id, n] of this.#counts) copy.#counts.set(id, n);
    return copy;
  }

  /**
   * The requests made since an earlier snapshot.
   * @param earlier A snapshot taken before.
   * @returns A counter holding only the difference.
   */
  since(earlier: RequestCounters): RequestCounters {
    const diff = new RequestCounters();
    for (const [id, n] of this.#counts) {
      const delta = n - (earlier.#counts.get(id) ?? 0);
      if (delta > 0) diff.#counts.set(id, delta);
    }
    return diff;
  }

  /** Forgets all counts. */
  reset(): void {
    this.#counts.clear();
  }
}

/**
 * Classifies a request the way the API server's authorizer does.
 *
 * @param method HTTP method.
 * @param path URL path (no query), e.g. `/apis/kopf.dev/v1/namespaces/ns/kopfexamples/x/status`.
 * @param query Query parameters (`watch=true` turns a get into a watch).
 * @returns The verb and the resource (with subresource) addressed.
 */
export function classify(
  method: string,
  path: string,
  query?: URLSearchParams,
): { verb: Verb; resource: string } {
  const parts = path.split("/").filter(Boolean);
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) rest = parts.slice(2);
  else if (parts[0] === "apis" && parts.length >= 3) rest = parts.slice(3);
  else return { verb: "discovery", resource: path };
  if (rest.length === 0) return { verb: "discovery", resource: path };
  if (rest[0] === "watch") rest = rest.slice(1); // legacy /watch/ prefix
  let named: boolean;
  let resource: string;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    resource = rest[2]!;
    named = rest.length >= 4;
    if (rest.length >= 5) resource += `/${rest[4]}`;
  } else {
    resource = rest[0]!;
    named = rest.length >= 2;
    if (rest.length >= 3) resource += `/${rest[2]}`;
  }
  const watching = query?.get("watch") === "true" || query?.get("watch") === "1" ||
    parts.includes("watch");
  switch (method.toUpperCase()) {
    case "GET":
      return { verb: watching ? "watch" : named ? "get" : "list", resource };
    case "POST":
      return { verb: "create", resource };
    case "PUT":
      return { verb: "update", resource };
    case "PATCH":
      return { verb: "patch", resource };
    case "DELETE":
      return { verb: named ? "delete" : "deletecollection", resource };
    default:
      return { verb: "other", resource };
  }
}
