/**
 * The reconcile controller: level-based handlers (`on.reconcile`), beside the cause handlers'
 * reactor and independent of it (kube-rs' `Controller`, controller-runtime's reconciler).
 *
 * Pipeline: informers (`core/client/caching.ts`) → triggers → work queue of object keys
 * (`core/util/workqueue.ts`) → one reconcile per key at a time. Triggers:
 * - the object appeared or changed in anything but its status and bookkeeping metadata
 *   (status too with `statusChanges`); at start, every object once (the first listing);
 * - an object of an `owns` resource whose controller owner reference names a reconciled object
 *   changed or went;
 * - an object of a `watches` resource changed or went: its `map()` names the objects;
 * - every `resync` seconds, every object;
 * - `requeueAfter`, temporary errors, and retries with backoff.
 *
 * Nothing is written to the object unless the handler writes (`patch`, `apply`), and writes that
 * would change nothing are not sent: the cache shows the state. With `finalizer`, the
 * controller adds the finalizer before the first reconcile and removes it after a reconcile of
 * the deleted object returned without error.
 *
 * With sharded replicas, an object is reconciled only by the holder of its shard (an owned object
 * triggers its owner, so it follows the owner's shard). The caches still hold all objects: a
 * reconcile may read any of them. A shard that comes is reconciled in full (its objects were
 * skipped while another replica held it); a shard that goes is released only after its
 * reconciles in flight have finished.
 *
 * Beside it, its private parts: the triggers (`triggers.ts`), the handler's cache reader
 * (`context.ts`; the context itself comes from the one builder, `../scope/context.ts`),
 * `ctx.apply()` (`applier.ts`, deciding no-op writes with `apply.ts`), and the requeueing of
 * failures (`failures.ts`). The controllers read the operator's scope (`../scope/scope.ts`).
 * @module
 */

import { withHandledObject } from "../../actions/handled_object.ts";
import type { Logger } from "../../actions/loggers.ts";
import { applyPatch } from "../../actions/application.ts";
import type { Informer, InformerCache } from "../../client/caching.ts";
import { checkFieldPaths } from "../../engines/runners/field_paths.ts";
import type { Memo } from "../../intents/contexts.ts";
import type {
  ObjectKey,
  ReconcileContext,
  ReconcileRegistration,
  ReconcileResult,
} from "../../intents/reconciliation.ts";
import { matchesBodyFilters } from "../../intents/registries.ts";
import { describeSelector, resolveSelector, type SelectorFields } from "../../intents/selectors.ts";
import { isMapping } from "../../structs/dicts.ts";
import { isLiteralNamespace, matchAnyNamespace } from "../../structs/namespaces.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { Patch } from "../../structs/patches.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import { sleep } from "../../util/backoff.ts";
import { WorkQueue } from "../../util/workqueue.ts";
import { effectiveShardKey, shardOfObject } from "../../structs/shards.ts";
import { handlerContext } from "../scope/context.ts";
import type { OperatorScope } from "../scope/scope.ts";
import { mergedEquals } from "./apply.ts";
import { ReconcileApplier } from "./applier.ts";
import { cacheReader } from "./context.ts";
import { requeueFailed } from "./failures.ts";
import { bookkeepingOf, controllerOf, isKey, worthReconciling } from "./triggers.ts";

/** Runs every reconcile handler of an operator over one shared informer cache. */
export class ReconcileControllers {
  /** The shared informer cache. */
  readonly cache: InformerCache;
  readonly #controllers: ReconcileController[];

