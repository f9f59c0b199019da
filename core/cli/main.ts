/**
 * The command line: `kopf run [options] [FILES…]`. Loads handler files and modules by dynamic
 * import, configures logging, runs the operator until SIGINT/SIGTERM, and exits cleanly.
 *
 * Every startup failure (a module that cannot be imported, a cluster that cannot be reached,
 * a broken kubeconfig, contradictory options) is one `error:` line and exit code 1.
 * @module
 */

import { parseArgs } from "node:util";
import denoConfig from "../../deno.json" with { type: "json" };
import { Logger } from "../actions/loggers.ts";
import { ConfigError } from "../client/config.ts";
import { LoginError } from "../client/vault.ts";
import { ActivityError } from "../engines/runners/activities.ts";
import { endpointUrl } from "../engines/observability/probing.ts";
import { operator, OperatorStartError } from "../reactor/lifetime/running.ts";
import { createSettings, PAGE_OUT_DELAY_S } from "../settings/settings.ts";
import { argsErrorMessage } from "./args.ts";
import { armUltimateExit } from "../api/embedding.ts";
import { loadModule } from "./loading.ts";
import { applyScalingOptions, SCALING_OPTIONS, SCALING_USAGE, shardsCommand } from "./scaling.ts";
import { LeadershipLostError } from "../engines/coordination/leadership.ts";
import { configureLogging } from "../api/logging.ts";
import {
  firstLine,
  fromEnvironment,
  LOGGING_OPTIONS,
  LOGGING_USAGE,
  loggingOf,
} from "./options.ts";
import { peeringCommand } from "./peering_commands.ts";

/** Exit code and nothing else: the CLI never throws for user errors. */
export type ExitCode = number;

/** The package version, from deno.json. */
export const VERSION: string = denoConfig.version;

const USAGE = `Usage: kopf run [OPTIONS] [FILES]...

Run an operator with the handlers from the given files and modules.

Options:
  -m, --module MODULE       Import a module (specifier or path); repeatable.
  -n, --namespace PATTERN   Serve namespaces matching the pattern (globs, !negation, commas); repeatable.
  -A, --all-namespaces      Serve the whole cluster with cluster-wide watches.
      --standalone          Run without peering.
  -P, --peering NAME        Peering object name; wait paused until it exists (default: use
                            'default' if it exists, else run standalone).
  -p, --priority N          Peering priority (default 0); the highest live one works.
      --dev                 Development mode: priority 666.
  -L, --liveness URL        Serve the liveness endpoint, e.g. http://0.0.0.0:8080/healthz.
      --metrics URL         Serve Prometheus metrics, e.g. http://0.0.0.0:9090/metrics.
      --kubeconfig PATH     Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or in-cluster).
      --embedded            No cluster needed: serve an in-memory Kubernetes API on 127.0.0.1,
                            apply the CRDs from crds/ (and --crd files), print its kubeconfig.
      --crd FILE            With --embedded: also apply this YAML file; repeatable.
      --context NAME        Kubeconfig context.
${SCALING_USAGE}${LOGGING_USAGE}  -h, --help                Show this help.

Every option can also be given as an environment variable KOPF_RUN_<NAME> (see docs/cli.md);
options on the command line win. Other commands: kopf freeze, kopf resume (pause and resume
running operators; see --help), kopf shards (who holds which shards). kopf --version prints
the version.
Tooling (see docs/tooling.md): kopf init NAME (a new project), kopf generate types|rbac,
kopf build (one binary).
`;

/** \`kopf --help\`: the commands. */
const COMMANDS_USAGE = `Usage: kopf COMMAND [OPTIONS] [ARGS]...

Kopf for Deno: Kubernetes operators in TypeScript.

Commands:
  run FILES...              Run an operator with the handlers of these files and modules.
  freeze, resume            Pause running operators for a while (peering), and resume them.
  shards                    Which replica holds which shards (kopf run --shards).
  init NAME                 Create a new operator project in the directory NAME.
  generate types CRD...     TypeScript types of custom resources from their CRDs.
  generate rbac FILES...    The RBAC manifests the handlers need; --verify checks a cluster.
  build FILES...            One binary of the framework and the handlers.

Options:
  -h, --help                Show this help; kopf COMMAND --help shows a command's options.
      --version             Show the version.

See docs/cli.md and docs/tooling.md.
`;

