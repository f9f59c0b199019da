/**
 * Operator settings: one mutable object per operator, grouped in sections as in Kopf, with
 * Kopf's defaults unless noted. Startup handlers may change them before anything is watched.
 *
 * Durations are in seconds (as in Kopf) unless the field name says otherwise.
 * Deliberate differences from Kopf are marked "Differs from Kopf" and listed in docs/settings.md.
 * @module
 */

import type { WebhookServeFn, WebhookServerProtocol } from "../structs/admission.ts";
import { AnnotationsDiffBaseStorage, type DiffBaseStorage } from "./diffbase.ts";
import { type ProgressStorage, SmartProgressStorage } from "./progress.ts";
import {
  leadershipDefaults,
  type LeadershipSettings,
  shardingDefaults,
  type ShardingSettings,
} from "./scaling.ts";

export type { LeadershipSettings, ShardingSettings } from "./scaling.ts";

/** Log levels, lowest first. */
export type LogLevel = "debug" | "info" | "warning" | "error" | "critical";

/** Numeric order of {@link LogLevel}s, for comparisons. */
export const LOG_LEVELS: Readonly<Record<LogLevel, number>> = {
  debug: 10,
  info: 20,
  warning: 30,
  error: 40,
  critical: 50,
};

/**
 * `settings.process.pageOutDelay` under `kopf run`, in seconds: start-up (the kubeconfig,
 * discovery, the first requests) is over by then; a 5,000-object backlog peaked 15 MiB lower with
 * it than without, and 8 MiB lower when paged out at once instead (docs/performance.md, round 16).
 * Both are done since round 18: a 1,000-object backlog peaks 8 MiB lower again.
 */
export const PAGE_OUT_DELAY_S = 0.5;

/** `settings.process`: the operator process. */
export interface ProcessSettings {
  /**
   * After SIGTERM/SIGINT, `kopf run` exits forcefully (code 1, with a log line) if the graceful
   * exit takes longer (null: never); read when the signal arrives. Not applied when an embedding
   * program stops `operator()` through its signal. @default 600
   */
  ultimateExitingTimeout: number | null;
  /** Grace period for handlers and daemons to finish after the stop signal. @default 5 */
  gracePeriod: number;
  /**
   * After a burst of processing, once no cycle has run for this many seconds, one full garbage
   * collection gives the burst's memory back to the system, and the burst's spare kept-alive
   * connections are closed (null: never). Without it V8 keeps the pages of the peak for a long
   * time in an idle process. @default 10
   */
  idleGcDelay: number | null;
  /**
   * During a burst, one full garbage collection after every this many processing cycles (null:
   * never). V8 lets its heap fill with a burst's garbage between its own major collections, so
   * a backlog's peak grew by ~23 KiB per object; collecting every 4,000 cycles (a pause of a few
   * milliseconds) took a 5,000-object backlog's peak from 160 to ~130 MiB (docs/performance.md,
   * round 8). Not in Kopf. @default 4000
   */
  burstGcCycles: number | null;
  /**
   * As the operator starts (its modules loaded), this many seconds later, and again after each
   * idle collection (`idleGcDelay`), the executable's resident pages are given back to the system
   * (`madvise(MADV_PAGEOUT)` on the read-only mappings of `deno` or of the built binary; Linux
   * 5.4+, with the FFI permission and reading `/proc/self/maps` granted, as with `-A`). About
   * 30 MiB of machine code and read-only data are resident once an operator has started, much of
   * it used by start-up only; what is used again is read in again. Pages that another process
   * maps too (the same executable run twice) stay. With each page-out (here and within a burst,
   * `burstPageOutCycles`) the C allocator's free pages go back too (`malloc_trim(0)`, glibc
   * only): V8's background threads leave their arenas mostly free (round 21). `kopf run`, whose process is the operator's,
   * sets 0.5; an operator embedded in another program leaves the program's executable alone
   * unless it sets this. Not in Kopf. null: never. @default null
   */
  pageOutDelay: number | null;
  /**
   * While objects wait for their cycles (a listing's backlog, events waiting for their
   * workers), the executable's pages are also given back after every this many processing
   * cycles, but not within 2 s of the last page-out — only where the page-out is on
   * (`pageOutDelay` not null). Not in a steady load that keeps up: the code read back in after a
   * page-out stalled its next objects by 60–100 ms (round 19). A burst reads back
   * in the code it runs (5–8 MiB); code it ran once (start-up's relisting, V8's optimising
   * compiler at the burst's start) otherwise stays resident until the next idle collection: a
   * 5,000-object backlog peaked 9–10 MiB lower with it. Each page-out costs the operator 5–20 ms
   * of CPU with the code it reads back in, hence the 2 s: a flood of quick cycles (a backlog's
   * echoes of its own writes) would page out every few milliseconds (docs/performance.md,
   * round 17). Not in Kopf. null: only at start-up and after idle collections. @default 500
   */
  burstPageOutCycles: number | null;
}

