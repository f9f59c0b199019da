/**
 * What the tests of subtle behaviours (features.md §32; tests/behaviour_*_test.ts) share: fast
 * settings, a namespace with the example CRD, an operator started and ready, example objects,
 * reading them back (their progress records, status and Events), the operator's own requests
 * and log lines, and the handlers of a creation that keeps retrying.
 * @module
 */

import { TemporaryError } from "../core/actions/execution.ts";
import { on } from "../core/api/on.ts";
import type { KubeClient } from "../core/client/client.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import type { KubeObject, ObjectMeta } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testNamespace } from "./_support.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";

/** Test options: operators keep timers and sockets past a test's body. */
export const opts = { sanitizeOps: false, sanitizeResources: false };

/** Another controller's finalizer, next to ours. */
export const OTHER_FINALIZER = "example.com/other-controller";

/** For tests of the Events posted from log messages (off by default, as in Kopf 1.44+). */
export function postLogMessages(settings: OperatorSettings): void {
  settings.posting.loggers = true;
}

/** Settings for fast tests: quick Events, quick stops. */
export function fast(
  tweak: (settings: OperatorSettings) => void = () => {},
): OperatorSettings {
  const settings = createSettings({
    posting: { aggregationWindow: 0.2 },
    process: { gracePeriod: 1 },
    queueing: { exitTimeout: 1 },
  });
  tweak(settings);
  return settings;
}

/** Applies the example CRD (crds/example.yaml) and makes a fresh namespace for one test. */
export async function exampleNamespace(client: KubeClient, prefix: string): Promise<string> {
  await applyCrds(client, "crds/example.yaml");
  return await testNamespace(prefix);
}

/**
 * Starts an operator in-process on one namespace and waits until its initial listings are done.
 * @param setup Registers handlers into the given registry (as for {@link startOperator}).
 * @param settings The operator's settings; {@link fast} ones by default.
 */
export async function startReady(
  namespace: string,
  setup: (registry: OperatorRegistry) => void,
  settings: OperatorSettings = fast(),
): Promise<InProcessOperator> {
  const op = await startOperator(setup, { namespaces: [namespace], settings });
  await op.ready;
  return op;
}

/** A KopfExample object (crds/example.yaml) with the given spec and extra metadata. */
export function example(
  name: string,
  spec: unknown = {},
  metadata: ObjectMeta = {},
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name, ...metadata },
    spec,
  } as KubeObject;
}

/** Reads an object (a KopfExample unless another resource is given). */
export async function read(
  client: KubeClient,
  namespace: string,
  name: string,
  resource: Resource = KOPFEXAMPLES,
): Promise<KubeObject> {
  return await client.api.get(resource, name, { namespace });
}

/** Whether an object exists (a 404 is `false`; other errors are thrown). */
export async function exists(
  client: KubeClient,
  namespace: string,
  name: string,
  resource: Resource = KOPFEXAMPLES,
): Promise<boolean> {
  try {
    await read(client, namespace, name, resource);
    return true;
  } catch (error) {
    if ((error as { code?: number }).code === 404) return false;
    throw error;
  }
}

/**
 * Reads a KopfExample until `accept` returns a truthy value for it, and returns that body.
 * @param timeoutMs How long to wait (as for {@link eventually}).
 * @param what What is waited for, for the timeout's message.
 */
export async function readWhen(
  client: KubeClient,
  namespace: string,
  name: string,
  accept: (body: KubeObject) => unknown,
  timeoutMs = 30_000,
  what = "condition",
): Promise<KubeObject> {
  return await eventually(
    async () => {
      const body = await read(client, namespace, name);
      return accept(body) ? body : undefined;
    },
    timeoutMs,
    what,
  );
}

/** A handler's progress record, as stored in its annotation. */
export interface StoredProgress {
  started?: string;
  stopped?: string;
  delayed?: string;
  purpose?: string;
  retries?: number;
  success?: boolean;
  failure?: boolean;
  message?: string;
}

/** The progress record of a handler, as stored in its annotation. */
export function progressOf(body: KubeObject, id: string): StoredProgress | undefined {
  const raw = body.metadata?.annotations?.[`kopf.zalando.org/${id}`];
  return raw === undefined ? undefined : JSON.parse(raw);
}

/** An object's status (an empty record if it has none). */
export function statusOf(body: KubeObject): Record<string, unknown> {
  return ((body as { status?: Record<string, unknown> }).status ?? {}) as Record<string, unknown>;
}

/** One core/v1 Event, as `kubectl describe` shows it. */
export interface PostedEvent {
  type: string;
  reason: string;
  message: string;
}

/** The core/v1 Events about an object (as `kubectl describe` shows them). */
export async function eventsOf(
  client: KubeClient,
  namespace: string,
  uid: string,
): Promise<PostedEvent[]> {
  const { items } = await client.api.list(EVENTS_RESOURCE, {
    namespace,
    fieldSelector: `involvedObject.uid=${uid}`,
  });
  return items.map((e) => {
    const event = e as unknown as PostedEvent;
    return { type: event.type, reason: event.reason, message: event.message };
  });
}

/** Waits until an object's Events include one whose message matches. */
export async function waitForEvent(
  client: KubeClient,
  namespace: string,
  uid: string,
  pattern: RegExp,
): Promise<PostedEvent> {
  return await eventually(
    async () => (await eventsOf(client, namespace, uid)).find((e) => pattern.test(e.message)),
    15_000,
    `an Event ${pattern}`,
  );
}

/** A snapshot of an operator's request counters. */
export type CountersSnapshot = ReturnType<InProcessOperator["client"]["counters"]["snapshot"]>;

/** The operator's requests to a resource other than watches, since a snapshot. */
export function requestsSince(
  op: InProcessOperator,
  before: CountersSnapshot,
  resource = "kopfexamples",
): { writes: number; reads: number; all: string } {
  const used = op.client.counters.since(before);
  return {
    writes: used.writes({ resource }),
    reads: used.count({ verb: ["get", "list"], resource }),
    all: JSON.stringify(used.entries()),
  };
}

/** The operator's log messages that match. */
export function logged(op: InProcessOperator, pattern: RegExp): string[] {
  return op.logs.filter((e) => pattern.test(e.message)).map((e) => e.message);
}

/**
 * Handlers of KopfExamples whose creation never succeeds (`create_fn` asks to be retried in 2 s)
 * and whose deletion does (`delete_fn`); both count their calls in `calls`.
 */
export function retryingCreation(
  calls: { create: number; delete: number },
): (registry: OperatorRegistry) => void {
  return (registry) => {
    on.create("kopfexamples", { registry, id: "create_fn" }, () => {
      calls.create++;
      throw new TemporaryError("not yet", { delay: 2 });
    });
    on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
      calls.delete++;
    });
  };
}
