/**
 * Running an operator inside a test, in-process: from command-line arguments (like `kopf run`)
 * or from an explicit registry, with the output captured, the exit code and the exception
 * recorded, readiness to wait for, and a clean stop — `await using` stops it at scope exit.
 *
 * @example Testing handlers with the real control plane
 * ```ts ignore
 * import { KopfRunner, sharedControlPlane, createTestNamespace } from "@kopf/ts/testing";
 *
 * Deno.test("the operator handles an object", async () => {
 *   const plane = await sharedControlPlane();
 *   const ns = await createTestNamespace(plane, "t");
 *   await using runner = KopfRunner.start(["run", "--verbose", "-n", ns, "handlers.ts"], {
 *     kubeconfig: plane.kubeconfigPath,
 *   });
 *   // … create objects, poll the cluster …
 *   await runner.stop();
 *   if (runner.exitCode !== 0) throw new Error(runner.output);
 * });
 * ```
 * @module
 */

import { main } from "../core/api/cli.ts";
import { start } from "../core/api/embedding.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "../core/intents/registries.ts";
import type { OperatorOptions } from "../core/reactor/running.ts";

/** Options of {@link KopfRunner.start} with command-line arguments. */
export interface RunnerOptions {
  /** Kubeconfig to use unless the arguments give `--kubeconfig`. */
  readonly kubeconfig?: string;
  /** How long `ready` may take before it rejects, in milliseconds. @default 60000 */
  readonly readyTimeoutMs?: number;
}

/** An operator running in the test's process. */
export class KopfRunner implements AsyncDisposable {
  #lines: string[] = [];
  #controller = new AbortController();
  #done: Promise<void>;
  #exitCode: number | undefined;
  #error: unknown;
  /** Resolves when the operator is ready (every served resource listed once). */
  readonly ready: Promise<void>;

  private constructor(
    run: (
      signal: AbortSignal,
      write: (line: string) => void,
      onReady: () => void,
    ) => Promise<number>,
    timeoutMs: number,
  ) {
    let markReady!: () => void;
    let failReady!: (error: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    const timer = setTimeout(
      () => failReady(new Error(`The operator was not ready within ${timeoutMs} ms`)),
      timeoutMs,
    );
    this.#done = run(this.#controller.signal, (line) => this.#lines.push(line), () => {
      clearTimeout(timer);
      markReady();
    }).then((code) => {
      this.#exitCode = code;
    }, (error) => {
      this.#exitCode = 1;
      this.#error = error;
    }).finally(() => {
      clearTimeout(timer);
      failReady(
        new Error(
          `The operator exited before it was ready (exit code ${this.#exitCode})\n${this.output}`,
        ),
      );
    });
    this.ready.catch(() => {});
  }

  /**
   * Starts `kopf run ARGS` in this process. Handler files are imported anew, into a fresh default
   * registry (restored after the runner stops), so several runners in one test file do not mix.
   * @param args Command-line arguments, starting with `run`.
   * @param options Kubeconfig and readiness timeout.
   * @returns The running operator.
   */
  static start(args: readonly string[], options: RunnerOptions = {}): KopfRunner {
    return new KopfRunner(async (signal, write, onReady) => {
      const previous = getDefaultRegistry();
      setDefaultRegistry(new OperatorRegistry());
      try {
        return await main(args, {
          signal,
          write,
          onReady,
          freshImports: true,
          ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}),
        });
      } finally {
        setDefaultRegistry(previous);
      }
    }, options.readyTimeoutMs ?? 60_000);
  }

  /**
   * Starts an operator from options (registry, settings, namespaces, client…) in this process.
   * Log messages are captured as lines (`[namespace/name] message`).
   * @param options As for `operator()`.
   * @param runnerOptions Readiness timeout.
   * @returns The running operator.
   */
  static fromOptions(
    options: Omit<OperatorOptions, "signal" | "onReady">,
    runnerOptions: RunnerOptions = {},
  ): KopfRunner {
    return new KopfRunner(async (signal, write, onReady) => {
      const listener = (entry: LogEntry) => {
        const ref = entry.object;
        const prefix = ref ? `[${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}] ` : "";
        write(`${entry.level.toUpperCase()} ${prefix}${entry.message}`);
      };
      const running = start({
        ...options,
        signal,
        listeners: [...(options.listeners ?? []), listener],
      });
      running.ready.then(onReady);
      await running.done;
      return 0;
    }, runnerOptions.readyTimeoutMs ?? 60_000);
  }

  /** Everything printed so far, one line per message. */
  get output(): string {
    return this.#lines.join("\n");
  }

  /** The printed lines so far. */
  get lines(): readonly string[] {
    return this.#lines;
  }

  /** The exit code once stopped (0 for a clean stop), else undefined. */
  get exitCode(): number | undefined {
    return this.#exitCode;
  }

  /** The error that ended the operator, if any (errors the CLI reports give exit code 1 instead). */
  get error(): unknown {
    return this.#error;
  }

  /**
   * Waits until an output line matches.
   * @param pattern What to look for.
   * @param timeoutMs How long to wait. @default 30000
   * @returns The first matching line.
   */
  async waitFor(pattern: RegExp, timeoutMs = 30_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = this.#lines.find((l) => pattern.test(l));
      if (line !== undefined) return line;
      if (this.#exitCode !== undefined) {
        throw new Error(`The operator exited; ${pattern} never appeared:\n${this.output}`);
      }
      if (Date.now() > deadline) {
        throw new Error(`Timed out waiting for ${pattern}:\n${this.output}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Stops the operator and waits for it to exit. */
  async stop(): Promise<void> {
    this.#controller.abort(new Error("The test runner stopped the operator"));
    await this.#done;
  }

  /** Stops the operator (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
