/**
 * Private helpers of the reconcile controller (`reconciling.ts`): what a reconcile handler
 * receives — its context ({@link reconcileContext}) and its read access to the informer cache
 * ({@link cacheReader}).
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { CacheMissError, type InformerCache } from "../../client/caching.ts";
import type { IndexView, Memo } from "../../intents/contexts.ts";
import type { CacheReader, ReconcileContext } from "../../intents/reconciliation.ts";
import { matchesResource, parseSelector } from "../../intents/selectors.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { type KubeObject, objectFields } from "../../structs/objects.ts";
import type { KubeObjectLike } from "../../structs/typed.ts";
import type { Patch } from "../../structs/patches.ts";
import type { Resource } from "../../structs/resources.ts";

/** What a reconcile context holds besides the fields taken from the object's body. */
export interface ReconcileContextParts {
  /** The reconciled resource. */
  readonly resource: Resource;
  /** Collects the handler's changes to the object (written after it returns). */
  readonly patch: Patch;
  /** The object's logger. */
  readonly logger: Logger;
  /** The object's memo. */
  readonly memo: Memo;
  /** The handler's `param`. */
  readonly param: unknown;
  /** Operator settings. */
  readonly settings: OperatorSettings;
  /** The operator's indices. */
  readonly indices: Readonly<Record<string, IndexView>>;
  /** The object is being deleted. */
  readonly deleting: boolean;
  /** Retries since the last success. */
  readonly retry: number;
  /** Aborts the handler (the worker's signal). */
  readonly signal: AbortSignal;
  /** Read access to the informer cache. */
  readonly cache: CacheReader;
  /** The operator's client (the one `apply` writes with). */
  readonly client: KubeClient;
  /** `ctx.apply()`. */
  readonly apply: ReconcileContext["apply"];
}

/**
 * The context of one reconcile of one object.
 *
 * @param body The object as cached (or as just written).
 * @param parts Everything else the handler receives.
 * @returns The handler's context; the indices also as top-level fields, as for cause handlers.
 */
export function reconcileContext(body: KubeObject, parts: ReconcileContextParts): ReconcileContext {
  const indices = parts.indices;
  return {
    ...objectFields(body),
    resource: parts.resource,
    patch: parts.patch,
    logger: parts.logger,
    memo: parts.memo,
    param: parts.param,
    settings: parts.settings,
    signal: parts.signal,
    indices,
    deleting: parts.deleting,
    retry: parts.retry,
    cache: parts.cache,
    client: parts.client,
    apply: parts.apply,
    // As for cause handlers (and in Kopf), indices are also passed by their names and win over
    // the built-in names.
    ...indices,
  };
}

/**
 * A handler's read access to the informer cache, limited to the resources the controller
 * caches (the reconciled, owned and watched ones).
 *
 * @param cache The shared informer cache.
 * @param known The resources the controller resolved (filled as it starts).
 * @param namespace The reconciled object's namespace: the default of both reads.
 * @returns The reader; it throws a {@link CacheMissError} for a resource not among `known`.
 */
export function cacheReader(
  cache: InformerCache,
  known: readonly Resource[],
  namespace: string | undefined,
): CacheReader {
  const find = (name: string) => lookup(known, name);
  return {
    get<T extends KubeObjectLike = KubeObject>(resource: string, name: string, ns?: string) {
      return cache.get<T>(find(resource), name, { namespace: ns ?? namespace });
    },
    list<T extends KubeObjectLike = KubeObject>(
      resource: string,
      options: {
        readonly namespace?: string | null;
        readonly labels?: Readonly<Record<string, string>>;
      } = {},
    ) {
      const ns = options.namespace === null ? undefined : options.namespace ?? namespace;
      return cache.list<T>(find(resource), { namespace: ns, labels: options.labels });
    },
  };
}

/** The known resource a handler names (`configmaps`, `deployments.apps`), or a cache miss. */
function lookup(known: readonly Resource[], name: string): Resource {
  const selector = parseSelector(name);
  const found = known.find((r) => matchesResource(selector, r));
  if (!found) throw new CacheMissError(name);
  return found;
}
