/**
 * Fault injection for tests: latency, 429 with `Retry-After`, 5xx answers, dropped connections,
 * and stalled watch streams, each for requests matching a filter and optionally a number of
 * times.
 * @module
 */

/** The request a fault is considered for. */
export interface RequestInfo {
  /** Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection, … */
  readonly verb: string;
  /** HTTP method. */
  readonly method: string;
  /** URL path. */
  readonly path: string;
  /** API group (`""` for core). */
  readonly group: string;
  /** Plural resource name (with `/subresource` if one is addressed), or `""`. */
  readonly resource: string;
  /** Namespace, if addressed. */
  readonly namespace: string | undefined;
  /** Object name, if addressed. */
  readonly name: string | undefined;
}

/** Which requests a fault applies to; omitted parts match anything. */
export interface FaultMatch {
  /** Verb(s), e.g. `"watch"` or `["create", "patch"]`. */
  readonly verb?: string | readonly string[];
  /** Plural resource (with `/subresource`), e.g. `"configmaps"` or `"kopfexamples/status"`. */
  readonly resource?: string;
  /** Namespace. */
  readonly namespace?: string;
  /** Object name. */
  readonly name?: string;
  /** The URL path: equal to a string, or matching a regular expression. */
  readonly path?: string | RegExp;
}

/** Options shared by all faults. */
export interface FaultOptions {
  /** Which requests are affected. @default every request */
  readonly match?: FaultMatch;
  /** How many requests are affected before the fault disarms itself. @default unlimited */
  readonly times?: number;
}

/** An injected fault; dispose or {@link Fault.clear} it to remove it. */
export interface Fault extends Disposable {
  /** How many requests it has affected so far. */
  readonly hits: number;
  /** Removes the fault (a stall releases the held events). */
  clear(): void;
}

/** What the router must do for one request. */
export type FaultAction =
  | { readonly kind: "latency"; readonly ms: number }
  | {
    readonly kind: "status";
    readonly code: number;
    readonly reason: string;
    readonly message: string;
    readonly retryAfterSeconds?: number;
  }
  | { readonly kind: "drop" };

interface Rule {
  readonly match: FaultMatch;
  remaining: number;
  hits: number;
  readonly action: FaultAction | "stall";
}

const REASONS: Readonly<Record<number, string>> = {
  429: "TooManyRequests",
  500: "InternalError",
  502: "InternalError",
  503: "ServiceUnavailable",
  504: "Timeout",
};

/** Matches a request against a filter. */
export function matchesRequest(match: FaultMatch, info: RequestInfo): boolean {
  if (match.verb !== undefined) {
    const verbs = typeof match.verb === "string" ? [match.verb] : match.verb;
    if (!verbs.includes(info.verb)) return false;
  }
  if (match.resource !== undefined && match.resource !== info.resource) return false;
  if (match.namespace !== undefined && match.namespace !== info.namespace) return false;
  if (match.name !== undefined && match.name !== info.name) return false;
  if (typeof match.path === "string" && match.path !== info.path) return false;
  if (match.path instanceof RegExp && !match.path.test(info.path)) return false;
  return true;
}

/** The emulator's fault injector: its `faults` property. */
export class Faults {
  #rules: Rule[] = [];
  #resumeListeners = new Set<() => void>();
  #lineListeners = new Set<[RequestInfo, (lines: string[]) => void]>();
  #dropAll: () => void;

  /**
   * Creates an injector.
   *
   * @param dropAll Closes every open client connection.
   */
  constructor(dropAll: () => void) {
    this.#dropAll = dropAll;
  }

  /** Delays matching requests by `ms` before they are handled. */
  latency(ms: number, options: FaultOptions = {}): Fault {
    return this.#add({ kind: "latency", ms }, options);
  }

