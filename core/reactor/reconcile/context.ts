/**
 * Private helper of the reconcile controller (`reconciling.ts`): a reconcile handler's read
 * access to the informer cache ({@link cacheReader}), one of the reconcile context's own fields
 * (the context is built by the one builder, `handlerContext()` in `../scope/context.ts`).
 * @module
 */

import { CacheMissError, type InformerCache } from "../../client/caching.ts";
import type { CacheReader } from "../../intents/reconciliation.ts";
import { matchesResource, parseSelector } from "../../intents/selectors.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { KubeObjectLike } from "../../structs/typed.ts";
import type { Resource } from "../../structs/resources.ts";

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
