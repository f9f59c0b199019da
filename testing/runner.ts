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

import { main } from "../core/cli/main.ts";
import { start } from "../core/api/embedding.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import {
  getDefaultRegistry,
  OperatorRegistry,
  setDefaultRegistry,
} from "../core/intents/registries.ts";
import type { OperatorOptions } from "../core/reactor/lifetime/running.ts";

/** Options of {@link KopfRunner.start} with command-line arguments. */
export interface RunnerOptions {
  /** Kubeconfig to use unless the arguments give `--kubeconfig`. */
  readonly kubeconfig?: string;
  /** How long `ready` may take before it rejects, in milliseconds. @default 60000 */
  readonly readyTimeoutMs?: number;
  /**
   * Whether {@link KopfRunner.stop} (and `await using`) rethrows the error that ended the
   * operator, as Kopf's `reraise=True`; when false, it is only kept in `error`. @default true
   */
  readonly reraise?: boolean;
  /**
   * How long {@link KopfRunner.stop} waits for the operator to exit, in milliseconds, before it
   * rejects (Kopf's `timeout`); the operator is then left to finish in the background.
   * Default: no limit.
   */
  readonly stopTimeoutMs?: number;
}

/** Where a run writes: standard output and standard error, line by line. */
interface Outputs {
  readonly stdout: (line: string) => void;
  readonly stderr: (line: string) => void;
}

/** An operator running in the test's process. */
export class KopfRunner implements AsyncDisposable {
  #lines: string[] = [];
  #stdout: string[] = [];
  #stderr: string[] = [];
  #controller = new AbortController();
  #done: Promise<void>;
  #exitCode: number | undefined;
  #error: unknown;
  #options: RunnerOptions;
  /** Resolves when the operator is ready (every served resource listed once). */
  readonly ready: Promise<void>;
  /**
   * Resolves with the exit code when the operator exits, on its own or stopped (Kopf's
   * `future`); never rejects: a failure is exit code 1 and {@link KopfRunner.error}.
   */
  readonly exited: Promise<number>;

  private constructor(
    run: (
      signal: AbortSignal,
      outputs: Outputs,
      onReady: () => void,
    ) => Promise<number>,
    options: RunnerOptions,
  ) {
    this.#options = options;
    const timeoutMs = options.readyTimeoutMs ?? 60_000;
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
    const outputs: Outputs = {
      stdout: (line) => {
        this.#lines.push(line);
        this.#stdout.push(line);
      },
      stderr: (line) => {
        this.#lines.push(line);
        this.#stderr.push(line);
      },
    };
    this.#done = run(this.#controller.signal, outputs, () => {
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
    this.exited = this.#done.then(() => this.#exitCode ?? 1);
  }

  /**
   * Starts `kopf run ARGS` in this process. Handler files are imported anew, into a fresh default
   * registry (restored after the runner stops), so several runners in one test file do not mix.
   * @param args Command-line arguments, starting with `run`.
   * @param options Kubeconfig, timeouts and whether stopping rethrows the operator's error.
   * @returns The running operator.
   */
  static start(args: readonly string[], options: RunnerOptions = {}): KopfRunner {
    return new KopfRunner(async (signal, outputs, onReady) => {
      const previous = getDefaultRegistry();
      setDefaultRegistry(new OperatorRegistry());
      try {
        return await main(args, {
          signal,
          write: outputs.stdout,
          writeError: outputs.stderr,
          onReady,
          freshImports: true,
          ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}),
        });
      } finally {
        setDefaultRegistry(previous);
      }
    }, options);
  }

  /**
   * Starts an operator from options (registry, settings, namespaces, client…) in this process.
   * Log messages are captured as lines (`[namespace/name] message`).
   * @param options As for `operator()`.
   * @param runnerOptions Timeouts and whether stopping rethrows the operator's error.
   * @returns The running operator.
   */
  static fromOptions(
    options: Omit<OperatorOptions, "signal" | "onReady">,
    runnerOptions: RunnerOptions = {},
  ): KopfRunner {
    return new KopfRunner(async (signal, outputs, onReady) => {
      const listener = (entry: LogEntry) => {
        const ref = entry.object;
        const prefix = ref ? `[${ref.namespace ? `${ref.namespace}/` : ""}${ref.name}] ` : "";
        // Log lines, as the CLI writes them to standard error.
        outputs.stderr(`${entry.level.toUpperCase()} ${prefix}${entry.message}`);
      };
      const running = start({
        ...options,
        signal,
        listeners: [...(options.listeners ?? []), listener],
      });
      // start() also settles `ready` when the operator fails before it: that is not readiness.
      let failed = false;
      running.done.catch(() => (failed = true));
      running.ready.then(() => failed || onReady());
      await running.done;
      return 0;
    }, runnerOptions);
  }

  /** Everything printed so far (standard output and error as they came), one line per message. */
  get output(): string {
    return this.#lines.join("\n");
  }

  /** The printed lines so far (both streams). */
  get lines(): readonly string[] {
    return this.#lines;
  }

  /** What went to standard output so far (usage, versions, generated output), one line each. */
  get stdout(): string {
    return this.#stdout.join("\n");
  }

  /** {@link KopfRunner.stdout} as UTF-8 bytes. */
  get stdoutBytes(): Uint8Array {
    return new TextEncoder().encode(this.stdout);
  }

  /** What went to standard error so far (log lines and errors), one line each. */
  get stderr(): string {
    return this.#stderr.join("\n");
  }

  /** {@link KopfRunner.stderr} as UTF-8 bytes. */
  get stderrBytes(): Uint8Array {
    return new TextEncoder().encode(this.stderr);
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

  /**
   * Stops the operator and waits for it to exit.
   * @throws {Error} the error that ended the operator (unless `reraise: false`), or a timeout
   * error when it does not exit within `stopTimeoutMs`.
   */
  async stop(): Promise<void> {
    this.#controller.abort(new Error("The test runner stopped the operator"));
    const limit = this.#options.stopTimeoutMs;
    if (limit === undefined) await this.#done;
    else {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<"expired">((resolve) => {
        timer = setTimeout(() => resolve("expired"), limit);
      });
      const outcome = await Promise.race([this.#done, expired]).finally(() => clearTimeout(timer));
      if (outcome === "expired") {
        throw new Error(`The operator did not exit within ${limit} ms of the stop`);
      }
    }
    if (this.#error !== undefined && (this.#options.reraise ?? true)) throw this.#error;
  }

  /** Stops the operator (for `await using`). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
