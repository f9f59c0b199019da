/**
 * The cluster's object semantics: create (generateName, uid, creationTimestamp, generation,
 * type defaults, namespace checks), get, consistent paginated lists with selectors, update and
 * patch (resourceVersion conflicts, `/status` rules, generation bumps, finalizer rules, no-op
 * detection), and the scheduling of the background controllers (`controllers.ts`).
 * Deletion lives in `deletion.ts`.
 * @module
 */

import {
  alreadyExists,
  ApiFailure,
  badRequest,
  conflict,
  forbidden,
  invalid,
  methodNotAllowed,
  notFound,
} from "./errors.ts";
import { FieldOwnership } from "./applying.ts";
import { jsonPatch, mergePatch, type PatchKind, strategicMergePatch } from "./patching.ts";
import { CRDS, NAMESPACES, Registry, validateCrd } from "./registry.ts";
import { IpAllocator, normalize, prepareForCreate, validateUpdate } from "./builtins.ts";
import {
  accept,
  encodeContinue,
  finalizersOf,
  idOf,
  listVersion,
  pruneObject,
  specOf,
  validateName,
} from "./schema.ts";
import { parseFieldSelector, parseLabelSelector } from "./selectors.ts";
import { parseShardSelector } from "./sharding.ts";
import { Store, type StoreOptions } from "./storage.ts";
import {
  clone,
  deepEqual,
  groupVersion,
  isObject,
  type KubeObject,
  nowTimestamp,
  type ResourceDef,
  resourceKey,
} from "./types.ts";

/** Query of a list request. */
export interface ListQuery {
  /** Label selector. */
  readonly labelSelector?: string | null;
  /** Field selector. */
  readonly fieldSelector?: string | null;
  /** Shard selector (`shardRange(…) || …`, see sharding.ts). */
  readonly shardSelector?: string | null;
  /** Page size (0 or absent: everything). */
  readonly limit?: number;
  /** Continue token from a previous page. */
  readonly continue?: string | null;
  /** resourceVersion to list at (only honoured with `resourceVersionMatch=Exact`). */
  readonly resourceVersion?: string | null;
  /** `Exact` or `NotOlderThan`. */
  readonly resourceVersionMatch?: string | null;
}

/** One page of a list. */
export interface ListPage {
  /** The objects (stored copies: do not mutate). */
  readonly items: KubeObject[];
  /** The version the list is consistent at. */
  readonly resourceVersion: string;
  /** Token for the next page, if any. */
  readonly continue?: string;
  /** Objects after this page (only without selectors). */
  readonly remainingItemCount?: number;
}

const NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789";
const DEFAULT_NAMESPACES = ["default", "kube-node-lease", "kube-public", "kube-system"];

/** Runs the background controllers once; returns whether anything changed. */
export type Reconciler = (cluster: Cluster) => boolean;

/** The objects and their semantics. */
export class Cluster {
  /** The served resources. */
  readonly registry: Registry = new Registry();
  /** The object store. */
  readonly store: Store;
  /** The CA that namespaces get in their `kube-root-ca.crt` ConfigMap. */
  readonly caPem: string;
  #reconcile: Reconciler;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #waiters: Array<() => void> = [];
  #stopped = false;
  #ips = new IpAllocator();
  #fields = new FieldOwnership();

  /**
   * Creates a cluster with the default namespaces.
   *
   * @param reconcile The background controllers (CRDs, garbage collection, namespaces).
   * @param options Store options.
   */
  constructor(reconcile: Reconciler, options: StoreOptions & { readonly caPem?: string } = {}) {
    this.store = new Store(options);
    this.caPem = options.caPem ?? "";
    this.#reconcile = reconcile;
    for (const name of DEFAULT_NAMESPACES) this.create(NAMESPACES, "", { metadata: { name } });
  }