/** `settings.posting`: object log messages posted as Kubernetes Events. */
export interface PostingSettings {
  /**
   * Post Events at all: the explicit `event()`, `info()`, `warn()`, `exception()`, and (with
   * `loggers`) object log messages. @default true
   */
  enabled: boolean;
  /**
   * Also post the object loggers' messages (the handlers' `logger` and the framework's own lines
   * such as "Handler 'x' succeeded.") as Events, as Kopf did before 1.44. Off by default since
   * Kopf 1.44, to spare the API server of large clusters. @default false
   */
  loggers: boolean;
  /** Lowest level that is posted. @default "info" */
  level: LogLevel;
  /** `reportingComponent` / `source.component` of Events. @default "kopf" */
  reportingComponent: string;
  /** `reportingInstance` of Events. @default "dev" */
  reportingInstance: string;
  /** Prefix of generated Event names. @default "kopf-event-" */
  eventNamePrefix: string;
  /**
   * Identical Events (same object, type, reason, message) within this window are folded into
   * one with a count, and at most `maxPerObjectPerWindow` distinct Events per object are posted
   * per window; the rest are counted and summarised. Differs from Kopf (which posts each one).
   * @default 5
   */
  aggregationWindow: number;
  /** See `aggregationWindow`. @default 10 */
  maxPerObjectPerWindow: number;
  /**
   * Retry delays (seconds) of a failed post of an explicit Event (`event()`, `info()`, `warn()`,
   * `exception()` without their own `backoffs`), one retry each, instead of
   * `networking.errorBackoffs`. As Kopf 1.45's `default_backoffs`. @default [1, 1, 2, 3, 5, 8, 13, 21]
   */
  defaultBackoffs: number[];
  /**
   * Retry delays (seconds) of a failed post of an Event from a log message (with `loggers` on):
   * shorter, as those are many. As Kopf 1.45's `logging_backoffs`. @default [1, 1, 2, 3, 5]
   */
  loggingBackoffs: number[];
}

/** `settings.caching`: the shared informer cache of reconcile handlers (see docs/reconcile.md). */
export interface CachingSettings {
  /**
   * Drop `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
   * annotation from cached objects: memory the operator never reads. @default true
   */
  dropManagedFields: boolean;
}

/** `settings.peering`: cooperation of several operators (see docs/peering.md). */
export interface PeeringSettings {
  /** Peering object name. @default "default" */
  name: string;
  /** Operator priority: the highest live one works, the others pause. @default 0 */
  priority: number;
  /** Wait (paused) until the peering object exists, instead of running standalone. @default false */
  mandatory: boolean;
  /** Run without peering. @default false */
  standalone: boolean;
  /** Do not log the keep-alives (they are sent anyway). @default false */
  stealth: boolean;
  /** Seconds a peer is considered alive after its last keep-alive. @default 60 */
  lifetime: number;
  /**
   * Cluster-wide peering (ClusterKopfPeering) instead of namespaced (KopfPeering); set to true
   * for cluster-wide operators before the startup handlers run. @default false
   */
  clusterwide: boolean;
  /** The inverse of `clusterwide`. @default true */
  namespaced: boolean;
}