/** How the CLI is embedded (by the testing runner); all optional for the real command line. */
export interface MainOptions {
  /**
   * Receives every output line instead of standard output and error (logs and errors too, unless
   * {@link MainOptions.writeError} is given).
   */
  readonly write?: (line: string) => void;
  /**
   * Receives what would go to standard error (logs, errors, progress of `generate`/`init`/
   * `build`); {@link MainOptions.write} then receives only what would go to standard output
   * (usage, versions, generated manifests).
   */
  readonly writeError?: (line: string) => void;
  /** Stops the operator (instead of SIGINT/SIGTERM, which are then not listened to). */
  readonly signal?: AbortSignal;
  /** Called when the operator is ready (all served resources listed once). */
  readonly onReady?: () => void;
  /** Import handler files anew even if this process imported them before. */
  readonly freshImports?: boolean;
  /** Kubeconfig file to use unless `--kubeconfig` is given. */
  readonly kubeconfig?: string;
  /**
   * Starts an embedded Kubernetes API for `--embedded` (given by `cli.ts`, which may use the
   * in-memory emulator kit; the core cannot import kits) with the CRD files to apply.
   */
  readonly embedded?: (crds: readonly string[], write: (line: string) => void) => Promise<
    EmbeddedApi
  >;
}

/** A running embedded Kubernetes API (`kopf run --embedded`). */
export interface EmbeddedApi {
  /** Its kubeconfig file (it holds the API's token). */
  readonly kubeconfig: string;
  /** Stops serving and removes the kubeconfig. */
  readonly stop: () => Promise<void>;
  /**
   * Removes the kubeconfig at once, synchronously, for the exits that cannot wait for `stop()`:
   * a second signal, the ultimate exiting timeout, an uncaught error. Must not throw.
   */
  readonly discard?: () => void;
}

/**
 * Removes the embedded API's kubeconfig (with its token) on the exits that skip `finally`
 * blocks: `Deno.exit()` (a second signal, the ultimate exiting timeout) dispatches `unload`;
 * an uncaught error or unhandled rejection dispatches `error` / `unhandledrejection` before the
 * process dies (the default report and exit code stay as they are).
 * @param api The embedded API.
 * @returns What removes the listeners again.
 */
function discardOnAbruptExit(api: EmbeddedApi): () => void {
  const discard = () => api.discard?.();
  const events = ["unload", "error", "unhandledrejection"] as const;
  for (const event of events) globalThis.addEventListener(event, discard);
  return () => {
    for (const event of events) globalThis.removeEventListener(event, discard);
  };
}

const RUN_OPTIONS = {
  module: { type: "string", short: "m", multiple: true },
  namespace: { type: "string", short: "n", multiple: true },
  "all-namespaces": { type: "boolean", short: "A" },
  standalone: { type: "boolean" },
  peering: { type: "string", short: "P" },
  priority: { type: "string", short: "p" },
  dev: { type: "boolean" },
  liveness: { type: "string", short: "L" },
  metrics: { type: "string" },
  kubeconfig: { type: "string" },
  embedded: { type: "boolean" },
  crd: { type: "string", multiple: true },
  context: { type: "string" },
  ...SCALING_OPTIONS,
  ...LOGGING_OPTIONS,
  help: { type: "boolean", short: "h" },
} as const;

/**
 * Runs the CLI.
 * @param args Command-line arguments (without the program name).
 * @returns The exit code.
 */