  /** The object as served in `version`: with `apiVersion` and `kind`. */
  present(def: ResourceDef, object: KubeObject, version = def.versions[0]!): KubeObject {
    const { apiVersion: _a, kind: _k, ...rest } = def.convert ? def.convert.out(object) : object;
    return { apiVersion: groupVersion(def.group, version), kind: def.kind, ...rest };
  }

  /** Reads an object; throws 404 NotFound. */
  get(def: ResourceDef, namespace: string, name: string): KubeObject {
    const object = this.store.get(resourceKey(def), def.namespaced ? namespace : "", name);
    if (!object) throw notFound(def, name);
    return object;
  }

  /** Lists one page of objects, consistent at one resourceVersion across pages. */
  list(def: ResourceDef, namespace: string | undefined, query: ListQuery = {}): ListPage {
    const label = parseLabelSelector(query.labelSelector);
    const field = parseFieldSelector(query.fieldSelector, def);
    const shard = parseShardSelector(query.shardSelector)?.matches ?? (() => true);
    const ns = def.namespaced ? namespace : undefined;
    const key = resourceKey(def);
    const { rv, start } = listVersion(this.store, query);
    const all = this.store.listAt(key, ns, rv);
    const matching = all.filter((o) => idOf(o) > start && label(o) && field(o) && shard(o));
    const limit = query.limit ?? 0;
    if (limit <= 0 || matching.length <= limit) {
      return { items: matching, resourceVersion: String(rv) };
    }
    const items = matching.slice(0, limit);
    const filtered = Boolean(query.labelSelector || query.fieldSelector || query.shardSelector);
    return {
      items,
      resourceVersion: String(rv),
      continue: encodeContinue(rv, idOf(items.at(-1)!)),
      ...(filtered ? {} : { remainingItemCount: matching.length - limit }),
    };
  }