/** `settings.watching`: watch streams. */
export interface WatchingSettings {
  /**
   * Longest wait for a watch request's response headers, in seconds (null: networking's
   * connectTimeout, then networking.requestTimeout). Deno's fetch has no TCP-connect timeout of
   * its own, so this covers everything until the headers arrive. @default null
   */
  connectTimeout: number | null;
  /** `timeoutSeconds` sent to the server for each watch request. Differs from Kopf (null). @default 300 */
  serverTimeout: number | null;
  /**
   * Total client-side duration of one watch request, in seconds (null: forever); the watch is
   * then resumed from the last resourceVersion. @default null
   */
  clientTimeout: number | null;
  /** Pause between watch reconnections. @default 0.1 */
  reconnectBackoff: number;
  /**
   * A stream with no events and no bookmarks for this long is considered stalled and reopened.
   * kube-apiserver sends a bookmark about every minute (60 s after the request, then every 60 s,
   * and 2 s before its timeout), also on a resource nothing changes, so 90 s notices a silently
   * lost connection while the server still has the missed events, with room for a late bookmark.
   * A first silence is logged at INFO, a second in a row at WARNING. Kopf 1.44+ has 70 s
   * (`inactivity_timeout`). @default 90
   */
  inactivityTimeout: number;
  /**
   * Server-side label selectors by resource, for every list and watch of the matching resources
   * regardless of the handlers' own filters; several matching entries are joined ("and"). Keys
   * name resources as handlers do, or as Kopf 1.45's `label_selectors`
   * (`"kopf.dev/kopfexamples"`). @default {}
   */
  labelSelectors: Record<string, string>;
  /** Server-side field selectors by resource, as {@link WatchingSettings.labelSelectors}. @default {} */
  fieldSelectors: Record<string, string>;
  /**
   * Start each stream with a streaming list (`sendInitialEvents=true`; Kubernetes 1.34+) instead
   * of a paged list: the objects come as the watch's first events. As Kopf 1.45's
   * `initial_streaming`. @default false
   */
  initialStreaming: boolean;
  /**
   * Objects per page of the initial and recovery lists (`limit`), handed on page by page; `null`
   * or `0`: one request for all. As Kopf 1.45's `chunk_size`, whose default is `None` (one
   * request); here 500, as client-go's informers page. @default 500
   */
  chunkSize: number | null;
  /**
   * Objects nested deeper than this (managed fields included) are refused as they arrive: their
   * handlers do not run, one error line (and an Event) names the object and this limit, and
   * every other object is handled as usual; a deletion still reaches the operator, with the
   * object's metadata only. The framework's copies and diffs of such objects would overflow the
   * stack, and the API server stores objects up to 10,000 levels deep. Not in Kopf.
   * `Infinity` lifts the limit. @default 1000
   */
  maxDepth: number;
}

/** `settings.queueing` (Kopf's `batching`): per-object workers. */
export interface QueueingSettings {
  /** Maximum concurrently processed objects per watch stream (null: unlimited). @default null */
  workerLimit: number | null;
  /**
   * At most this many processing cycles at once outside handler code — detecting causes,
   * waiting for their patch — across all resources; further objects wait for their turn (their
   * events keep coalescing meanwhile). Cycles whose handlers run do not count, so slow handlers
   * are never held up by it. It keeps a burst or a backlog from starting thousands of cycles
   * that would only queue at the API server, holding their memory (docs/performance.md).
   * `null`: unlimited. @default 64
   */
  admissionLimit: number | null;
  /**
   * While a stream lists its objects, it reads the next listed object only while fewer than
   * this many of its objects wait for their first processing cycle (null: it reads on at once).
   * The listing's pages then arrive as fast as they are processed, and a backlog of thousands of
   * objects is not held in memory all at once (not with `watching.initialStreaming`, whose
   * objects come over a watch, which must be read on). A listing is held up for 45 seconds in
   * all at most (then it reads on), so that its pages' continue tokens cannot expire and the
   * watch that follows starts within the API server's 75-second watch-cache window. Not in Kopf.
   * @default 300
   */
  listingBacklog: number | null;
  /** An idle per-object worker exits after this long. @default 5 */
  idleTimeout: number;
  /**
   * A worker woken by an event first waits this long, so that a burst of events of one object
   * is coalesced to the latest. 0 (the default, as in later Kopf versions) processes at once;
   * events arriving while a cycle runs are coalesced either way. @default 0
   */
  batchWindow: number;
  /**
   * Batch as Kopf 1.3x does (`batching.batch_window`): every event from the watch — an
   * object's first one included — waits until its object has had no newer event for
   * `batchWindow` seconds (Kopf's 0.1 s when `batchWindow` is 0); each newer event restarts the
   * wait. Off (the default), a new object's first event is processed at once and `batchWindow`
   * is one fixed wait after a later event. Turn it on for operators written for Kopf that
   * depend on its ordering, e.g. a parent's creation writing its status before a child's
   * handler does (docs/settings.md). @default false
   */
  kopfBatching: boolean;
  /** Time for workers to finish when their watch stream stops. @default 2 */
  exitTimeout: number;
  /** Per-object delays after unexpected errors; the last one repeats. @default Fibonacci 1…610 */
  errorDelays: number[];
}

