/**
 * Peering: operators that serve the same resources know about each other through a peering
 * object (`KopfPeering` per namespace for namespaced operators, `ClusterKopfPeering` for
 * cluster-wide ones, group `kopf.dev/v1`) and the one with the highest priority works while the
 * others pause.
 *
 * The object's `status` maps each operator's identity to `{priority, lifetime, lastseen}`. Every
 * operator keeps its own entry alive with one merge patch shortly before its lifetime ends,
 * removes it on exit, and removes the entries of dead peers (past `lastseen + lifetime`). It
 * watches the object with a server-side field selector on its name and re-evaluates on every
 * change: a live peer with a higher priority pauses it; live peers with the same priority pause
 * everyone (with a warning, since that is a deployment mistake); when they are gone, or expected
 * to have expired, it resumes. `kopf freeze` writes such a higher-priority entry by hand.
 *
 * There are no per-object locks: pausing is operator-wide. {@link OperatorPause} is the switch the
 * orchestration reads; {@link pausable} closes and reopens watch streams by it.
 *
 * Not here: the CLI commands (`core/cli/main.ts`), when peering starts (`core/reactor/lifetime/serving.ts`).
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import { ApiError } from "../../client/errors.ts";
import { isRoutineSilence, watcher, watchingOptions } from "../../client/watching.ts";
import type { PeeringSettings, WatchingSettings } from "../../settings/settings.ts";
import {
  isLiteralNamespace,
  matchAnyNamespace,
  type NamespacePattern,
} from "../../structs/namespaces.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { Resource } from "../../structs/resources.ts";

function peeringResource(kind: string, plural: string, namespaced: boolean): Resource {
  return {
    group: "kopf.dev",
    version: "v1",
    plural,
    singular: plural.slice(0, -1),
    kind,
    namespaced,
    verbs: ["get", "list", "watch", "patch"],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
  };
}

/** `ClusterKopfPeering`: the peering of cluster-wide operators. */
export const CLUSTER_PEERINGS: Resource = peeringResource(
  "ClusterKopfPeering",
  "clusterkopfpeerings",
  false,
);
/** `KopfPeering`: the peering of namespaced operators, one object per served namespace. */
export const NAMESPACED_PEERINGS: Resource = peeringResource("KopfPeering", "kopfpeerings", true);

/** One entry of a peering object's status, as read at a moment. */
export interface Peer {
  /** The operator's identity (the key in `status`). */
  readonly identity: string;
  /** Its priority. */
  readonly priority: number;
  /** Seconds it stays alive after `lastseen`. */
  readonly lifetime: number;
  /** When it last announced itself (ms since epoch). */
  readonly lastseen: number;
  /** `lastseen + lifetime` (ms since epoch). */
  readonly deadline: number;
}

/**
 * Reads the peers from a peering object's status; fields other than ours are ignored.
 * @param status The object's `status`.
 * @param now The current time (ms since epoch), for entries without `lastseen`.
 * @returns The peers.
 */
export function parsePeers(status: unknown, now: number = Date.now()): Peer[] {
  if (!status || typeof status !== "object") return [];
  const peers: Peer[] = [];
  for (const [identity, info] of Object.entries(status as Record<string, unknown>)) {
    if (!info || typeof info !== "object") continue;
    const raw = info as { priority?: unknown; lifetime?: unknown; lastseen?: unknown };
    const priority = Math.trunc(Number(raw.priority ?? 0)) || 0;
    const lifetime = Math.trunc(Number(raw.lifetime ?? 60));
    const parsed = typeof raw.lastseen === "string" ? Date.parse(raw.lastseen) : NaN;
    const lastseen = Number.isFinite(parsed) ? parsed : now;
    const alive = Number.isFinite(lifetime) ? lifetime : 60;
    peers.push({
      identity,
      priority,
      lifetime: alive,
      lastseen,
      deadline: lastseen + alive * 1000,
    });
  }
  return peers;
}

/**
 * This operator's identity in peering objects: the `POD_ID` environment variable if set (e.g.
 * the pod's name through the downward API), else `user@host/YYYYMMDDHHMMSS/xyz`; for
 * `kopf freeze`/`resume` (`manual`), `user@host`, so that a later resume finds the entry.
 * Without a user (`USER`, `USERNAME`, `LOGNAME` unset, as in most containers), the pod or host
 * takes the place of `user@host`: `POD_NAME`, else `HOSTNAME`, else the host's name.
 * @param options `manual`: the stable form for the CLI commands.
 * @returns The identity.
 */