  /** Creates an object; throws 400/403/404/405/409/422 as the API server would. */
  create(def: ResourceDef, namespace: string, body: unknown, version?: string): KubeObject {
    const object = accept(def, body, version);
    const meta = object.metadata!;
    if (meta.resourceVersion) {
      throw new ApiFailure(500, "", "resourceVersion should not be set on objects to be created");
    }
    if (def.namespaced) {
      if (meta.namespace && meta.namespace !== namespace) {
        throw badRequest(
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = namespace;
    } else {
      delete meta.namespace;
    }
    if (!meta.name && typeof meta.generateName === "string" && meta.generateName) {
      meta.name = meta.generateName + Array.from(
        crypto.getRandomValues(new Uint8Array(5)),
        (b) => NAME_CHARS[b % NAME_CHARS.length],
      ).join("");
    }
    const name = typeof meta.name === "string" ? meta.name : "";
    validateName(def, name);
    if (def.namespaced) this.#admitInto(def, namespace, name);
    if (def.crd && this.store.get(resourceKey(CRDS), "", def.crd)?.metadata?.deletionTimestamp) {
      throw methodNotAllowed("create not allowed while custom resource definition is terminating");
    }
    if (this.store.get(resourceKey(def), def.namespaced ? namespace : "", name)) {
      throw alreadyExists(def, name);
    }
    for (const field of ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"]) {
      delete meta[field];
    }
    delete meta.selfLink;
    delete meta.managedFields;
    meta.uid = crypto.randomUUID();
    meta.creationTimestamp = nowTimestamp();
    if (def.generation) meta.generation = 1;
    else delete meta.generation;
    prepareForCreate(def, object, this.#ips);
    this.#validate(def, object);
    const stored = this.store.write("ADDED", resourceKey(def), object);
    this.schedule();
    return stored;
  }

  /** Replaces an object (or its `status`/`finalize` subresource); 404/409/422 on failures. */
  update(
    def: ResourceDef,
    namespace: string,
    name: string,
    body: unknown,
    subresource?: string,
    version?: string,
    patching = false,
  ): KubeObject {
    const object = accept(def, body, version);
    const meta = object.metadata!;
    if (!meta.name) {
      throw badRequest(
        `the name of the object (${name} based on URL) was undeterminable: name must be provided`,
      );
    }
    if (meta.name !== name) {
      throw badRequest(
        `the name of the object (${meta.name}) does not match the name on the URL (${name})`,
      );
    }
    if (def.namespaced && meta.namespace && meta.namespace !== namespace) {
      throw badRequest(
        "the namespace of the provided object does not match the namespace sent on the request",
      );
    }
    const old = this.get(def, namespace, name);
    if (def.crd && !meta.resourceVersion && !patching) {
      throw new ApiFailure(
        422,
        "Invalid",
        `${def.plural}.${def.group} "${name}" is invalid: metadata.resourceVersion: Invalid ` +
          `value: 0: must be specified for an update`,
        {
          name,
          group: def.group,
          kind: def.plural,
          causes: [{
            reason: "FieldValueInvalid",
            message: "Invalid value: 0: must be specified for an update",
            field: "metadata.resourceVersion",
          }],
        },
      );
    }
    if (meta.resourceVersion && meta.resourceVersion !== old.metadata?.resourceVersion) {
      throw conflict(def, name);
    }
    let next: KubeObject;
    if (subresource === "status") {
      next = { ...clone(old), status: clone(object.status) };
      if (object.status === undefined) delete next.status;
      this.#validate(def, next);
    } else {
      next = object;
      const o = old.metadata ?? {};
      for (const field of ["uid", "creationTimestamp", "deletionTimestamp", "namespace"] as const) {
        if (o[field] === undefined) delete meta[field];
        else meta[field] = o[field];
      }
      if (o.deletionGracePeriodSeconds === undefined) delete meta.deletionGracePeriodSeconds;
      else meta.deletionGracePeriodSeconds = o.deletionGracePeriodSeconds;
      if (o.generation === undefined) delete meta.generation;
      else meta.generation = o.generation;
      delete meta.managedFields;
      delete meta.selfLink;
      if (def.subresources.includes("status")) {
        if (old.status === undefined) delete next.status;
        else next.status = clone(old.status);
      }
      if (def === NAMESPACES) {
        // Only `/finalize` changes a namespace's spec.finalizers; the main endpoint keeps them.
        const spec = isObject(next.spec) ? next.spec : {};
        const finalizers = subresource === "finalize" ? finalizersOf(spec) : finalizersOf(old.spec);
        next.spec = { ...spec, finalizers: clone(finalizers) };
      }
      if (o.deletionTimestamp) {
        const added = (meta.finalizers ?? []).filter((f) => !(o.finalizers ?? []).includes(f));
        if (added.length) {
          const message = `Forbidden: no new finalizers can be added if the object is being ` +
            `deleted, found new finalizers []string{${added.map((f) => `"${f}"`).join(", ")}}`;
          throw invalid(def, name, [
            { reason: "FieldValueForbidden", message, field: "metadata.finalizers" },
          ]);
        }
      }
      this.#validate(def, next);
      validateUpdate(def, old, next);
    }
    if (def.generation && !deepEqual(specOf(def, old), specOf(def, next))) {
      next.metadata = { ...next.metadata, generation: (old.metadata?.generation ?? 0) + 1 };
    }
    return this.commit(def, old, next);
  }

  /** Patches an object (or its subresource); the result goes through {@link update}. */
  patch(
    def: ResourceDef,
    namespace: string,
    name: string,
    kind: PatchKind,
    patch: unknown,
    subresource?: string,
    version?: string,
  ): KubeObject {
    if (kind !== "json" && !isObject(patch)) {
      throw badRequest(
        `error decoding patch: json: cannot unmarshal ${
          Array.isArray(patch) ? "array" : typeof patch
        } into Go value of type map[string]interface {}`,
      );
    }
    const current = this.present(def, this.get(def, namespace, name), version);
    const patched = kind === "json"
      ? jsonPatch(current, patch)
      : kind === "merge"
      ? mergePatch(current, patch)
      : strategicMergePatch(current, patch);
    if (!isObject(patched)) throw badRequest("the patch does not produce an object");
    return this.update(def, namespace, name, patched, subresource, version, true);
  }

  /**
   * Server-side apply (see `applying.ts` for the subset of field ownership served): creates the
   * object when missing, else merges the applied fields as `manager`.
   *
   * @returns The stored object and whether it was created.
   */
  apply(
    def: ResourceDef,
    namespace: string,
    name: string,
    body: unknown,
    options: { manager: string; force: boolean; subresource?: string; version?: string },
  ): { object: KubeObject; created: boolean } {
    if (!isObject(body)) throw badRequest("the applied configuration is not an object");
    const applied = body as KubeObject;
    const given = applied.metadata?.name;
    if (given !== name) {
      throw badRequest(
        `the name of the object (${given ?? ""}) does not match the name on the URL (${name})`,
      );
    }
    const stored = this.store.get(resourceKey(def), def.namespaced ? namespace : "", name);
    if (!stored && options.subresource) throw notFound(def, name);
    const current = stored ? this.present(def, stored, options.version) : undefined;
    const scope = options.subresource === "status" ? ".status" : "";
    const { object, commit } = this.#fields.apply(
      current,
      applied,
      options.manager,
      options.force,
      scope,
    );
    const result = current
      ? this.update(def, namespace, name, object, options.subresource, options.version, true)
      : this.create(def, namespace, object, options.version);
    commit(result.metadata?.uid ?? "");
    return { object: result, created: !current };
  }

  /**
   * Stores a new state of an existing object: nothing happens when nothing changed; a state
   * with a deletionTimestamp and no finalizers left is deleted instead.
   *
   * @param def The object's resource.
   * @param old The stored state.
   * @param next The new state.
   * @returns The stored state.
   */
  commit(def: ResourceDef, old: KubeObject, next: KubeObject): KubeObject {
    const meta = next.metadata = { ...next.metadata };
    meta.resourceVersion = old.metadata?.resourceVersion;
    next.apiVersion = old.apiVersion;
    if (Array.isArray(meta.finalizers) && meta.finalizers.length === 0) delete meta.finalizers;
    if (deepEqual(old, next)) return old;
    const finalized = meta.deletionTimestamp && !meta.finalizers?.length &&
      !(def === NAMESPACES && finalizersOf(next.spec).length);
    const stored = this.store.write(finalized ? "DELETED" : "MODIFIED", resourceKey(def), next);
    this.schedule();
    return stored;
  }

  /** Schedules a run of the background controllers (soon, once for many writes). */
  schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      for (let i = 0; i < 20 && this.#reconcile(this); i++) { /* until quiet */ }
      if (this.#timer === undefined) { for (const wake of this.#waiters.splice(0)) wake(); }
    }, 0);
  }

  /** Resolves once the background controllers have nothing left to do. */
  settled(): Promise<void> {
    if (this.#timer === undefined) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Stops scheduling controllers. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    for (const wake of this.#waiters.splice(0)) wake();
  }

  #admitInto(def: ResourceDef, namespace: string, name: string): void {
    const ns = this.store.get(resourceKey(NAMESPACES), "", namespace);
    if (!ns) throw notFound(NAMESPACES, namespace);
    if (ns.metadata?.deletionTimestamp) {
      const why = `unable to create new content in namespace ${namespace} because it is being ` +
        `terminated`;
      const failure = forbidden(def, name, why);
      throw new ApiFailure(failure.code, failure.reason, failure.message, {
        ...failure.details,
        causes: [{ reason: "NamespaceTerminating", message: why, field: "metadata.namespace" }],
      });
    }
  }

  #validate(def: ResourceDef, object: KubeObject): void {
    normalize(def, object);
    if (def === CRDS) {
      const causes = validateCrd(object);
      if (causes.length) throw invalid(def, object.metadata?.name ?? "", causes);
    }
    if (def.crd) {
      const causes = pruneObject(def, object);
      if (causes.length) throw invalid(def, object.metadata?.name ?? "", causes);
    }
  }
}
