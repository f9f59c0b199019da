/**
 * Kopf for Deno: Kubernetes operators from a few functions.
 *
 * Register handlers with {@link on}; run them with `kopf run handlers.ts` (see `cli.ts`) or
 * embed them with {@link operator}. Handlers receive one context object (`spec`, `status`,
 * `patch`, `logger`, `diff`, `retry`, `signal`, …); what they return goes to `status.<id>`.
 *
 * @example A minimal operator
 * ```ts
 * import { on } from "./mod.ts";
 *
 * on.create("kopfexamples", ({ spec, logger }) => {
 *   logger.info(`And here we are! Created with spec: ${JSON.stringify(spec)}`);
 *   return { message: "hello world" };
 * });
 * ```
 * @module
 */

export { on } from "./core/api/on.ts";
export type {
  ChangingOptions,
  DeleteOptions,
  FieldOptions,
  HandlerOptions,
  ResumeOptions,
  UpdateOptions,
} from "./core/api/on.ts";
export { event, type EventMessage, exception, info, warn } from "./core/api/events.ts";
export { configureLogging, type LogFormat, type LoggingOptions } from "./core/api/logging.ts";
export { operator, type OperatorOptions, OperatorStartError } from "./core/reactor/running.ts";
export {
  ErrorsMode,
  HandlerRetriesError,
  HandlerTimeoutError,
  PermanentError,
  TemporaryError,
} from "./core/actions/execution.ts";
export {
  allAtOnce,
  asap,
  getDefaultLifecycle,
  type Lifecycle,
  type LifecycleCandidate,
  oneByOne,
  randomized,
  setDefaultLifecycle,
  shuffled,
} from "./core/actions/lifecycles.ts";
export {
  buildObjectReference,
  type LogEntry,
  Logger,
  type LogListener,
  type ObjectRef,
} from "./core/actions/loggers.ts";
export type {
  ChangingContext,
  EventContext,
  Memo,
  ResourceContext,
  SubhandlerOptions,
} from "./core/intents/contexts.ts";
export {
  ABSENT,
  all_,
  any_,
  type MetaFilter,
  none_,
  not_,
  PRESENT,
  type ValueCallback,
  type ValueFilter,
  type WhenCallback,
} from "./core/intents/filters.ts";
export type { Reason } from "./core/intents/handlers.ts";
export {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "./core/intents/registries.ts";
export { EVERYTHING, type ResourceSpec, type SelectorFields } from "./core/intents/selectors.ts";
export {
  createSettings,
  DEFAULT_FINALIZER,
  type LogLevel,
  type OperatorSettings,
} from "./core/settings/settings.ts";
export {
  AnnotationsProgressStorage,
  MultiProgressStorage,
  type ProgressRecord,
  ProgressStorage,
  SmartProgressStorage,
  StatusProgressStorage,
} from "./core/settings/progress.ts";
export {
  AnnotationsDiffBaseStorage,
  DiffBaseStorage,
  MultiDiffBaseStorage,
  StatusDiffBaseStorage,
} from "./core/settings/diffbase.ts";
export { type Diff, type DiffItem, type DiffOperation } from "./core/structs/diffs.ts";
export { Patch } from "./core/structs/patches.ts";
export type { KubeList, KubeObject, ObjectMeta, OwnerReference } from "./core/structs/objects.ts";
export type { Resource } from "./core/structs/resources.ts";
export { type ConnectOptions, KubeClient } from "./core/client/client.ts";
export { KubeApi } from "./core/client/api.ts";
export { autoConfigure, ConfigError, loadInCluster, loadKubeconfig } from "./core/client/config.ts";
export type { ConnectionInfo, Credentials } from "./core/client/connection.ts";
export { ApiError, TransportError } from "./core/client/errors.ts";
export { RequestCounters } from "./core/client/counters.ts";
export { objectEvents, watcher, type WatcherEvent } from "./core/client/watching.ts";
