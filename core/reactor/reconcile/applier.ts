/**
 * Private helper of the reconcile controller (`reconciling.ts`): `ctx.apply()`, server-side
 * apply that sends nothing when the cache already shows the applied state (see
 * `apply.ts` for how that is decided).
 * @module
 */

import { applyObject } from "../../client/applying.ts";
import { CacheMissError, type InformerCache } from "../../client/caching.ts";
import type { ReconcileApplyOptions } from "../../intents/reconciliation.ts";
import { deepEqual } from "../../structs/dicts.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import type { OperatorScope } from "../scope/scope.ts";
import { contains, firstDifference } from "./apply.ts";

/**
 * What a {@link ReconcileApplier} needs: the operator's client (`ctx.apply()` writes and
 * discovers with it) and its stop signal, with the controller's logger, and what is its own.
 */
export type ReconcileApplierDeps = Pick<OperatorScope, "client" | "logger" | "signal"> & {
  /** The shared informer cache (read, and told of what was stored). */
  readonly cache: InformerCache;
  /** The resources the controller resolved (filled as it starts); others are discovered. */
  readonly known: readonly Resource[];
  /** The handler's field manager (the default of `ctx.apply()`'s option). */
  readonly fieldManager: string;
};

/** `ctx.apply()` of one reconcile handler, remembering what each field manager applied last. */
export class ReconcileApplier {
  readonly #deps: ReconcileApplierDeps;
  /** The last applied configuration by resource, namespace, name, manager and subresource. */
  readonly #applied = new Map<string, KubeObject>();

  /**
   * An applier that remembers nothing yet (the first apply of each object is compared with the
   * cache only).
   * @param deps Collaborators.
   */
  constructor(deps: ReconcileApplierDeps) {
    this.#deps = deps;
  }

  /**
   * Server-side apply of an object, unless the cache shows every stated field already and this
   * manager applied the same configuration last time (a field dropped from it must be sent, for
   * the server to remove it).
   *
   * @param parent The reconciled object (its namespace is the default).
   * @param object The applied configuration.
   * @param options Field manager, force, subresource.
   * @param signal Aborts the request.
   * @returns The object as stored, or as cached when nothing was sent.
   */
  async apply(
    parent: KubeObject,
    object: KubeObject,
    options: ReconcileApplyOptions,
    signal: AbortSignal,
  ): Promise<KubeObject> {
    const resource = await this.#resourceOf(object);
    const desired = structuredClone(object) as KubeObject;
    const meta = desired.metadata ??= {};
    if (resource.namespaced) meta.namespace ??= parent.metadata?.namespace;
    else delete meta.namespace;
    const manager = options.fieldManager ?? this.#deps.fieldManager;
    const subresource = options.subresource;
    const memory = [resourceName(resource), meta.namespace, meta.name, manager, subresource ?? ""]
      .join("|");
    const cache = this.#deps.cache;
    let cached: KubeObject | undefined;
    try {
      cached = cache.get(resource, meta.name ?? "", { namespace: meta.namespace });
    } catch (error) {
      if (!(error instanceof CacheMissError)) throw error;
    }
    const stated = subresource === "status"
      ? { status: desired.status }
      : resource.subresources.includes("status")
      ? withoutStatus(desired)
      : desired;
    const last = this.#applied.get(memory);
    if (cached && contains(cached, stated) && (last === undefined || deepEqual(last, desired))) {
      this.#applied.set(memory, desired);
      return cached;
    }
    const logger = this.#deps.logger;
    if (cached && logger.isEnabledFor("debug")) {
      const where = firstDifference(cached, stated) ?? "(the fields applied before)";
      logger.debug(`Applying ${resourceName(resource)} ${meta.name}: differs at ${where}.`);
    }
    const stored = await applyObject(this.#deps.client.api, resource, desired, {
      fieldManager: manager,
      force: options.force ?? true,
      subresource,
      signal,
    });
    cache.observe(resource, stored);
    this.#applied.set(memory, desired);
    return stored;
  }

  /** The resource of an applied object's apiVersion and kind: a known one, else discovered. */
  async #resourceOf(object: KubeObject): Promise<Resource> {
    const [group, version] = (object.apiVersion ?? "").includes("/")
      ? object.apiVersion!.split("/") as [string, string]
      : ["", object.apiVersion ?? ""];
    const matches = (r: Resource) =>
      r.group === group && r.version === version && r.kind === object.kind;
    const known = this.#deps.known.find(matches);
    if (known) return known;
    const [found] = await this.#deps.client.discovery.find(matches, this.#deps.signal);
    if (!found) {
      throw new TypeError(
        `ctx.apply(): no resource serves apiVersion '${object.apiVersion}' kind '${object.kind}'; ` +
          `check both fields of the applied object`,
      );
    }
    return found;
  }
}

/** The object without its status (applied separately, through the status subresource). */
function withoutStatus(object: KubeObject): KubeObject {
  const { status: _ignored, ...rest } = object;
  return rest;
}