export function detectIdentity(options: { manual?: boolean } = {}): string {
  const env = (name: string) => {
    try {
      return Deno.env.get(name);
    } catch {
      return undefined; // no --allow-env: use the fallbacks
    }
  };
  const pod = env("POD_ID");
  if (pod) return pod;
  const user = env("USER") || env("USERNAME") || env("LOGNAME");
  let host = "localhost";
  try {
    host = Deno.hostname();
  } catch { /* no --allow-sys: keep localhost */ }
  const base = user ? `${user}@${host}` : env("POD_NAME") || env("HOSTNAME") || host;
  if (options.manual) return base;
  const now = new Date().toISOString().replace(/[-:T]/g, "").slice(0, 14);
  const letters = "abcdefhijklmnopqrstuvwxyz0123456789";
  const random = Array.from({ length: 3 }, () => letters[Math.floor(Math.random() * 35)]).join("");
  return `${base}/${now}/${random}`;
}

/** Where one peering object lives. */
export interface PeeringTarget {
  /** `CLUSTER_PEERINGS` or `NAMESPACED_PEERINGS`. */
  readonly resource: Resource;
  /** The object's namespace (namespaced peering only). */
  readonly namespace: string | undefined;
  /** The object's name. */
  readonly name: string;
}

function describe(target: PeeringTarget): string {
  const where = target.namespace ? `in '${target.namespace}'` : "cluster-wide";
  return `${target.resource.kind} '${target.name}' ${where}`;
}

/**
 * Writes (or with `lifetime: 0` removes) one entry in a peering object: one merge patch.
 * @param api Object operations.
 * @param target The peering object.
 * @param entry The identity, priority, lifetime (seconds) and an optional message.
 * @returns The object as stored, or `undefined` if it does not exist.
 */
export async function touchPeering(
  api: KubeApi,
  target: PeeringTarget,
  entry: {
    identity: string;
    priority: number;
    lifetime: number;
    message?: string | undefined;
    signal?: AbortSignal | undefined;
  },
): Promise<KubeObject | undefined> {
  const value = entry.lifetime > 0
    ? {
      priority: entry.priority,
      lifetime: entry.lifetime,
      lastseen: new Date().toISOString(),
      ...(entry.message ? { message: entry.message } : {}),
    }
    : null;
  try {
    return await api.patch(target.resource, target.name, { status: { [entry.identity]: value } }, {
      namespace: target.namespace,
      signal: entry.signal,
    });
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return undefined;
    throw error;
  }
}

/**
 * The operator-wide pause switch: paused while any reason is set (a higher-priority peer in any
 * peering object, a mandatory peering object that is absent, …).
 */
export class OperatorPause {
  #reasons = new Set<string>();
  #period = new AbortController();
  #waiters = new Set<() => void>();

  /** Whether the operator is paused now. */
  get paused(): boolean {
    return this.#reasons.size > 0;
  }