export async function main(args: readonly string[], options: MainOptions = {}): Promise<ExitCode> {
  const { out, print } = outputsOf(options);
  const fail = (message: string): ExitCode => {
    print(`error: ${message}`);
    return 1;
  };
  const [command, ...rest] = args;
  if (!command || command === "-h" || command === "--help" || command === "help") {
    out(COMMANDS_USAGE);
    return command ? 0 : 1;
  }
  if (command === "--version") {
    out(`kopf, version ${VERSION}`);
    return 0;
  }
  if (command === "freeze" || command === "resume") {
    return await peeringCommand(command, rest, {
      out,
      print,
      logs: logsOf(options),
      kubeconfig: options.kubeconfig,
    });
  }
  if (command === "shards") {
    return await shardsCommand(rest, {
      print,
      output: out,
      kubeconfig: options.kubeconfig,
    });
  }
  if (command === "generate" || command === "init" || command === "build") {
    const { tooling } = await import("./generate/commands.ts");
    return await tooling(command, rest, {
      print,
      output: out,
      kubeconfig: options.kubeconfig,
    });
  }
  if (command !== "run") {
    return fail(
      `Unknown command '${command}'; use run, freeze, resume, generate, init or build (see kopf --help)`,
    );
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: [...rest],
      allowPositionals: true,
      options: RUN_OPTIONS,
    });
  } catch (error) {
    return fail(`${argsErrorMessage(error)} (see kopf run --help)`);
  }
  const o = parsed.values;
  if (o.help) {
    out(USAGE);
    return 0;
  }
  const invalid = fromEnvironment("run", o, RUN_OPTIONS);
  if (invalid) return fail(invalid);
  const namespaces = [...(o.namespace ?? [])];
  const legacy = Deno.env.get("KOPF_RUN_NAMESPACE");
  if (legacy) namespaces.push(legacy);
  if (o["all-namespaces"] && namespaces.length) {
    return fail("--namespace and --all-namespaces are mutually exclusive");
  }
  const logging = loggingOf(o);
  if (typeof logging === "string") return fail(logging);
  const priority = o.dev ? 666 : o.priority === undefined ? undefined : Number(o.priority);
  if (priority !== undefined && !Number.isInteger(priority)) {
    return fail(`--priority must be an integer, got '${o.priority}'`);
  }
  if (!parsed.positionals.length && !o.module?.length) {
    return fail("Nothing to run: give handler files or -m modules (see kopf run --help)");
  }
  for (const [option, what] of [["metrics", o.metrics], ["liveness", o.liveness]] as const) {
    if (what === undefined) continue;
    try {
      endpointUrl(what, option);
    } catch (error) {
      return fail(`--${option}: ${firstLine(error)}`);
    }
  }

  await configureLogging({ ...logging, ...logsOf(options) });
  for (
    const [target, isModule] of [
      ...parsed.positionals.map((p) => [p, false] as const),
      ...(o.module ?? []).map((m) => [m, true] as const),
    ]
  ) {
    try {
      await loadModule(target, isModule, options.freshImports ?? false);
    } catch (error) {
      // One line naming the place and the mistake; a syntax error's code frame follows it.
      const why = error instanceof Error ? error.message : String(error);
      return fail(`Cannot load handlers from ${target}: ${why}`);
    }
  }

  if (!namespaces.length && !o["all-namespaces"]) {
    // After loading, so a module that cannot load stays one error line. As Kopf, which serves
    // the cluster then too but warns that it will insist on a choice.
    new Logger(["kopf", "operator"]).warning(
      "Neither --namespace nor --all-namespaces is given: serving the whole cluster. Give " +
        "-A (--all-namespaces) or -n NAMESPACE explicitly; a later version may require one.",
    );
  }

  if (o.embedded) {
    if (!options.embedded) return fail("--embedded is not available in this build");
    if (o.kubeconfig) return fail("--embedded and --kubeconfig are mutually exclusive");
  } else if (o.crd?.length) return fail("--crd needs --embedded");

  const controller = new AbortController();
  const settings = createSettings();
  // The process is the operator's: once started, its executable's start-up pages go back
  // (settings.process.pageOutDelay; a startup handler may change it).
  settings.process.pageOutDelay = PAGE_OUT_DELAY_S;
  // As in Kopf, where --quiet keeps info messages from ever reaching the Events poster.
  if (o.quiet) settings.posting.level = "warning";
  const scaling = applyScalingOptions(o, settings);
  if (scaling) return fail(scaling);
  let signals = 0;
  let ultimate: ReturnType<typeof setTimeout> | undefined;
  const onSignal = () => {
    signals++;
    if (signals > 1) Deno.exit(130); // A second signal: stop waiting for a graceful exit.
    controller.abort(new Error("Signal received"));
    ultimate = armUltimateExit(settings); // if the graceful exit hangs, exit anyway
  };
  const stop = options.signal
    ? AbortSignal.any([options.signal, controller.signal])
    : controller.signal;
  const listening: Deno.Signal[] = options.signal
    ? []
    : Deno.build.os === "windows"
    ? ["SIGINT"]
    : ["SIGINT", "SIGTERM"];
  // Listened to before the embedded API starts: a signal while it starts stops it cleanly too
  // (without a listener, the signal would kill the process and leave its kubeconfig behind).
  for (const sig of listening) Deno.addSignalListener(sig, onSignal);
  let embedded: EmbeddedApi | undefined;
  let keepDiscarding = () => {};
  try {
    if (o.embedded) {
      try {
        embedded = await options.embedded!(o.crd ?? [], print);
      } catch (error) {
        return fail(`Cannot start the embedded Kubernetes API: ${firstLine(error)}`);
      }
      keepDiscarding = discardOnAbruptExit(embedded);
      if (stop.aborted) return 0; // stopped while it started: nothing else to stop
    }
    await operator({
      settings,
      namespaces,
      clusterwide: o["all-namespaces"] ?? !namespaces.length,
      ...(o.standalone ? { standalone: true } : {}),
      ...(o.peering ? { peering: o.peering } : {}),
      ...(priority !== undefined ? { priority } : {}),
      ...(o.liveness ? { liveness: o.liveness } : {}),
      ...(o.metrics ? { metrics: o.metrics } : {}),
      ...(embedded
        ? { kubeconfig: embedded.kubeconfig }
        : o.kubeconfig ?? options.kubeconfig
        ? { kubeconfig: (o.kubeconfig ?? options.kubeconfig)! }
        : {}),
      ...(o.context ? { context: o.context } : {}),
      signal: stop,
      ...(options.onReady ? { onReady: options.onReady } : {}),
    });
    return 0;
  } catch (error) {
    // A signal during the startup (before every stream runs) ends a step with the stop's own
    // reason: the stop was asked for and done, not a failure.
    const stopped = stop.aborted &&
      (error === stop.reason ||
        (error instanceof DOMException && error.name === "AbortError"));
    if (stopped) return 0;
    if (
      error instanceof ConfigError || error instanceof OperatorStartError ||
      error instanceof ActivityError || error instanceof LoginError ||
      error instanceof LeadershipLostError || error instanceof RangeError
    ) {
      return fail(error.message);
    }
    if (error instanceof Deno.errors.AddrInUse) return fail(addressInUse(error, o));
    print(String(error instanceof Error ? error.stack ?? error.message : error));
    return 1;
  } finally {
    // Cleanup on every exit path: the embedded API stops and its kubeconfig (with the token) is
    // removed whether the operator stopped, failed to start, or was stopped by a signal.
    try {
      await embedded?.stop();
    } finally {
      embedded?.discard?.();
      keepDiscarding();
      for (const sig of listening) Deno.removeSignalListener(sig, onSignal);
      clearTimeout(ultimate);
    }
  }
}