/** `settings.scanning`: observation of namespaces and CRDs. */
export interface ScanningSettings {
  /** Disable dynamic observation; serve what exists at startup only. @default false */
  disabled: boolean;
}

/** `settings.admission`: admission webhooks (on.validate, on.mutate). */
export interface AdmissionSettings {
  /**
   * The webhook server or tunnel, e.g. `new WebhookServer({ port: 9443 })`; required when
   * admission handlers exist (the operator refuses to start without one). @default null
   */
  server: WebhookServerProtocol | WebhookServeFn | null;
  /**
   * Name of the Validating/MutatingWebhookConfiguration objects the operator creates and keeps
   * in sync (e.g. `"auto.kopf.dev"`); `null`: configure them yourself. @default null
   */
  managed: string | null;
  /**
   * Admission requests nested deeper than this (in any of their fields: the object, the old
   * object, …) are denied before any handler runs: the framework's copies, diffs and patches
   * of such objects would overflow the stack. `Infinity` lifts the limit. @default 1000
   */
  maxDepth: number;
}

/** `settings.execution`: running handlers. */
export interface ExecutionSettings {
  /** Maximum concurrently running handlers across all objects (null: unlimited). @default null */
  maxWorkers: number | null;
  /**
   * Seconds before an arbitrary (non-Kopf) error of a handler is retried, when the handler has
   * no `backoff` of its own; `TemporaryError`'s delay is separate (60 unless given). As Kopf
   * 1.45's `settings.execution.default_backoff`. @default 60
   */
  defaultBackoff: number;
}

/** `settings.background`: daemons and timers. */
export interface BackgroundSettings {
  /** How often a stopping daemon without a cancellation timeout is re-checked. @default 60 */
  cancellationPolling: number;
  /** Kopf's instant-exit optimisation. Accepted; not used: stop signals reach daemons at once here. @default null */
  instantExitTimeout: number | null;
  /** Kopf's instant-exit optimisation. Accepted; not used. @default 10 */
  instantExitZeroTimeCycles: number;
}

/** `settings.networking`: API requests. */
export interface NetworkingSettings {
  /** Timeout of one request (not watches). @default 300 */
  requestTimeout: number;
  /**
   * Longest wait for a request's response headers, in seconds (null: only requestTimeout).
   * Deno's fetch has no TCP-connect timeout of its own, so this covers connecting, TLS and the
   * server's answer. @default null
   */
  connectTimeout: number | null;
  /** Delays between retries of network errors, 429 and 5xx. @default [1, 1, 2, 3, 5, 8, 13, 21] */
  errorBackoffs: number[];
  /** Client-side rate limit in requests per second (0: none). Not in Kopf. @default 0 */
  qps: number;
  /** Burst size of the rate limit. Not in Kopf. @default 10 */
  burst: number;
  /**
   * Kept-alive HTTP/1.1 connections to the API server at most, for requests with short answers
   * (watches have one each besides; docs/client.md). Not in Kopf. @default 64
   */
  maxConnections: number;
}

/** `settings.persistence`: where state lives on objects. */
export interface PersistenceSettings {
  /** Finalizer name. @default "kopf.zalando.org/KopfFinalizerMarker" */
  finalizer: string;
  /** Where handler progress is stored. @default new SmartProgressStorage() */
  progressStorage: ProgressStorage;
  /** Where the last handled essence is stored. @default new AnnotationsDiffBaseStorage() */
  diffbaseStorage: DiffBaseStorage;
}

/** `settings.metrics`: the Prometheus metrics endpoint (see docs/observability.md). */
export interface MetricsSettings {
  /**
   * Serve the metrics at this URL, e.g. `http://0.0.0.0:9090/metrics` (null: no endpoint);
   * `kopf run --metrics URL` and `operator({ metrics })` set it. Read after the startup
   * handlers. Not in Kopf. @default null
   */
  endpoint: string | null;
  /** Include process metrics (CPU, memory, file descriptors, event loop lag). @default true */
  process: boolean;
}