  /** Answers matching requests with 429 TooManyRequests and a `Retry-After` header. */
  throttle(options: FaultOptions & { readonly retryAfterSeconds?: number } = {}): Fault {
    const retryAfterSeconds = options.retryAfterSeconds ?? 1;
    return this.#add({
      kind: "status",
      code: 429,
      reason: "TooManyRequests",
      message: "Too many requests, please try again later.",
      retryAfterSeconds,
    }, options);
  }

  /** Answers matching requests with an error status (default 500 InternalError). */
  fail(code = 500, options: FaultOptions & { readonly message?: string } = {}): Fault {
    return this.#add({
      kind: "status",
      code,
      reason: REASONS[code] ?? "InternalError",
      message: options.message ?? `Internal error occurred: injected fault (${code})`,
    }, options);
  }

  /** Closes the connection of matching requests without answering. */
  drop(options: FaultOptions = {}): Fault {
    return this.#add({ kind: "drop" }, options);
  }

  /**
   * Makes matching watch streams (open and future ones) silent — no events, no bookmarks, no
   * end — until the fault is cleared; held events are then delivered. `times` is ignored.
   */
  stallWatches(options: Pick<FaultOptions, "match"> = {}): Fault {
    return this.#add("stall", { match: { ...options.match, verb: "watch" } });
  }

  /**
   * Writes raw lines into the matching watch streams open now, as if the API server had sent
   * them: malformed JSON, events of unknown types, objects without metadata. Each line is sent
   * as given, with a newline added.
   *
   * @param lines The raw lines.
   * @param options Which watch streams (`times` is ignored).
   * @returns How many streams received the lines.
   */
  injectWatchLines(lines: readonly string[], options: Pick<FaultOptions, "match"> = {}): number {
    const match = { ...options.match, verb: "watch" };
    let streams = 0;
    for (const [info, deliver] of this.#lineListeners) {
      if (!matchesRequest(match, info)) continue;
      deliver(lines.map((line) => `${line}\n`));
      streams++;
    }
    return streams;
  }

  /**
   * Registers a watch stream for {@link Faults.injectWatchLines} (used by watch streams).
   *
   * @param info The watch request.
   * @param deliver Writes raw lines into the stream.
   * @returns A function that unregisters it.
   */
  onInjectedLines(info: RequestInfo, deliver: (lines: string[]) => void): () => void {
    const entry: [RequestInfo, (lines: string[]) => void] = [info, deliver];
    this.#lineListeners.add(entry);
    return () => this.#lineListeners.delete(entry);
  }

  /** Closes every open client connection now (watch streams included). */
  dropConnections(): void {
    this.#dropAll();
  }

  /** Removes every fault. */
  clear(): void {
    const stalls = this.#rules.some((r) => r.action === "stall");
    this.#rules = [];
    if (stalls) { for (const listener of this.#resumeListeners) listener(); }
  }

  /**
   * What to do for a request (used by the router); counts the hits.
   *
   * @param info The request.
   * @returns The actions, in order: latencies first, then at most one answer or drop.
   */
  plan(info: RequestInfo): FaultAction[] {
    const actions: FaultAction[] = [];
    let final: FaultAction | undefined;
    for (const rule of [...this.#rules]) {
      if (rule.action === "stall" || !matchesRequest(rule.match, info)) continue;
      if (rule.action.kind !== "latency" && final) continue;
      rule.hits++;
      if (--rule.remaining <= 0) this.#rules = this.#rules.filter((r) => r !== rule);
      if (rule.action.kind === "latency") actions.push(rule.action);
      else final = rule.action;
    }
    return final ? [...actions, final] : actions;
  }

  /**
   * Whether a watch stream must be silent now (used by watch streams).
   *
   * @param info The watch request.
   * @returns `true` while a matching stall is active.
   */
  stalled(info: RequestInfo): boolean {
    return this.#rules.some((r) => r.action === "stall" && matchesRequest(r.match, info));
  }

  /**
   * Registers a callback for the end of stalls (used by watch streams).
   *
   * @param callback Called whenever a stall is cleared.
   * @returns A function that unregisters it.
   */
  onResume(callback: () => void): () => void {
    this.#resumeListeners.add(callback);
    return () => this.#resumeListeners.delete(callback);
  }

  #add(action: FaultAction | "stall", options: FaultOptions): Fault {
    const rule: Rule = {
      match: options.match ?? {},
      remaining: action === "stall" ? Infinity : options.times ?? Infinity,
      hits: 0,
      action,
    };
    this.#rules.push(rule);
    const clear = () => {
      if (!this.#rules.includes(rule)) return;
      this.#rules = this.#rules.filter((r) => r !== rule);
      if (action === "stall") { for (const listener of this.#resumeListeners) listener(); }
    };
    return {
      get hits() {
        return rule.hits;
      },
      clear,
      [Symbol.dispose]: clear,
    };
  }
}
