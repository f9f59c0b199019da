/**
 * Embedding operators in other Deno programs: {@link start} returns a handle with `ready`,
 * `stop()` and `await using` support; {@link run} runs until SIGINT/SIGTERM. Several operators
 * can run in one process with separate registries, settings and memos.
 *
 * @example Two operators in one program
 * ```ts ignore
 * import { createSettings, OperatorRegistry, on, start } from "@kopf/ts";
 * const a = new OperatorRegistry();
 * on.create("kopfexamples", { registry: a }, () => ({ by: "a" }));
 * await using first = start({ registry: a, namespaces: ["team-a"] });
 * await first.ready;
 * // … the operator works in the background; leaving the scope stops it …
 * ```
 * @module
 */

import { Logger } from "../actions/loggers.ts";
import { createSettings, type OperatorSettings } from "../settings/settings.ts";
import type { OperatorStats } from "../reactor/causes/orchestration.ts";
import { operator, type OperatorOptions } from "../reactor/lifetime/running.ts";

/** A running operator. */
export interface RunningOperator extends AsyncDisposable {
  /** Resolves when every served stream has listed its objects once. */
  readonly ready: Promise<void>;
  /** Resolves (or rejects) when the operator has exited. */
  readonly done: Promise<void>;
  /** Asks the operator to stop and waits for a clean exit. */
  stop(): Promise<void>;
  /** What the operator holds in memory now (zeros before it started watching). */
  stats(): OperatorStats;
}

/**
 * Starts an operator in the background.
 * @param options As for {@link operator}; `signal` may be given in addition to `stop()`.
 * @returns A handle to wait for readiness and to stop it.
 */
export function start(options: Omit<OperatorOptions, "onReady"> = {}): RunningOperator {
  const controller = new AbortController();
  const signal = options.signal
    ? AbortSignal.any([options.signal, controller.signal])
    : controller.signal;
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  let stats: () => OperatorStats = () => ({ streams: 0, objects: 0, workers: 0, tasks: 0 });
  const done = operator({ ...options, signal, onReady: markReady, observe: (s) => (stats = s) });
  done.catch(() => markReady());
  const stop = async () => {
    controller.abort(new Error("Stop requested"));
    await done;
  };
  return { ready, done, stop, stats: () => stats(), [Symbol.asyncDispose]: stop };
}

/**
 * After a stop signal: if the graceful exit hangs (e.g. a cleanup handler that never returns),
 * log why and end the process after `settings.process.ultimateExitingTimeout` (read now, so
 * that startup handlers may have changed it). The timer keeps the process alive, so that a hang
 * on a promise that never settles also ends with this line. Used by `run()` and `kopf run`.
 * @param settings The operator's settings.
 * @returns The timer (to clear after a graceful exit), or `undefined` when disabled.
 */
export function armUltimateExit(
  settings: OperatorSettings,
): ReturnType<typeof setTimeout> | undefined {
  const limit = settings.process.ultimateExitingTimeout;
  if (limit === null) return undefined;
  return setTimeout(() => {
    new Logger(["kopf", "operator"]).error(
      `The graceful exit did not finish within ${limit} s ` +
        `(settings.process.ultimateExitingTimeout); exiting forcefully.`,
    );
    Deno.exit(1);
  }, limit * 1000);
}

/**
 * Runs an operator until SIGINT or SIGTERM (a second signal exits at once).
 * @param options As for {@link operator}.
 * @returns Resolves after a clean stop.
 */
export async function run(options: OperatorOptions = {}): Promise<void> {
  const controller = new AbortController();
  // Read when the signal comes, so that startup handlers may change the exit timeout.
  const settings = options.settings ?? createSettings();
  let signals = 0;
  let ultimate: ReturnType<typeof setTimeout> | undefined;
  const onSignal = () => {
    if (++signals > 1) Deno.exit(130);
    controller.abort(new Error("Signal received"));
    ultimate = armUltimateExit(settings);
  };
  const names: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
  for (const name of names) Deno.addSignalListener(name, onSignal);
  const signal = options.signal
    ? AbortSignal.any([options.signal, controller.signal])
    : controller.signal;
  try {
    await operator({ ...options, settings, signal });
  } catch (error) {
    // A signal during the startup (before every stream runs) ends a step with the stop's own
    // reason: the stop was asked for and done, not a failure (as for `kopf run`).
    const stopped = signal.aborted &&
      (error === signal.reason || (error instanceof DOMException && error.name === "AbortError"));
    if (!stopped) throw error;
  } finally {
    clearTimeout(ultimate);
    for (const name of names) Deno.removeSignalListener(name, onSignal);
  }
}
