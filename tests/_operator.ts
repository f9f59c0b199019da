/**
 * Running operators in tests against the shared control plane:
 * - {@link startOperator}: in-process, with an explicit registry, its own client (so its request
 *   counters are exactly the operator's), and captured log entries;
 * - {@link spawnOperator}: `kopf run` as a subprocess (the real CLI), with captured output.
 * @module
 */

import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { operator, type OperatorOptions } from "../core/reactor/lifetime/running.ts";
import type { OperatorStats } from "../core/reactor/causes/orchestration.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { captureLines, eventually, terminate } from "./_support.ts";

/** An operator running in this process. */
export interface InProcessOperator extends AsyncDisposable {
  /** The operator's own client: its counters are the operator's requests. */
  readonly client: KubeClient;
  /** Log entries so far. */
  readonly logs: LogEntry[];
  /** Resolves when the initial listings are done. */
  readonly ready: Promise<void>;
  /** Waits until a log message matches. */
  waitForLog(pattern: RegExp, timeoutMs?: number): Promise<LogEntry>;
  /** Stops it and waits for a clean exit. */
  stop(): Promise<void>;
  /** What the operator holds in memory now (streams, objects, workers, daemon/timer tasks). */
  stats(): OperatorStats;
}

/**
 * Starts an operator in-process with the handlers that `setup` registers.
 * @param setup Registers handlers into the given registry (pass `registry` to `on.*`).
 * @param options Namespaces, settings tweaks, and optionally a client (e.g. through a proxy).
 */
export async function startOperator(
  setup: (registry: OperatorRegistry) => void,
  options: Partial<OperatorOptions> & { settings?: OperatorSettings } = {},
): Promise<InProcessOperator> {
  const plane = await sharedControlPlane();
  const registry = new OperatorRegistry();
  setup(registry);
  const client = options.client ??
    new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
  const settings = options.settings ?? createSettings({ posting: { aggregationWindow: 0.2 } });
  const logs: LogEntry[] = [];
  let stats: () => OperatorStats = () => ({ streams: 0, objects: 0, workers: 0, tasks: 0 });
  const controller = new AbortController();
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const running = operator({
    standalone: true,
    ...options,
    registry,
    client,
    settings,
    listeners: [(entry) => logs.push(entry)],
    signal: controller.signal,
    onReady: markReady,
    observe: (s) => (stats = s),
  });
  running.catch(() => markReady());
  const stop = async () => {
    controller.abort();
    await running;
    client[Symbol.dispose]();
  };
  return {
    client,
    logs,
    ready,
    waitForLog: (pattern, timeoutMs = 30_000) =>
      eventually(() => logs.find((e) => pattern.test(e.message)), timeoutMs, `log ${pattern}`),
    stop,
    stats: () => stats(),
    [Symbol.asyncDispose]: stop,
  };
}

/** An operator running as a `kopf run` subprocess. */
export interface SpawnedOperator extends AsyncDisposable {
  /** Output lines (stdout and stderr) so far. */
  readonly lines: string[];
  /** Waits until an output line matches. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends SIGTERM and waits for the exit code. */
  stop(): Promise<number>;
  /** Sends a signal (e.g. SIGKILL) without waiting. */
  kill(signal: Deno.Signal): void;
  /** Resolves with the exit code when the process exits. */
  readonly exited: Promise<number>;
}

/**
 * Spawns `deno run -A cli.ts run ARGS` against the shared control plane.
 * @param args Arguments after `run`.
 * @param env Extra environment variables.
 */
export function spawnOperator(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<SpawnedOperator> {
  return spawnDeno(["cli.ts", "run", ...args], env);
}

/**
 * Starts `deno run -A <args>` (e.g. a script that embeds an operator) against the run's
 * control plane, with the output captured as for {@link spawnOperator}.
 * @param args The script and its arguments.
 * @param env Extra environment variables.
 * @returns The running process.
 */
export async function spawnDeno(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<SpawnedOperator> {
  const plane = await sharedControlPlane();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", ...args],
    env: { KUBECONFIG: plane.kubeconfigPath, NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const { lines, exited } = captureLines(child);
  const stop = () => terminate(child, exited);
  return {
    lines,
    exited,
    waitForLine: (pattern, timeoutMs = 30_000) =>
      eventually(
        () => lines.find((l) => pattern.test(l)),
        timeoutMs,
        `output ${pattern}; got:\n${lines.join("\n")}`,
      ),
    stop,
    kill: (signal) => {
      try {
        child.kill(signal);
      } catch { /* already exited */ }
    },
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}