  /**
   * @param scope The operator's parts, with the shared informer cache (the reconcile handlers'
   *   objects are kept there; it is disposed by its owner, the term). The reconciles wait for
   *   the scope's readiness gate of the indices, and for a resume while peering pauses.
   * @throws {TypeError} when the scope has no shared informer cache (no reconcile handlers).
   */
  constructor(scope: OperatorScope) {
    if (!scope.shared) throw new TypeError("The reconcile controllers need the shared cache");
    this.cache = scope.shared.cache;
    this.#controllers = scope.registry.reconcilers().map((r) =>
      new ReconcileController(scope, this.cache, r)
    );
  }

  /**
   * Sharded replicas: reconcile only the objects of these shards from now on.
   * @param shards The shards this replica holds now.
   * @returns Resolves when the reconciles in flight of the dropped shards have finished (or the
   *   grace period passed).
   */
  async serveShards(shards: ReadonlySet<number>): Promise<void> {
    await Promise.all(this.#controllers.map((c) => c.serveShards(shards)));
  }

  /** Runs until the signal aborts and the reconciles in flight are drained. */
  async run(): Promise<void> {
    await Promise.all(this.#controllers.map((c) => c.run()));
  }
}

/** One reconcile handler's controller. */
class ReconcileController {
  readonly #scope: OperatorScope;
  readonly #cache: InformerCache;
  readonly #registration: ReconcileRegistration;
  readonly #queue = new WorkQueue<string>();
  readonly #memos = new Map<string, Memo>();
  /** The reconciled, owned and watched resources, as resolved. */
  readonly #known: Resource[] = [];
  readonly #applier: ReconcileApplier;
  /** Reconciles running now, by key (so that a shard is released only after its reconciles). */
  readonly #running = new Map<string, Promise<void>>();
  /** Sharded replicas: the shards held (none until the coordinator says). */
  #shards: ReadonlySet<number> = new Set();
  #enqueueAll?: (shards: ReadonlySet<number>) => void;
  #resource!: Resource;
  #parents: Informer[] = [];
  #logger: Logger;

  constructor(scope: OperatorScope, cache: InformerCache, registration: ReconcileRegistration) {
    this.#scope = scope;
    this.#cache = cache;
    this.#registration = registration;
    this.#logger = scope.logger.child(["kopf", "reconcile"]);
    this.#applier = new ReconcileApplier({
      client: scope.client,
      cache,
      known: this.#known,
      fieldManager: registration.handler.fieldManager,
      logger: this.#logger,
      signal: scope.signal,
    });
  }

  async run(): Promise<void> {
    const { handler, selector } = this.#registration;
    const signal = this.#scope.signal;
    const resolved = await this.#resolve(selector);
    if (!resolved) return;
    this.#resource = resolved;
    await checkFieldPaths(this.#scope, resolved, [handler]); // a field its CRD cannot hold: warned
    const shared = this.#scope.shared!;
    const scopes = (resource: Resource) => shared.scopes(resource);
    const bookkeeping = bookkeepingOf(this.#scope.settings);
    const filtered = !this.#scope.clusterwide && !this.#scope.namespaces.every(isLiteralNamespace);
    const served = (namespace: string | undefined) =>
      !filtered || namespace === undefined ||
      matchAnyNamespace(this.#scope.namespaces, namespace);
    const enqueue = (key: ObjectKey) => {
      const namespace = this.#resource.namespaced ? key.namespace : undefined;
      if (served(namespace)) this.#queue.add(`${namespace ?? ""}/${key.name}`);
    };

    this.#parents = scopes(this.#resource).map((scope) =>
      this.#cache.informer(this.#resource, scope)
    );
    for (const informer of this.#parents) {
      informer.subscribe((event) => {
        const meta = event.object.metadata ?? {};
        if (event.type === "delete") {
          this.#memos.delete(`${meta.namespace ?? ""}/${meta.name}`);
          return;
        }
        if (worthReconciling(event, handler.statusChanges, bookkeeping)) {
          enqueue({ namespace: meta.namespace, name: meta.name ?? "" });
        }
      });
    }
    const related: Informer[] = [];
    for (const owned of handler.owns) {
      const resource = await this.#resolve(owned);
      if (!resource) return;
      for (const scope of scopes(resource)) {
        const informer = this.#cache.informer(resource, scope);
        related.push(informer);
        informer.subscribe((event) => {
          const owner = controllerOf(event.object, this.#resource);
          if (owner) enqueue({ namespace: event.object.metadata?.namespace, name: owner });
        });
      }
    }
    for (const watched of handler.watches) {
      const resource = await this.#resolve(watched.selector);
      if (!resource) return;
      for (const scope of scopes(resource)) {
        const informer = this.#cache.informer(resource, scope);
        related.push(informer);
        informer.subscribe((event) => {
          let keys;
          try {
            keys = watched.map(event.object);
          } catch (error) {
            this.#logger.error(`The watches map of ${handler.id} failed: ${error}`);
            return;
          }
          if (!keys) return;
          for (const key of isKey(keys) ? [keys] : keys) enqueue(key);
        });
      }
    }
    await Promise.race([
      Promise.all([...this.#parents, ...related].map((i) => i.ready)),
      new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true })),
    ]);
    if (signal.aborted) return;
    this.#logger.debug(`Reconciling ${resourceName(this.#resource)} with ${handler.id}.`);

    this.#enqueueAll = (shards) => {
      for (const informer of this.#parents) {
        for (const object of informer.list()) {
          if (!this.#served(object, shards)) continue;
          enqueue({ namespace: object.metadata?.namespace, name: object.metadata?.name ?? "" });
        }
      }
    };
    const resync = handler.resync
      ? setInterval(() => this.#enqueueAll?.(this.#shards), handler.resync * 1000)
      : undefined;
    try {
      await this.#queue.run((key, workerSignal) => this.#tracked(key, workerSignal), {
        concurrency: handler.concurrency,
        signal,
        graceMs: this.#scope.settings.process.gracePeriod * 1000,
      });
    } finally {
      clearInterval(resync);
    }
  }

  /**
   * Sharded replicas: from now on only the objects of these shards. The objects of shards that
   * came are enqueued (while another replica held them, their events were skipped here).
   */
  async serveShards(shards: ReadonlySet<number>): Promise<void> {
    const before = this.#shards;
    this.#shards = new Set(shards);
    const came = new Set([...shards].filter((shard) => !before.has(shard)));
    if (came.size) this.#enqueueAll?.(came);
    const dropped = new Set([...before].filter((shard) => !shards.has(shard)));
    if (!dropped.size || !this.#running.size) return;
    const leaving = [...this.#running].filter(([key]) => {
      const body = this.#bodyOf(key);
      return !body || this.#served(body, dropped);
    }).map(([, running]) => running);
    const grace = this.#scope.settings.process.gracePeriod * 1000;
    await Promise.race([Promise.all(leaving), sleep(grace, this.#scope.signal).catch(() => {})]);
  }

  /** Whether this replica reconciles the object (its shard is among these; no sharding: all). */
  #served(body: KubeObject, shards: ReadonlySet<number> = this.#shards): boolean {
    const space = this.#scope.sharding;
    if (!space) return true;
    const key = effectiveShardKey(space.key, this.#resource.namespaced);
    return shards.has(shardOfObject(body, key, space.count));
  }

  #bodyOf(key: string): KubeObject | undefined {
    if (!this.#resource) return undefined;
    const slash = key.indexOf("/");
    return this.#cache.get(this.#resource, key.slice(slash + 1), {
      namespace: key.slice(0, slash) || undefined,
    });
  }

  /** One reconcile, known while it runs (registered before its shard is checked). */
  async #tracked(key: string, workerSignal: AbortSignal): Promise<void> {
    const running = this.#reconcile(key, workerSignal);
    this.#running.set(key, running.catch(() => {}));
    try {
      await running;
    } finally {
      this.#running.delete(key);
    }
  }

  /** Resolves a selector to one resource, waiting (re-discovering) until it exists. */
  async #resolve(selector: SelectorFields): Promise<Resource | undefined> {
    const discovery = this.#scope.client.discovery;
    const signal = this.#scope.signal;
    let reported = false;
    while (!signal.aborted) {
      const resources = await discovery.resources(signal).catch(() => []);
      const { resources: found } = resolveSelector(selector, resources);
      if (found.length > 1) {
        this.#logger.warning(
          `${describeSelector(selector)} names ${found.length} resources; reconciling the first, ${
            resourceName(found[0]!)
          }. Name the group to choose.`,
        );
      }
      if (found[0]) {
        this.#known.push(found[0]);
        return found[0];
      }
      if (!reported) {
        this.#logger.warning(`${describeSelector(selector)} is not served (yet); waiting for it.`);
        reported = true;
      }
      await sleep(5000, signal).catch(() => {});
      await discovery.refresh(signal).catch(() => {});
    }
    return undefined;
  }

  async #reconcile(key: string, workerSignal: AbortSignal): Promise<void> {
    await this.#scope.readiness.wait(this.#scope.signal); // as cause handlers: never on a partial index
    const pause = this.#scope.pause;
    if (pause?.paused) {
      // Taken while paused: hold the key until the resume, then queue it again. Changes in the
      // meantime only mark it as added again (it is "processing"), so the resume brings one
      // reconcile, not this one plus another for the changes that came while it waited.
      await pause.resumed(this.#scope.signal);
      this.#queue.add(key);
      return;
    }
    if (this.#scope.signal.aborted) return;
    const { handler } = this.#registration;
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash) || undefined;
    const name = key.slice(slash + 1);
    let body = this.#cache.get(this.#resource, name, { namespace });
    if (!body || !this.#served(body)) {
      this.#queue.forget(key); // gone, or another replica's: its holder reconciles it
      return;
    }
    const logger = this.#scope.logger.forObject(body);
    const deleting = Boolean(body.metadata?.deletionTimestamp);
    const finalizer = handler.finalizer;
    const hasFinalizer = finalizer !== undefined &&
      (body.metadata?.finalizers ?? []).includes(finalizer);
    if (deleting && finalizer !== undefined && !hasFinalizer) return; // cleaned up already
    const memo = this.#memos.get(key) ?? { ...this.#scope.memo };
    this.#memos.set(key, memo);
    const patch = new Patch();
    let context = this.#context(body, patch, logger, memo, deleting, key, workerSignal);
    if (!hasFinalizer && !matchesBodyFilters(handler, body, () => context)) return;

    if (finalizer !== undefined && !deleting && !hasFinalizer) {
      const adding = new Patch();
      adding.addFinalizer(body, finalizer);
      const written = await this.#write(body, adding, logger);
      if (!written) return; // gone, or changed meanwhile: its next event brings it back
      body = written;
      context = this.#context(body, patch, logger, memo, deleting, key, workerSignal);
    }

    let result: ReconcileResult;
    let failure: unknown;
    try {
      result = await withHandledObject(
        { body },
        () => handler.fn(context as never) as ReconcileResult | Promise<ReconcileResult>,
      );
    } catch (error) {
      failure = error;
    }
    if (failure === undefined && deleting && hasFinalizer) patch.removeFinalizer(body, finalizer!);
    await this.#write(body, patch, logger);

    if (failure === undefined) {
      this.#queue.forget(key);
      const after = isMapping(result) ? result.requeueAfter : undefined;
      if (deleting && hasFinalizer) {
        logger.info(`Reconciled the deletion; the finalizer is removed.`);
      }
      if (typeof after === "number" && after >= 0) this.#queue.addAfter(key, after * 1000);
      return;
    }
    requeueFailed(this.#queue, handler, key, failure, logger);
  }

  /** Writes a patch unless it would change nothing; stores the result in the cache. */
  async #write(body: KubeObject, patch: Patch, logger: Logger): Promise<KubeObject | undefined> {
    if (patch.isEmpty) return body;
    if (!patch.jsonOps.length && !patch.fns.length && mergedEquals(body, patch.toJSON())) {
      return body;
    }
    const applied = await applyPatch(this.#scope.client.api, this.#resource, body, patch, {
      signal: this.#scope.signal,
      logger,
    });
    if (applied.state === "applied") {
      this.#cache.observe(this.#resource, applied.body);
      return applied.body;
    }
    if (applied.state === "unchanged") return body;
    return undefined;
  }

  /** The handler's context for one reconcile (built again when adding the finalizer wrote). */
  #context(
    body: KubeObject,
    patch: Patch,
    logger: Logger,
    memo: Memo,
    deleting: boolean,
    key: string,
    workerSignal: AbortSignal,
  ): ReconcileContext {
    const { settings, indexers, client } = this.#scope;
    const apply: ReconcileContext["apply"] = (object, options) =>
      this.#applier.apply(body, object as KubeObject, options ?? {}, workerSignal);
    return handlerContext(
      { resource: this.#resource, settings, indexers, client, signal: workerSignal },
      { body, memo, patch, logger, param: this.#registration.handler.param },
      {
        deleting,
        retry: this.#queue.retries(key),
        cache: cacheReader(this.#cache, this.#known, body.metadata?.namespace),
        apply,
      },
    );
  }
}
