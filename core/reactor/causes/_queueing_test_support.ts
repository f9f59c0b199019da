/**
 * Shared scaffolding of the per-object queue's unit tests (`queueing*_test.ts`): object bodies
 * and watch events, and a queue over a fake `process` function (no API, no handlers) that
 * records its calls and logs. Not part of the public API.
 * @module
 */

import { type LogEntry, Logger } from "../../actions/loggers.ts";
import type { Memo } from "../../intents/contexts.ts";
import { createSettings, type QueueingSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import type { AdmissionGate } from "../../util/gate.ts";
import type { Semaphore } from "../../util/semaphore.ts";
import { until } from "../../util/_test_support.ts";
import type { CycleResult, ObjectEvent, ObjectMemory } from "./processing.ts";
import { objectKey, ObjectQueue } from "./queueing.ts";

/** The type of a watch event, as the queue receives it. */
export type EventType = ObjectEvent["type"];

/**
 * A KopfExample "ns/name-<uid>" at a resourceVersion.
 * @param uid Its uid (the queue's key).
 * @param rv Its resourceVersion.
 * @param spec Its spec.
 */
export function body(uid: string, rv: string, spec: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { uid, name: `name-${uid}`, namespace: "ns", resourceVersion: rv },
    spec,
  } as KubeObject;
}

/**
 * A watch event of the object `body(uid, rv)`.
 * @param uid The object's uid.
 * @param rv Its resourceVersion.
 * @param type The event type.
 */
export function ev(uid: string, rv: string, type: EventType = "MODIFIED"): ObjectEvent {
  return { type, body: body(uid, rv) };
}

/**
 * The resourceVersion of an event's object.
 * @param event The event.
 */
export const rvOf = (event: ObjectEvent): string | undefined =>
  event.body.metadata?.resourceVersion;

/** One call of the fake `process`: the object's key, the event, its memory and when it began. */
export interface Call {
  readonly key: string;
  readonly event: ObjectEvent;
  readonly memory: ObjectMemory;
  readonly at: number;
}

/**
 * A queue with a fake `process`; `handle` decides what each call does. It records the calls,
 * the log entries and the memos created, and the most calls running at once, per object and
 * overall; `stop()` aborts the queue's signal and waits for its workers to exit.
 * @param handle What a call returns (or throws), given the event and the call's number from 1.
 * @param queueing Settings over short test defaults (batch window, idle timeout, error delays).
 * @param limiter A shared limiter of concurrent cycles.
 * @param forgettable Whether an idle object's memory may be dropped.
 * @param admission The admission gate of first cycles.
 */
export function harness(
  handle: (event: ObjectEvent, call: number) => Promise<CycleResult> | CycleResult = () => ({}),
  queueing: Partial<QueueingSettings> = {},
  limiter?: Semaphore,
  forgettable?: (memory: ObjectMemory) => boolean,
  admission?: AdmissionGate,
) {
  const controller = new AbortController();
  const listeners = trackAbortListeners(controller.signal);
  const settings = createSettings({
    queueing: { batchWindow: 0.005, idleTimeout: 0.05, errorDelays: [0.03, 0.06], ...queueing },
  }).queueing;
  const calls: Call[] = [];
  const logs: LogEntry[] = [];
  const memos: Memo[] = [];
  const running = new Map<string, number>();
  let maxPerObject = 0;
  let maxOverall = 0;
  const queue = new ObjectQueue({
    settings,
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    signal: controller.signal,
    limiter,
    forgettable,
    gate: admission,
    createMemo: () => {
      const memo = {};
      memos.push(memo);
      return memo;
    },
    process: async (memory, event) => {
      const key = objectKey(event.body);
      calls.push({ key, event, memory, at: performance.now() });
      running.set(key, (running.get(key) ?? 0) + 1);
      maxPerObject = Math.max(maxPerObject, running.get(key)!);
      maxOverall = Math.max(maxOverall, [...running.values()].reduce((a, b) => a + b, 0));
      try {
        return await handle(event, calls.length);
      } finally {
        running.set(key, running.get(key)! - 1);
      }
    },
  });
  const baseListeners = listeners.size; // the queue's own, one for all its workers
  const stop = async () => {
    controller.abort();
    await until(() => queue.active === 0, "workers to exit");
  };
  return {
    queue,
    calls,
    logs,
    memos,
    stop,
    listeners,
    baseListeners,
    get maxPerObject() {
      return maxPerObject;
    },
    get maxOverall() {
      return maxOverall;
    },
  };
}

/**
 * Keeps count of the "abort" listeners currently registered on a signal.
 * @param signal The signal, whose add/removeEventListener are wrapped.
 */
function trackAbortListeners(signal: AbortSignal): Set<unknown> {
  const live = new Set<unknown>();
  const add = signal.addEventListener.bind(signal);
  const remove = signal.removeEventListener.bind(signal);
  signal.addEventListener = ((type: string, listener: EventListener, options?: unknown) => {
    if (type === "abort") live.add(listener);
    add(type, listener, options as AddEventListenerOptions);
  }) as typeof signal.addEventListener;
  signal.removeEventListener = ((type: string, listener: EventListener, options?: unknown) => {
    if (type === "abort") live.delete(listener);
    remove(type, listener, options as EventListenerOptions);
  }) as typeof signal.removeEventListener;
  return live;
}

/** A promise opened by hand: `open()` resolves `promise`. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
