/**
 * The Kubernetes API client beneath `KubeClient` (`@kopf/ts/client`): for code that talks to the
 * API server itself rather than through handlers.
 *
 * Handlers need none of this: their `client` is a `KubeClient` (from `@kopf/ts`), whose `api`
 * is a {@link KubeApi}. Here are the parts it is made of and the tools beside it:
 *
 * - object operations: {@link KubeApi} and its options; server-side apply: {@link applyObject};
 *   the requests a `Patch` becomes ({@link PatchRequests});
 * - the request funnel: {@link HttpClient} (retries, rate limit, deadlines), a replaceable
 *   {@link FetchFn}, raw byte streams, the request counters ({@link RequestCounters});
 * - configuration beyond `loadKubeconfig()`/`loadInCluster()`: {@link autoConfigure}, the
 *   {@link Credentials} interface;
 * - discovery: {@link Discovery};
 * - watching: {@link watcher} (list+watch, resume, relist, watchdog) and {@link objectEvents};
 * - the shared informer cache: {@link InformerCache}, {@link Informer}.
 *
 * The errors a request throws (`ApiError`, `TransportError`, `ConfigError`, `LoginError`,
 * `ApplyConflictError`, `CacheMissError`) are in `@kopf/ts`, beside `KubeClient`.
 *
 * @example A watch stream of ConfigMaps
 * ```ts
 * import { KubeClient } from "./mod.ts";
 * import { objectEvents, watcher } from "./client.ts";
 *
 * export async function follow(signal: AbortSignal): Promise<void> {
 *   using client = await KubeClient.connect();
 *   const resource = { group: "", version: "v1", plural: "configmaps", namespaced: true };
 *   const events = watcher(client.api, resource, { namespace: "default", signal });
 *   for await (const event of objectEvents(events)) {
 *     console.log(event.type, event.object.metadata?.name);
 *   }
 * }
 * ```
 * @module
 */

export {
  type BodyFor,
  type CallOptions,
  type DeleteOptions as ApiDeleteOptions,
  KubeApi,
  type ListOptions,
  type PatchOptions,
  type PatchType,
  type ResourceRef,
  type ResultOf,
  type WatchOptions,
} from "./core/client/api.ts";
export { applyObject, type ApplyOptions } from "./core/client/applying.ts";
export type { PatchRequests, PatchRequestsOptions } from "./core/structs/patches.ts";
export type { FetchFn, HttpClient, HttpClientOptions, HttpRequest } from "./core/client/http.ts";
export type { ByteStream } from "./core/client/raw_stream.ts";
export type { BackoffOptions } from "./core/util/backoff.ts";
export {
  RequestCounters,
  type RequestKey,
  type RequestListener,
  type Verb,
} from "./core/client/counters.ts";
export {
  autoConfigure,
  type AutoConfigureOptions,
  type EnvironmentOptions,
  type ReadFileFn,
} from "./core/client/config.ts";
export type { Credentials } from "./core/client/connection.ts";
export type { Discovery, DiscoveryOptions } from "./core/client/discovery.ts";
export {
  type ObjectEvent,
  objectEvents,
  WatchClientTimeoutError,
  watcher,
  type WatcherEvent,
  type WatcherOptions,
  WatchLineTooLongError,
  WatchStalledError,
  type WatchStartReason,
} from "./core/client/watching.ts";
export {
  type CacheEvent,
  type CacheListOptions,
  type CacheTransform,
  dropManagedFields,
  Informer,
  InformerCache,
  type InformerCacheOptions,
  type InformerScope,
  type TapOptions,
} from "./core/client/caching.ts";