  /**
   * Sets or clears one reason to pause.
   * @param reason A key naming the reason.
   * @param on Whether it applies now.
   */
  set(reason: string, on: boolean): void {
    const was = this.paused;
    if (on) this.#reasons.add(reason);
    else this.#reasons.delete(reason);
    if (!was && this.paused) this.#period.abort(new Error("The operator is pausing"));
    if (was && !this.paused) {
      this.#period = new AbortController();
      for (const wake of [...this.#waiters]) wake();
    }
  }

  /**
   * A signal that aborts when the operator pauses next (already aborted while paused).
   * @returns The signal of the current running period.
   */
  running(): AbortSignal {
    return this.#period.signal;
  }

  /**
   * Resolves when the operator is not paused (at once if it is not), or when `signal` aborts.
   * @param signal Stops waiting.
   * @returns Resolves when running.
   */
  resumed(signal: AbortSignal): Promise<void> {
    if (!this.paused || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.#waiters.delete(done);
        signal.removeEventListener("abort", done);
        resolve();
      };
      this.#waiters.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }
}

/**
 * Runs a stream only while the operator is not paused: a pause aborts the current stream (its
 * connection closes) and calls `onPause`; a resume calls `onResume` and opens a new stream.
 * Without a `pause`, it is simply `open(signal, false)`.
 * @param pause The switch, if peering is used.
 * @param signal Ends everything.
 * @param open Opens a stream that ends when its signal aborts; `resumed` tells that it opens
 *   after a pause (peers may have acted meanwhile).
 * @param hooks Called on each pause and resume.
 * @returns The concatenation of the streams of all running periods.
 */
export async function* pausable<T>(
  pause: OperatorPause | undefined,
  signal: AbortSignal,
  open: (signal: AbortSignal, resumed: boolean) => AsyncIterable<T>,
  hooks: { onPause?: () => void; onResume?: () => void } = {},
): AsyncGenerator<T> {
  if (!pause) {
    yield* open(signal, false);
    return;
  }
  while (!signal.aborted) {
    const resumed = pause.paused;
    if (resumed) {
      hooks.onPause?.();
      await pause.resumed(signal);
      if (signal.aborted) return;
      hooks.onResume?.();
    }
    yield* open(AbortSignal.any([signal, pause.running()]), resumed);
  }
}

/** What {@link startPeering} needs. */
export interface PeeringDeps {
  /** Object operations. */
  readonly api: KubeApi;
  /** `settings.peering` (as configured after the startup handlers). */
  readonly settings: PeeringSettings;
  /** `settings.watching`, for the watch of the peering object. */
  readonly watching: WatchingSettings;
  /** This operator's identity. */
  readonly identity: string;
  /** The operator's namespace patterns, for namespaced peering (ignored if cluster-wide). */
  readonly namespaces: readonly NamespacePattern[];
  /** The switch to turn. */
  readonly pause: OperatorPause;
  /** Where peering logs. */
  readonly logger: Logger;
  /** Stops peering; the operator's entries are then removed. */
  readonly signal: AbortSignal;
  /** Time limit of removing the entries on exit, in seconds. @default 5 */
  readonly exitTimeout?: number;
}

/** Running peering. */
export interface PeeringRun {
  /** Resolves when peering stopped and the operator's entries are removed. */
  readonly finished: Promise<void>;
}

/**
 * Detects the peering mode and starts peering: standalone when `settings.standalone`; with the
 * peering object when it exists; when it does not exist, waits for it paused if
 * `settings.mandatory`, else falls back to the standalone mode with a warning.
 * @param deps Collaborators.
 * @returns The running peering, or `undefined` in the standalone mode.
 * @throws {Error} when namespaced peering has no namespaces to use.
 */
export async function startPeering(deps: PeeringDeps): Promise<PeeringRun | undefined> {
  const { settings, logger, signal } = deps;
  if (settings.standalone) return undefined;
  let targets: PeeringTarget[];
  try {
    targets = await peeringTargets(deps.api, settings, deps.namespaces, signal);
  } catch (error) {
    if (settings.mandatory || signal.aborted) throw error;
    logger.warning(`${error instanceof Error ? error.message : error}; running standalone.`);
    return undefined;
  }
  const found: boolean[] = [];
  for (const target of targets) {
    try {
      await deps.api.get(target.resource, target.name, { namespace: target.namespace, signal });
      found.push(true);
    } catch (error) {
      if (signal.aborted) throw error;
      if (!(error instanceof ApiError && error.code === 404)) {
        logger.warning(`Cannot read the peering object ${describe(target)}: ${error}`);
      }
      found.push(false);
    }
  }
  if (!settings.mandatory && !found.some(Boolean)) {
    logger.warning(
      settings.name === "default"
        ? "Default peering object is not found, falling back to the standalone mode."
        : `Peering object '${settings.name}' is not found, falling back to the standalone mode.`,
    );
    return undefined;
  }
  logger.info(
    `Peering as '${deps.identity}' with priority ${settings.priority} in ${
      targets.map(describe).join(", ")
    }.`,
  );
  const peers = targets.map((target, i) => new PeeringMember(deps, target, found[i]!));
  const finished = Promise.all(peers.map((p) => p.run())).then(() => {});
  return { finished };
}

const NAMESPACES: Resource = {
  ...peeringResource("Namespace", "namespaces", false),
  group: "",
  verbs: ["list"],
};

/**
 * The peering objects an operator uses: one `ClusterKopfPeering` for cluster-wide peering, else
 * one `KopfPeering` per namespace: the literal names, and the existing namespaces that glob
 * patterns match now (namespaces created later are served, but not peered in).
 * @param api Object operations (namespaces are listed only for glob patterns).
 * @param peering The peering object's name and scope.
 * @param patterns The operator's namespace patterns.
 * @param signal Cancels the listing.
 * @returns The peering objects.
 * @throws {Error} when namespaced peering has no namespace.
 */
export async function peeringTargets(
  api: KubeApi,
  peering: Pick<PeeringSettings, "name" | "clusterwide">,
  patterns: readonly NamespacePattern[],
  signal?: AbortSignal,
): Promise<PeeringTarget[]> {
  const name = peering.name;
  if (peering.clusterwide) return [{ resource: CLUSTER_PEERINGS, namespace: undefined, name }];
  const names = new Set(patterns.filter(isLiteralNamespace));
  if (names.size < patterns.length) {
    const { items } = await api.list(NAMESPACES, { signal });
    for (const ns of items) {
      const found = ns.metadata?.name ?? "";
      if (matchAnyNamespace(patterns, found)) names.add(found);
    }
  }
  const namespaces = [...names].filter((ns) => matchAnyNamespace(patterns, ns));
  if (!namespaces.length) {
    throw new Error(
      "Namespaced peering needs namespaces: use -n, --standalone or settings.peering.clusterwide",
    );
  }
  return namespaces.map((namespace) => ({ resource: NAMESPACED_PEERINGS, namespace, name }));
}

/** This operator's membership in one peering object. */
class PeeringMember {
  #deps: PeeringDeps;
  #target: PeeringTarget;
  #key: string;
  #wakeKeepalive: (() => void) | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #cleaning = new Set<string>();
  #conflicts = "";
  #exists: boolean;

  constructor(deps: PeeringDeps, target: PeeringTarget, exists: boolean) {
    this.#deps = deps;
    this.#target = target;
    this.#key = describe(target);
    this.#exists = exists;
    // Nothing is served until the object's peers are known (or, if mandatory, it exists).
    deps.pause.set(`pending ${this.#key}`, exists);
    if (!exists && deps.settings.mandatory) {
      deps.logger.warning(`Peering object ${this.#key} is not found; pausing until it exists.`);
      deps.pause.set(`absent ${this.#key}`, true);
    }
  }

  async run(): Promise<void> {
    const { signal } = this.#deps;
    try {
      await Promise.all([this.#keepalive(), this.#watch()]);
    } finally {
      clearTimeout(this.#timer);
    }
    if (!signal.aborted || !this.#exists) return;
    // The operator is exiting: remove our entry so that others need not wait for it to expire.
    try {
      const limit = AbortSignal.timeout((this.#deps.exitTimeout ?? 5) * 1000);
      await touchPeering(this.#deps.api, this.#target, {
        identity: this.#deps.identity,
        priority: this.#deps.settings.priority,
        lifetime: 0,
        signal: limit,
      });
    } catch (error) {
      this.#deps.logger.warning(`Could not remove self from ${this.#key}: ${error}`);
    }
  }

  async #keepalive(): Promise<void> {
    const { api, settings, identity, logger, signal } = this.#deps;
    while (!signal.aborted) {
      let result = "not found";
      let failed = false;
      try {
        const stored = await touchPeering(api, this.#target, {
          identity,
          priority: settings.priority,
          lifetime: settings.lifetime,
          signal,
        });
        if (stored) result = "ok";
      } catch (error) {
        if (signal.aborted) return;
        result = `failed: ${error}`;
        failed = true;
      }
      // A failed keep-alive (e.g. 403: no `patch` on the peering resource) is worth a warning:
      // peers will soon consider this operator dead.
      if (failed) logger.warning(`Keep-alive in ${this.#key}: ${result}.`);
      else if (!settings.stealth || result !== "ok") {
        logger.debug(`Keep-alive in ${this.#key}: ${result}.`);
      }
      // Shortly before the lifetime ends, with jitter so that peers do not write at once.
      const lifetime = settings.lifetime;
      const seconds = Math.min(lifetime, Math.max(1, lifetime - 5 - Math.random() * 5));
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          this.#wakeKeepalive = undefined;
          resolve();
        };
        const timer = setTimeout(done, seconds * 1000);
        signal.addEventListener("abort", done, { once: true });
        this.#wakeKeepalive = done;
      });
    }
  }

  async #watch(): Promise<void> {
    const { api, watching, logger, signal } = this.#deps;
    let listed = false;
    for await (
      const event of watcher(api, this.#target.resource, {
        namespace: this.#target.namespace,
        fieldSelector: `metadata.name=${this.#target.name}`,
        ...watchingOptions(watching),
        signal,
      })
    ) {
      switch (event.type) {
        case "init":
          listed = false;
          break;
        case "initApply":
        case "apply":
          listed = true;
          this.#evaluate(event.object);
          break;
        case "initDone":
          if (!listed) this.#absent();
          break;
        case "delete":
          this.#absent();
          break;
        case "error":
          if (isRoutineSilence(event.error)) {
            logger.info(`Watching ${this.#key}: ${event.error.message}`);
          } else logger.warning(`Watching ${this.#key}: ${event.error.message}`);
          break;
      }
    }
  }

  /** The object is absent: a mandatory peering pauses until it exists; else no peers. */
  #absent(): void {
    const { pause, settings, logger } = this.#deps;
    clearTimeout(this.#timer);
    pause.set(`pending ${this.#key}`, false);
    this.#setPeers([], []);
    if (settings.mandatory && this.#exists) {
      logger.warning(`Peering object ${this.#key} is gone; pausing until it exists.`);
    }
    if (settings.mandatory) pause.set(`absent ${this.#key}`, true);
    this.#exists = false;
  }

  #evaluate(body: KubeObject): void {
    const { settings, identity, pause, logger } = this.#deps;
    if (!this.#exists) {
      this.#exists = true;
      if (settings.mandatory) logger.info(`Peering object ${this.#key} is found.`);
      this.#wakeKeepalive?.(); // announce ourselves now, not at the next keep-alive
    }
    pause.set(`absent ${this.#key}`, false);
    const now = Date.now();
    const peers = parsePeers(body.status, now);
    const others = peers.filter((p) => p.identity !== identity);
    const dead = others.filter((p) => p.deadline <= now);
    const live = others.filter((p) => p.deadline > now);
    this.#clean(dead);
    const higher = live.filter((p) => p.priority > settings.priority);
    const same = live.filter((p) => p.priority === settings.priority);
    this.#setPeers(higher, same);
    pause.set(`pending ${this.#key}`, false);
    // Re-evaluate when the blocking peers are expected to expire (they may have died silently).
    clearTimeout(this.#timer);
    const blocking = [...higher, ...same];
    if (blocking.length) {
      const due = Math.min(...blocking.map((p) => p.deadline)) - now + 50;
      this.#timer = setTimeout(() => this.#evaluate(body), Math.max(0, due));
    }
  }

  #setPeers(higher: Peer[], same: Peer[]): void {
    const { pause, settings, logger } = this.#deps;
    const key = `peers ${this.#key}`;
    const list = (peers: Peer[]) =>
      peers.map((p) => `${p.identity} (priority ${p.priority})`).join(", ");
    const conflicts = higher.length ? `h:${list(higher)}` : same.length ? `s:${list(same)}` : "";
    if (conflicts === this.#conflicts) return;
    this.#conflicts = conflicts;
    if (higher.length) {
      logger.info(`Pausing operations in favour of ${list(higher)} in ${this.#key}.`);
    } else if (same.length) {
      logger.warning(
        `Possibly conflicting operators with the same priority ${settings.priority}: ${
          list(same)
        } in ${this.#key}. Pausing all operators, including self.`,
      );
    } else {
      logger.info(`Resuming operations after the pause in ${this.#key}.`);
    }
    pause.set(key, conflicts !== "");
  }

  #clean(dead: Peer[]): void {
    const fresh = dead.filter((p) => !this.#cleaning.has(p.identity));
    if (!fresh.length) return;
    const { api, logger, signal } = this.#deps;
    for (const peer of fresh) this.#cleaning.add(peer.identity);
    const patch = { status: Object.fromEntries(fresh.map((p) => [p.identity, null])) };
    logger.debug(`Removing dead peers from ${this.#key}: ${fresh.map((p) => p.identity)}.`);
    api.patch(this.#target.resource, this.#target.name, patch, {
      namespace: this.#target.namespace,
      signal,
    }).catch((error) => {
      if (!signal.aborted) logger.debug(`Could not remove dead peers: ${error}`);
    }).finally(() => {
      for (const peer of fresh) this.#cleaning.delete(peer.identity);
    });
  }
}
