/**
 * Daemons and timers: per-object background tasks that live as long as their object matches.
 *
 * The processing cycle calls {@link Spawner.adjust} on every event: matching handlers are
 * spawned, non-matching ones (filters, deletion, operator exit) are stopped. A stop follows
 * Kopf's sequence: the `stopped` signal aborts at once → after `cancellationBackoff` the
 * handler's `signal` aborts (only with a `cancellationTimeout`) → after `cancellationTimeout`
 * the task is abandoned with a warning and no longer holds the finalizer. Without a timeout the
 * stop is awaited forever (logged every `cancellationPolling` seconds), holding the finalizer.
 *
 * Bodies are live: `body`, `spec`, `status`, `meta`… always show the latest version of the
 * object. A daemon that returns (or fails permanently) is not restarted for this object in
 * this process; a TemporaryError restarts it after its delay. Results go to `status.<id>`.
 * @module
 */

import { applyPatch } from "../../actions/application.ts";
import { execute, type Outcome, withDefaultBackoff } from "../../actions/execution.ts";
import { withHandledObject } from "../../actions/handled_object.ts";
import type { Logger } from "../../actions/loggers.ts";
import { deliverResult, reportOutcome, storableOutcome } from "../../actions/outcomes.ts";
import type { KubeApi } from "../../client/api.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import type { SpawningHandler } from "../../intents/handlers.ts";
import { matchesBodyFilters } from "../../intents/registries.ts";
import type { BackgroundSettings, ExecutionSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { Patch, type PatchFn } from "../../structs/patches.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import { sleep } from "../../util/backoff.ts";
import type { OperatorObserver } from "../observability/observers.ts";

/**
 * Why a daemon or timer is stopping, and how far its stop went (Kopf's `DaemonStoppingReason`
 * flags). A task collects several in its context's `stoppingReasons`, e.g. `resource-deleted`,
 * then `daemon-signalled`, `daemon-cancelled`, `daemon-abandoned` as the stop proceeds.
 */
export const DaemonStoppingReason = {
  /** The task has exited (set after every exit, whatever the cause). */
  DONE: "done",
  /** The object no longer matches the handler's filters. */
  FILTERS_MISMATCH: "filters-mismatch",
  /** The object is being deleted or is gone. */
  RESOURCE_DELETED: "resource-deleted",
  /** Peering paused the operator. */
  OPERATOR_PAUSING: "operator-pausing",
  /** The operator is exiting. */
  OPERATOR_EXITING: "operator-exiting",
  /** The task did not exit at once and gets `cancellationBackoff` seconds to exit by itself. */
  DAEMON_SIGNALLED: "daemon-signalled",
  /** The handler's `signal` was aborted (after the backoff, or at operator exit). */
  DAEMON_CANCELLED: "daemon-cancelled",
  /** The task did not exit in time and was left running. */
  DAEMON_ABANDONED: "daemon-abandoned",
} as const;

/** One of the {@link DaemonStoppingReason} values. */
export type DaemonStoppingReason = typeof DaemonStoppingReason[keyof typeof DaemonStoppingReason];

/** The first reason of a stop, as `stopped.reason` carries it. */
export type StoppingReason =
  | "done"
  | "filters-mismatch"
  | "resource-deleted"
  | "operator-exiting"
  | "operator-pausing";

/** The extra context of daemons and timers. */
export interface SpawnedContext<Spec = Record<string, unknown>, Status = Record<string, unknown>>
  extends ResourceContext<Spec, Status> {
  /** Aborted when the task should stop (its reason tells why); poll it or await it. */
  readonly stopped: AbortSignal;
  /**
   * Every {@link DaemonStoppingReason} of the stop so far, in order (empty while running): the
   * first is `stopped.reason`; `daemon-signalled`, `daemon-cancelled`, `daemon-abandoned` and
   * `done` are added as the stop proceeds. A live view.
   */
  readonly stoppingReasons: ReadonlySet<DaemonStoppingReason>;
  /**
   * Sleeps for `seconds` or until stopped; resolves `true` if stopped.
   *
   * @param seconds How long to sleep.
   * @returns `true` if the task was stopped meanwhile, else `false`.
   */
  sleep(seconds: number): Promise<boolean>;
  /** Attempts made before this one (0 on the first). */
  readonly retry: number;
  /** When the first attempt started. */
  readonly started: Date;
  /** Seconds since the first attempt. */
  readonly runtime: number;
}

/** A running (or stopping) task of one handler for one object. */
interface Task {
  readonly handler: SpawningHandler;
  readonly stopper: AbortController;
  readonly canceller: AbortController;
  readonly done: Promise<void>;
  readonly reasons: Set<DaemonStoppingReason>;
  stopping: boolean;
  abandoned: boolean;
  /** `patch.fns` of an attempt whose patch met a conflict: carried to the next attempt (as Kopf). */
  pendingFns: PatchFn[];
}

/** What the spawner of one object needs. */
export interface SpawnerDeps {
  /** Object operations (to deliver results). */
  readonly api: KubeApi;
  /** The object's resource. */
  readonly resource: Resource;
  /** `settings.background` (read live). */
  readonly settings: BackgroundSettings;
  /** `settings.execution` (read live), for the default backoff of arbitrary errors. */
  readonly execution?: ExecutionSettings | undefined;
  /** The object's logger. */
  readonly logger: Logger;
  /** Builds the resource context for the current body (live). */
  readonly context: (handler: SpawningHandler, signal: AbortSignal) => ResourceContext;
  /** Called when a task finished or was abandoned, so the object is re-processed (finalizer). */
  readonly wake: () => void;
  /** The operator's stop signal. */
  readonly signal: AbortSignal;
  /** Observes each attempt (metrics, traces). */
  readonly observer?: OperatorObserver | undefined;
  /**
   * Peering's pause switch: while paused, nothing is spawned (a cycle that began before the
   * pause may still reach its spawning step; as Kopf 1.44.1). The resume's relist respawns.
   */
  readonly paused?: { readonly paused: boolean } | undefined;
}

/** The daemons and timers of one object. */
export class Spawner {
  #deps: SpawnerDeps;
  #tasks = new Map<string, Task>();
  #finished = new Set<string>(); // exited for good in this process (returned or failed permanently)
  #lastChange = Date.now();
  #body: KubeObject = {};

  /** @param deps Collaborators. */
  constructor(deps: SpawnerDeps) {
    this.#deps = deps;
  }

  /** The latest body (live view for tasks). */
  get body(): KubeObject {
    return this.#body;
  }

  /** Whether any task is still running or stopping (and not abandoned): the finalizer is needed. */
  get holding(): boolean {
    return [...this.#tasks.values()].some((t) => !t.abandoned);
  }

  /** Number of tasks (for tests of bookkeeping). */
  get size(): number {
    return this.#tasks.size;
  }

  /**
   * Tasks by kind (for metrics).
   * @returns How many daemons and timers are running or stopping.
   */
  counts(): { daemons: number; timers: number } {
    let daemons = 0;
    for (const task of this.#tasks.values()) if (task.handler.spawn === "daemon") daemons++;
    return { daemons, timers: this.#tasks.size - daemons };
  }

  /**
   * Brings the tasks in line with the object: spawns matching handlers, stops the others.
   * @param handlers The resource's daemon and timer handlers.
   * @param body The latest object.
   * @param options `deleted`: the object is being deleted or gone; `changed`: its essence changed.
   */
  adjust(
    handlers: readonly SpawningHandler[],
    body: KubeObject,
    options: { deleted: boolean; changed: boolean },
  ): void {
    this.#body = body;
    if (options.changed) this.#lastChange = Date.now();
    for (const handler of handlers) {
      const task = this.#tasks.get(handler.id);
      const matches = !options.deleted && !this.#deps.signal.aborted &&
        matchesBodyFilters(handler, body, () => this.#deps.context(handler, this.#deps.signal));
      const spawnable = !task && !this.#finished.has(handler.id) && !this.#deps.paused?.paused;
      if (matches && spawnable) this.#spawn(handler);
      if (!matches && task && !task.stopping) {
        this.#stop(task, options.deleted ? "resource-deleted" : "filters-mismatch");
      }
    }
  }

  /**
   * Stops every task because peering paused the operator, with the usual stopping sequence.
   * They are spawned again by the first cycle after the resume, each only after its previous
   * instance has exited (their exit wakes the object up).
   */
  pauseAll(): void {
    for (const task of this.#tasks.values()) {
      if (!task.stopping) this.#stop(task, "operator-pausing");
    }
  }

  /**
   * Stops everything (operator exit) and waits up to `graceSeconds` for the tasks to exit.
   * @param graceSeconds How long to wait before abandoning them.
   */
  async stopAll(graceSeconds: number): Promise<void> {
    for (const task of this.#tasks.values()) {
      if (!task.stopping) this.#stop(task, "operator-exiting");
      task.reasons.add(DaemonStoppingReason.DAEMON_CANCELLED);
      task.canceller.abort(new Error("The operator is exiting"));
    }
    const tasks = [...this.#tasks.values()];
    const all = Promise.allSettled(tasks.map((t) => t.done));
    const timeout = new AbortController();
    const finished = await Promise.race([
      all.then(() => true),
      sleep(graceSeconds * 1000, timeout.signal).then(() => false, () => true),
    ]);
    timeout.abort();
    if (finished) return;
    for (const task of tasks) {
      if (this.#tasks.get(task.handler.id) === task) {
        task.abandoned = true;
        task.reasons.add(DaemonStoppingReason.DAEMON_ABANDONED);
      }
    }
  }

  /** Whether any handler matches the object now (so the finalizer is wanted). */
  wants(handlers: readonly SpawningHandler[], body: KubeObject): boolean {
    this.#body = body;
    return handlers.some((h) =>
      !this.#finished.has(h.id) &&
      matchesBodyFilters(h, body, () => this.#deps.context(h, this.#deps.signal))
    );
  }

  #spawn(handler: SpawningHandler): void {
    const stopper = new AbortController();
    const canceller = new AbortController();
    const task: Task = {
      handler,
      stopper,
      canceller,
      stopping: false,
      abandoned: false,
      pendingFns: [],
      reasons: new Set(),
      done: Promise.resolve(),
    };
    this.#tasks.set(handler.id, task);
    // The operator's stop reaches the handler's `signal` at once, before stopAll() runs: record
    // why first, or a daemon that exits on its signal would look as if it ended by itself.
    const exiting = () => {
      if (task.stopping) return;
      task.stopping = true;
      task.reasons.add(DaemonStoppingReason.OPERATOR_EXITING);
      task.reasons.add(DaemonStoppingReason.DAEMON_CANCELLED);
      stopper.abort(DaemonStoppingReason.OPERATOR_EXITING);
    };
    this.#deps.signal.addEventListener("abort", exiting, { once: true });
    const run = handler.spawn === "daemon" ? this.#daemon(task) : this.#timer(task);
    (task as { done: Promise<void> }).done = run.catch((error) => {
      this.#deps.logger.exception(`${handler.spawn} '${handler.id}' crashed unexpectedly`, error);
    }).finally(() => {
      this.#deps.signal.removeEventListener("abort", exiting);
      // As in Kopf, every exit ends with DONE, so that anything still waiting on `stopped` ends.
      task.reasons.add(DaemonStoppingReason.DONE);
      if (!stopper.signal.aborted) stopper.abort(DaemonStoppingReason.DONE);
      if (this.#tasks.get(handler.id) === task) this.#tasks.delete(handler.id);
      this.#deps.wake();
    });
  }

  #stop(task: Task, reason: StoppingReason): void {
    task.stopping = true;
    task.reasons.add(reason);
    task.stopper.abort(reason);
    const { handler } = task;
    const settings = this.#deps.settings;
    // Every wait is cancelled as soon as the task exits, so no timer keeps the object's
    // bookkeeping alive after it is gone.
    const exitedSignal = new AbortController();
    void task.done.finally(() => exitedSignal.abort());
    void (async () => {
      const exited = task.done.then(() => true);
      const waitFor = (seconds: number) =>
        Promise.race([
          exited,
          sleep(seconds * 1000, exitedSignal.signal).then(() => false, () => true),
        ]);
      if (handler.cancellationBackoff) {
        if (await waitFor(0)) return; // exited at once: no need to signal
        // At operator exit the task is already cancelled: it is not waited for gracefully.
        if (!task.canceller.signal.aborted) task.reasons.add(DaemonStoppingReason.DAEMON_SIGNALLED);
        if (await waitFor(handler.cancellationBackoff)) return;
      }
      if (handler.cancellationTimeout !== undefined) {
        task.reasons.add(DaemonStoppingReason.DAEMON_CANCELLED);
        task.canceller.abort(new Error(`The ${handler.spawn} is cancelled (${reason})`));
        if (await waitFor(handler.cancellationTimeout)) return;
        task.abandoned = true;
        task.reasons.add(DaemonStoppingReason.DAEMON_ABANDONED);
        this.#deps.logger.warning(
          `${handler.spawn} '${handler.id}' did not exit in time (${reason}); abandoning it and releasing the object`,
        );
        this.#deps.wake();
        return;
      }
      const polling = handler.cancellationPolling ?? settings.cancellationPolling;
      while (!(await waitFor(polling))) {
        this.#deps.logger.warning(
          `${handler.spawn} '${handler.id}' is still exiting (${reason}); waiting for it`,
        );
      }
    })();
  }

  #context(
    task: Task,
    retry: number,
    started: Date,
    signal: AbortSignal,
    patch: Patch,
  ): SpawnedContext {
    const stopped = task.stopper.signal;
    const latest = () => this.#body;
    const base = {
      ...this.#deps.context(task.handler, AbortSignal.any([signal, task.canceller.signal])),
      patch,
    };
    // Live views: even when destructured, they always show the latest version of the object.
    const body = liveView(latest);
    return Object.defineProperties({ ...base }, {
      body: { value: body, enumerable: true },
      spec: { value: liveView(() => latest().spec), enumerable: true },
      status: { value: liveView(() => latest().status), enumerable: true },
      meta: { value: liveView(() => latest().metadata), enumerable: true },
      labels: { value: liveView(() => latest().metadata?.labels), enumerable: true },
      annotations: { value: liveView(() => latest().metadata?.annotations), enumerable: true },
      stopped: { value: stopped, enumerable: true },
      stoppingReasons: { value: task.reasons, enumerable: true },
      sleep: { value: (seconds: number) => sleepUnlessStopped(seconds, stopped), enumerable: true },
      retry: { value: retry, enumerable: true },
      started: { value: started, enumerable: true },
      runtime: { get: () => (Date.now() - started.getTime()) / 1000, enumerable: true },
    }) as SpawnedContext;
  }

  async #attempt(task: Task, retries: number, started: Date): Promise<Outcome> {
    const patch = new Patch(); // the handler's own changes, applied after every attempt
    patch.fns.push(...task.pendingFns.splice(0));
    // The handled object (the kits' implicit owner) is live, like the context's body.
    const current = () => this.#body;
    const handled = {
      get body() {
        return current();
      },
    };
    const attempt = () =>
      execute(
        withDefaultBackoff(task.handler, this.#deps.execution?.defaultBackoff),
        { started, retries },
        (signal) =>
          withHandledObject(handled, () =>
            (task.handler.fn as (c: SpawnedContext) => unknown)(
              this.#context(task, retries, started, signal, patch),
            )),
      );
    const meta = this.#body.metadata ?? {};
    const outcome = storableOutcome(
      task.handler.id,
      this.#deps.observer
        ? await this.#deps.observer.handler({
          resource: resourceName(this.#deps.resource),
          namespace: meta.namespace,
          name: meta.name,
          uid: meta.uid,
          handler: task.handler.id,
          kind: task.handler.spawn,
          retry: retries,
        }, attempt)
        : await attempt(),
    );
    const stopped = task.stopper.signal;
    if (stopped.aborted && outcome.kind !== "success") {
      // Ending by the cancellation (or any error while stopping) is an exit on request.
      this.#deps.logger.debug(
        `${task.handler.spawn} '${task.handler.id}' has exited on request (${stopped.reason}).`,
      );
      await this.#deliver(task, { kind: "success", result: undefined }, patch);
      return { kind: "success", result: undefined };
    }
    if (!(outcome.kind === "success" && stopped.aborted)) {
      reportOutcome(this.#deps.logger, task.handler.id, outcome);
    }
    await this.#deliver(task, outcome, patch);
    return outcome;
  }

  async #deliver(task: Task, outcome: Outcome, patch: Patch): Promise<void> {
    const id = task.handler.id;
    deliverResult(patch, id, outcome);
    if (patch.isEmpty) return;
    try {
      const applied = await applyPatch(this.#deps.api, this.#deps.resource, this.#body, patch, {
        signal: this.#deps.signal,
        logger: this.#deps.logger,
        requestLogger: this.#deps.logger,
      });
      // The live body changed under the transformation functions twice: retry them next time.
      if (applied.state === "conflict") task.pendingFns.push(...patch.fns);
    } catch (error) {
      this.#deps.logger.warning(`Could not store the result of '${id}': ${error}`);
    }
  }

  async #daemon(task: Task): Promise<void> {
    const { handler } = task;
    const stopped = task.stopper.signal;
    if (handler.initialDelay && await sleepUnlessStopped(handler.initialDelay, stopped)) return;
    const started = new Date();
    for (let retries = 0; !stopped.aborted; retries++) {
      const outcome = await this.#attempt(task, retries, started);
      if (outcome.kind !== "temporary") {
        if (!stopped.aborted) this.#finished.add(handler.id); // returned on its own: done for this process
        return;
      }
      if (await sleepUnlessStopped(outcome.delay ?? 0, stopped)) return;
    }
  }

  async #timer(task: Task): Promise<void> {
    const { handler } = task;
    const stopped = task.stopper.signal;
    if (handler.initialDelay && await sleepUnlessStopped(handler.initialDelay, stopped)) return;
    let started = new Date();
    let retries = 0;
    let lastRun = -Infinity;
    while (!stopped.aborted) {
      if (handler.idle !== undefined) {
        // Wait until the object has been unchanged for `idle` seconds; changes restart the wait.
        // An idle-only timer fires once per quiet period: after a run, it waits for a change.
        for (;;) {
          if (handler.interval === undefined && lastRun >= this.#lastChange) {
            if (await sleepUnlessStopped(1, stopped)) return;
            continue;
          }
          const quiet = (Date.now() - this.#lastChange) / 1000;
          if (quiet >= handler.idle) break;
          if (await sleepUnlessStopped(handler.idle - quiet, stopped)) return;
        }
      }
      const began = Date.now();
      const outcome = await this.#attempt(task, retries, started);
      lastRun = began;
      if (outcome.kind === "permanent") {
        this.#finished.add(handler.id);
        return;
      }
      let wait: number;
      if (outcome.kind === "temporary") {
        retries++;
        wait = outcome.delay ?? 0;
      } else {
        retries = 0;
        started = new Date();
        if (handler.interval === undefined && handler.idle === undefined) {
          this.#finished.add(handler.id); // a one-shot timer
          return;
        }
        if (handler.interval === undefined) continue; // idle-only: wait for the next quiet period
        const interval = handler.interval;
        wait = handler.sharp ? interval - ((Date.now() - began) / 1000) % interval : interval;
      }
      if (await sleepUnlessStopped(wait, stopped)) return;
    }
  }
}

/** Sleeps for `seconds`, or until `stopped` aborts; resolves whether it was stopped. */
export async function sleepUnlessStopped(seconds: number, stopped: AbortSignal): Promise<boolean> {
  try {
    await sleep(seconds * 1000, stopped);
    return false;
  } catch {
    return true;
  }
}

/** A read-only object that always reflects `source()`, even when held in a local variable. */
function liveView(source: () => unknown): Record<string, unknown> {
  const current = (): Record<string, unknown> => {
    const value = source();
    return value && typeof value === "object" ? value as Record<string, unknown> : {};
  };
  return new Proxy({}, {
    get: (_, key) => Reflect.get(current(), key),
    has: (_, key) => Reflect.has(current(), key),
    ownKeys: () => Reflect.ownKeys(current()),
    getOwnPropertyDescriptor: (_, key) => {
      const descriptor = Reflect.getOwnPropertyDescriptor(current(), key);
      return descriptor ? { ...descriptor, configurable: true } : undefined;
    },
    set: () => false,
    deleteProperty: () => false,
  });
}
