/**
 * Kopf for Deno: Kubernetes operators from a few functions.
 *
 * Register handlers with {@link on}; run them with `kopf run handlers.ts` (see `cli.ts`) or
 * embed them with {@link operator}. Handlers receive one context object (`spec`, `status`,
 * `patch`, `logger`, `diff`, `retry`, `signal`, …); what they return goes to `status.<id>`.
 *
 * This entry point is what handler code and its operator need: the `on.*` registrations and
 * their options, the handler contexts, filters, the errors handlers throw and catch, settings
 * and storages, `KubeClient` and typed resources, running and embedding, webhook servers.
 * Below it, on subpaths of their own: `@kopf/ts/client` (the API client's transport, raw API,
 * discovery, watching, informers), `@kopf/ts/tuning` (the work queue, the observer interface,
 * the registry's handler records), and the kits: `@kopf/ts/builtins`, `@kopf/ts/hierarchies`,
 * `@kopf/ts/conditions`, `@kopf/ts/metrics`, `@kopf/ts/emulator`, `@kopf/ts/testing`.
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
  Changing,
  ChangingOptions,
  Default,
  DeleteOptions,
  Eventing,
  FieldChanging,
  FieldOptions,
  HandlerOptions,
  On,
  ResumeOptions,
  TypedValueFilter,
  TypedValueOption,
  TypedValueOptions,
  UpdateOptions,
} from "./core/api/on.ts";
export {
  type BodyOf,
  type DiffOf,
  type DottedPath,
  type DottedValue,
  type EssenceOf,
  type FieldPathOf,
  type FieldValueOf,
  type IsTypedObject,
  type KubeObjectLike,
  type MergePatch,
  type ObjectOf,
  type PatchOf,
  type SpecOf,
  type StatusOf,
  TYPED,
  type TypedObject,
  type TypedPatch,
  type TypedShape,
} from "./core/structs/typed.ts";
export {
  type TypedResource,
  typedResource,
  type TypedResourceFields,
  type TypedResourceRef,
} from "./core/intents/typed_resources.ts";
export {
  type DeclaredPermission,
  declarePermissions,
  type DeclarePermissionsOptions,
  type RbacVerb,
} from "./core/api/permissions.ts";
export type { FieldContext, OldNewOf } from "./core/intents/contexts.ts";
export type { NotStorable, StorableResult } from "./core/structs/results.ts";
export { event, type EventMessage, exception, info, warn } from "./core/api/events.ts";
export { configureLogging, type LogFormat, type LoggingOptions } from "./core/api/logging.ts";
export {
  operator,
  type OperatorOptions,
  OperatorStartError,
} from "./core/reactor/lifetime/running.ts";
export {
  ErrorsMode,
  HandlerResultError,
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
  ExecuteOptions,
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
export type { Activity, HandlerId, Reason } from "./core/intents/handlers.ts";
export {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "./core/intents/registries.ts";
export { EVERYTHING, type ResourceSpec, type SelectorFields } from "./core/intents/selectors.ts";
export {
  type AdmissionSettings,
  type BackgroundSettings,
  createSettings,
  DEFAULT_FINALIZER,
  type ExecutionSettings,
  type LogLevel,
  type MetricsSettings,
  type NetworkingSettings,
  type OperatorSettings,
  type PeeringSettings,
  type PersistenceSettings,
  type PostingSettings,
  type ProcessSettings,
  type QueueingSettings,
  type ScanningSettings,
  type WatchingSettings,
} from "./core/settings/settings.ts";
export type { LeadershipSettings, ShardingSettings } from "./core/settings/scaling.ts";
export type { ShardKey } from "./core/structs/shards.ts";
export { LeadershipLostError } from "./core/engines/coordination/leadership.ts";
export {
  AnnotationsProgressStorage,
  type AnnotationsProgressStorageOptions,
  MultiProgressStorage,
  type ProgressFetchArgs,
  type ProgressPurgeArgs,
  type ProgressRecord,
  ProgressStorage,
  type ProgressStoreArgs,
  type ProgressTouchArgs,
  SmartProgressStorage,
  type SmartProgressStorageOptions,
  StatusProgressStorage,
  type StatusProgressStorageOptions,
} from "./core/settings/progress.ts";
export {
  AnnotationsDiffBaseStorage,
  type AnnotationsDiffBaseStorageOptions,
  type DiffBaseBuildArgs,
  type DiffBaseFetchArgs,
  DiffBaseStorage,
  type DiffBaseStorageOptions,
  type DiffBaseStoreArgs,
  type Essence,
  MultiDiffBaseStorage,
  StatusDiffBaseStorage,
  type StatusDiffBaseStorageOptions,
} from "./core/settings/diffbase.ts";
export type { AnnotationKeys, AnnotationKeysOptions } from "./core/settings/conventions.ts";
export {
  StatusFirstDiffBaseStorage,
  type StatusFirstDiffBaseStorageOptions,
  StatusFirstProgressStorage,
} from "./core/settings/status_first.ts";
export { type Diff, type DiffItem, type DiffOperation } from "./core/structs/diffs.ts";
export type { FieldPath, FieldSpec, JsonObject, JsonValue, Mapping } from "./core/structs/dicts.ts";
export { type JsonPatchOp, Patch, type PatchFn } from "./core/structs/patches.ts";
export type {
  Annotations,
  KubeList,
  KubeObject,
  Labels,
  ObjectMeta,
  OwnerReference,
} from "./core/structs/objects.ts";
export type { Resource } from "./core/structs/resources.ts";
export type { NamespacePattern } from "./core/structs/namespaces.ts";
export { type ConnectOptions, KubeClient } from "./core/client/client.ts";
export {
  ConfigError,
  type InClusterOptions,
  type KubeconfigOptions,
  loadInCluster,
  loadKubeconfig,
} from "./core/client/config.ts";
export type { ConnectionInfo } from "./core/client/connection.ts";
export { type ConnectionFields, connectionInfo } from "./core/client/connection_fields.ts";
export { LoginError } from "./core/client/vault.ts";
export {
  ApiError,
  type RequestInfo,
  type StatusDetails,
  TransportError,
} from "./core/client/errors.ts";
export { type Metrics, metrics } from "./core/api/metrics.ts";
export type {
  CounterMetric,
  GaugeMetric,
  HistogramMetric,
  HistogramOptions,
  MetricLabels,
  MetricOptions,
} from "./core/engines/observability/metrics_custom.ts";
export { ActivityError } from "./core/engines/runners/activities.ts";
export type { ActivityContext } from "./core/intents/contexts.ts";
export type { Activating, ActivityOptions, Probing } from "./core/api/on.ts";
export {
  daemon,
  type DaemonOptions,
  type Spawned,
  type SpawningOptions,
  timer,
  type TimerOptions,
} from "./core/api/spawning.ts";
export {
  DaemonStoppingReason,
  type SpawnedContext,
  type StoppingReason,
} from "./core/engines/runners/daemons.ts";
export { index, type Indexing, type IndexOptions } from "./core/api/indexing.ts";
export { Index, Store } from "./core/engines/runners/indexing.ts";
export type { IndexView } from "./core/intents/contexts.ts";
export { run, type RunningOperator, start } from "./core/api/embedding.ts";
export type { OperatorStats } from "./core/reactor/causes/orchestration.ts";
export type { AdmissionOptions, Admitting } from "./core/api/on.ts";
export type { AdmissionContext } from "./core/intents/contexts.ts";
export { AdmissionError } from "./core/engines/admission/admission.ts";
export {
  type CertificateIssuer,
  getDefaultCertificateIssuer,
  type IssuedServerCertificate,
  type LocalClusterServerOptions,
  setDefaultCertificateIssuer,
  WebhookAutoServer,
  WebhookK3dServer,
  WebhookMinikubeServer,
  WebhookServer,
  type WebhookServerOptions,
} from "./core/engines/admission/webhooks.ts";
export type {
  AdmissionRequest,
  AdmissionResponse,
  AdmissionReview,
  GroupVersionKind,
  GroupVersionResource,
  Headers,
  Operation,
  SSLPeer,
  UserInfo,
  WebhookClientConfig,
  WebhookClientConfigService,
  WebhookFn,
  WebhookFnOptions,
  WebhookServeFn,
  WebhookServeOptions,
  WebhookServerProtocol,
} from "./core/structs/admission.ts";
// Also installs the self-signed certificate issuer that webhook servers use by default.
export { selfSignedServerCertificate } from "./kits/certificates.ts";
export {
  reconcile,
  type ReconcileOptions,
  type Reconciling,
  type WatchesEntry,
} from "./core/api/reconciling.ts";
export type {
  CacheReader,
  ObjectKey,
  ReconcileApplyOptions,
  ReconcileContext,
  ReconcileResult,
} from "./core/intents/reconciliation.ts";
export { type ApplyConflict, ApplyConflictError } from "./core/client/applying.ts";
export { CacheMissError } from "./core/client/caching.ts";
export type { CachingSettings } from "./core/settings/settings.ts";