/** All settings of one operator. */
export interface OperatorSettings {
  /** The operator process. */
  process: ProcessSettings;
  /** Events posting. */
  posting: PostingSettings;
  /** Peering. */
  peering: PeeringSettings;
  /** Watch streams. */
  watching: WatchingSettings;
  /** Per-object workers. */
  queueing: QueueingSettings;
  /** The informer cache of reconcile handlers. */
  caching: CachingSettings;
  /** Alias of `queueing`, Kopf's historical name. */
  readonly batching: QueueingSettings;
  /** Observation of namespaces and CRDs. */
  scanning: ScanningSettings;
  /** Webhooks. */
  admission: AdmissionSettings;
  /** Running handlers. */
  execution: ExecutionSettings;
  /** Daemons and timers. */
  background: BackgroundSettings;
  /** API requests. */
  networking: NetworkingSettings;
  /** State on objects. */
  persistence: PersistenceSettings;
  /** Leader election (active/standby replicas); see docs/scaling.md. */
  leadership: LeadershipSettings;
  /** Sharded replicas (active/active); see docs/scaling.md. */
  sharding: ShardingSettings;
  /** The metrics endpoint. */
  metrics: MetricsSettings;
}

/** Kopf's default finalizer. */
export const DEFAULT_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

/**
 * Creates settings with the defaults, optionally overriding parts of sections.
 *
 * @param overrides Partial sections to merge over the defaults.
 * @returns A fresh, mutable settings object.
 * @example
 * ```ts
 * import { createSettings } from "./settings.ts";
 * const settings = createSettings({ posting: { enabled: false } });
 * settings.persistence.finalizer = "example.com/my-finalizer";
 * ```
 */
export function createSettings(
  overrides: { [K in keyof OperatorSettings]?: Partial<OperatorSettings[K]> } = {},
): OperatorSettings {
  const queueing: QueueingSettings = {
    workerLimit: null,
    admissionLimit: 64,
    listingBacklog: 300,
    idleTimeout: 5,
    batchWindow: 0,
    kopfBatching: false,
    exitTimeout: 2,
    errorDelays: [1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610],
    ...overrides.queueing,
    ...overrides.batching,
  };
  const settings: OperatorSettings = {
    process: {
      ultimateExitingTimeout: 600,
      gracePeriod: 5,
      idleGcDelay: 10,
      burstGcCycles: 4000,
      pageOutDelay: null,
      burstPageOutCycles: 500,
      ...overrides.process,
    },
    posting: {
      enabled: true,
      loggers: false,
      level: "info",
      reportingComponent: "kopf",
      reportingInstance: "dev",
      eventNamePrefix: "kopf-event-",
      aggregationWindow: 5,
      maxPerObjectPerWindow: 10,
      defaultBackoffs: [1, 1, 2, 3, 5, 8, 13, 21],
      loggingBackoffs: [1, 1, 2, 3, 5],
      ...overrides.posting,
    },
    peering: {
      name: "default",
      priority: 0,
      mandatory: false,
      standalone: false,
      stealth: false,
      lifetime: 60,
      clusterwide: false,
      ...overrides.peering,
      ...(overrides.peering?.namespaced === undefined
        ? {}
        : { clusterwide: !overrides.peering.namespaced }),
      get namespaced(): boolean {
        return !this.clusterwide;
      },
      set namespaced(value: boolean) {
        this.clusterwide = !value;
      },
    },
    watching: {
      connectTimeout: null,
      serverTimeout: 300,
      clientTimeout: null,
      reconnectBackoff: 0.1,
      inactivityTimeout: 90,
      labelSelectors: {},
      fieldSelectors: {},
      initialStreaming: false,
      chunkSize: 500,
      maxDepth: 1000,
      ...overrides.watching,
    },
    queueing,
    caching: { dropManagedFields: true, ...overrides.caching },
    get batching() {
      return this.queueing;
    },
    scanning: { disabled: false, ...overrides.scanning },
    admission: { server: null, managed: null, maxDepth: 1000, ...overrides.admission },
    execution: { maxWorkers: null, defaultBackoff: 60, ...overrides.execution },
    background: {
      cancellationPolling: 60,
      instantExitTimeout: null,
      instantExitZeroTimeCycles: 10,
      ...overrides.background,
    },
    networking: {
      requestTimeout: 300,
      connectTimeout: null,
      errorBackoffs: [1, 1, 2, 3, 5, 8, 13, 21],
      qps: 0,
      burst: 10,
      maxConnections: 64,
      ...overrides.networking,
    },
    persistence: {
      finalizer: DEFAULT_FINALIZER,
      progressStorage: new SmartProgressStorage(),
      diffbaseStorage: new AnnotationsDiffBaseStorage(),
      ...overrides.persistence,
    },
    leadership: leadershipDefaults(overrides.leadership),
    sharding: shardingDefaults(overrides.sharding),
    metrics: { endpoint: null, process: true, ...overrides.metrics },
  };
  return settings;
}
