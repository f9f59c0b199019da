/**
 * Posting core/v1 Events about objects, so that `kubectl describe` shows what the operator did.
 * Aggregation and rate limiting of Events are the posting engine's job; this is one request.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import type { KubeObjectLike } from "../structs/typed.ts";
import type { Resource } from "../structs/resources.ts";
import type { KubeApi } from "./api.ts";

/** The core/v1 Events resource. */
export const EVENTS_RESOURCE: Resource = {
  group: "",
  version: "v1",
  plural: "events",
  singular: "event",
  kind: "Event",
  namespaced: true,
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"],
  shortNames: ["ev"],
  categories: [],
  subresources: [],
  preferred: true,
};

/** What to say about an object. */
export interface EventInfo {
  /** `Normal` or `Warning` (Kopf also posts `Error`, `Debug`, `Fatal`). */
  readonly type: string;
  /** A short CamelCase reason, e.g. `Logging`, `Error`. */
  readonly reason: string;
  /** Human-readable message; cut to 1024 characters, as the API server limits it. */
  readonly message: string;
  /** How many times this happened (for aggregated events). @default 1 */
  readonly count?: number;
  /** First occurrence. @default now */
  readonly firstTimestamp?: Date;
  /** Last occurrence. @default now */
  readonly lastTimestamp?: Date;
}

/** Options of {@link postEvent}. */
export interface PostEventOptions {
  /** The `source.component` of the event. @default "kopf" */
  readonly component?: string;
  /** The `reportingInstance` of the event. @default "dev" */
  readonly instance?: string;
  /** Prefix of the generated Event name. @default "kopf-event-" */
  readonly namePrefix?: string;
  /** Cancels the request. */
  readonly signal?: AbortSignal;
  /** Retry delays (seconds) of a failed post, one retry each; unset: the client's. */
  readonly backoffs?: readonly number[] | undefined;
}

const MAX_MESSAGE = 1024;

/**
 * Creates a core/v1 Event about an object. Events of cluster-scoped objects go to the default
 * namespace of the client's connection (e.g. the kubeconfig context's namespace), else to
 * `default`.
 *
 * @param api Object operations.
 * @param involved The object the event is about (needs apiVersion, kind, metadata.name/uid).
 * @param info Type, reason and message.
 * @param options Component name, signal.
 * @returns The created Event.
 */
export function postEvent(
  api: KubeApi,
  involved: KubeObjectLike,
  info: EventInfo,
  options: PostEventOptions = {},
): Promise<KubeObject> {
  const meta = involved.metadata ?? {};
  // An Event lives in its object's namespace; for cluster-scoped objects, in the default
  // namespace of the credentials (the kubeconfig context's, the service account's): an operator
  // may be allowed to create Events in its own namespace only.
  const namespace = meta.namespace || api.http.connection.namespace || "default";
  // The API server accepts an Event about a cluster-scoped object only in `default`, or when the
  // reference names the Event's namespace (which is what Kopf sends for all of them). A reference
  // without a namespace is what `kubectl describe` looks for, so `default` keeps it that way.
  const refNamespace = meta.namespace || (namespace === "default" ? undefined : namespace);
  const first = (info.firstTimestamp ?? new Date()).toISOString().replace(/\.\d+Z$/, "Z");
  const last = (info.lastTimestamp ?? new Date()).toISOString().replace(/\.\d+Z$/, "Z");
  const message = info.message.length > MAX_MESSAGE
    ? `${info.message.slice(0, MAX_MESSAGE - 3)}...`
    : info.message;
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Event",
    metadata: { namespace, generateName: options.namePrefix ?? "kopf-event-" },
    type: info.type,
    reason: info.reason,
    message,
    count: info.count ?? 1,
    firstTimestamp: first,
    lastTimestamp: last,
    reportingComponent: options.component ?? "kopf",
    reportingInstance: options.instance ?? "dev",
    source: { component: options.component ?? "kopf" },
    involvedObject: {
      apiVersion: involved.apiVersion,
      kind: involved.kind,
      name: meta.name,
      uid: meta.uid,
      ...(refNamespace ? { namespace: refNamespace } : {}),
      ...(meta.resourceVersion ? { resourceVersion: meta.resourceVersion } : {}),
    },
  };
  return api.create(EVENTS_RESOURCE, body, {
    namespace,
    signal: options.signal,
    ...(options.backoffs ? { backoffDelaysMs: options.backoffs.map((s) => s * 1000) } : {}),
  });
}