/**
 * Which of the endpoint options asks for a port another process holds, as one line: the
 * endpoints are tried again (each is closed by now) and the one that cannot listen is named.
 */
function addressInUse(
  error: Error,
  o: { readonly liveness?: string | undefined; readonly metrics?: string | undefined },
): string {
  for (const [option, url] of [["liveness", o.liveness], ["metrics", o.metrics]] as const) {
    if (!url) continue;
    const { hostname, port } = new URL(url);
    const number = Number(port || 80);
    try {
      const listener = Deno.listen({ hostname: hostname.replace(/^\[|\]$/g, ""), port: number });
      listener.close();
    } catch (again) {
      if (again instanceof Deno.errors.AddrInUse) {
        return `--${option}: port ${number} is in use (another process listens on it); choose ` +
          "another port";
      }
    }
  }
  return firstLine(error);
}

/** Where the CLI writes: standard output (`out`) and standard error (`print`). */
function outputsOf(options: MainOptions): {
  out: (line: string) => void;
  print: (line: string) => void;
} {
  return {
    out: options.write ?? ((line) => console.log(line)),
    print: embeddedErrors(options) ?? ((line) => console.error(line)),
  };
}

/** Where log lines go when embedded (else logging's own default, standard error). */
function logsOf(options: MainOptions): { write?: (line: string) => void } {
  const write = embeddedErrors(options);
  return write ? { write } : {};
}

/** The embedder's receiver of standard error's lines, if any. */
function embeddedErrors(options: MainOptions): ((line: string) => void) | undefined {
  return options.writeError ?? options.write;
}
