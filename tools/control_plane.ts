/**
 * Runs one test control plane (etcd + kube-apiserver + kube-controller-manager) until SIGINT or
 * SIGTERM, so that a whole test run shares it (see `sharedControlPlane()` in
 * testing/control_plane.ts, which picks it up from `$KOPF_TS_TEST_KUBECONFIG`).
 *
 * Usage:
 *   deno run -A tools/control_plane.ts start [options]
 *
 * Options:
 *   --env-file PATH            Also write the `export …` lines to PATH (atomically, once ready;
 *                              removed again on exit). Wait for this file to appear.
 *   --print-env                Print the `export …` lines on stdout (the default).
 *   --no-print-env             Don't.
 *   --uncached RESOURCE        Serve watches of RESOURCE (plural[.group]) from etcd, bypassing
 *                              the apiserver's watch cache, so that etcd compaction turns old
 *                              watches into 410 Gone (repeatable; replaces the default,
 *                              `podtemplates`; `--uncached ''` for none).
 *   --no-watch-cache           Disable the watch cache for all resources.
 *   --no-controller-manager    Run without kube-controller-manager.
 *   --bin-dir DIR              Where etcd/kube-apiserver/kube-controller-manager are
 *                              (default: $KOPF_TS_KUBE_BIN or tools/kube-binaries.sh's cache).
 *   --keep-dir                 Keep the working directory (logs, etcd data) after stopping.
 *   --apiserver-arg FLAG       Extra kube-apiserver flag (repeatable), e.g. --apiserver-arg=--v=4.
 *   --node                     Also run a node (containerd, kubelet, kube-scheduler; see
 *                              testing/plane/node.ts): Linux, root, and inside tools/netns.sh.
 *                              Load images with
 *                              ctr --address "$KOPF_TS_TEST_CONTAINERD" -n k8s.io images import TAR
 *
 * The exported variables are KOPF_TS_TEST_KUBECONFIG (the admin kubeconfig) and
 * KOPF_TS_TEST_ETCD_URL (for compaction); with --node also KOPF_TS_TEST_NODE (the Node's name),
 * KOPF_TS_TEST_CONTAINERD (containerd's socket) and KOPF_TS_TEST_APISERVER_PORT (for
 * KUBERNETES_SERVICE_PORT in Pod specs). Progress and errors go to stderr.
 * Exit codes: 0 after a signal-initiated stop, 1 if the plane could not start, 2 on bad usage.
 *
 * From bash:
 *   tools/deno.sh run -A tools/control_plane.ts start --env-file "$tmp/env" >"$tmp/log" 2>&1 &
 *   pid=$!
 *   until [[ -s "$tmp/env" ]]; do kill -0 "$pid" || exit 1; sleep 0.5; done
 *   source "$tmp/env"
 *   ...
 *   kill "$pid"; wait "$pid"
 * @module
 */

import { ControlPlane, type ControlPlaneOptions } from "../testing/control_plane.ts";
import { TestNode } from "../testing/plane/node.ts";

interface CliOptions {
  envFile: string | undefined;
  printEnv: boolean;
  node: boolean;
  plane: ControlPlaneOptions;
}

function usage(message: string): never {
  console.error(`error: ${message}`);
  console.error(
    "usage: deno run -A tools/control_plane.ts start [--env-file PATH] [--print-env] " +
      "[--uncached RESOURCE]... [--no-watch-cache] [--no-controller-manager] [--bin-dir DIR] [--keep-dir] " +
      "[--apiserver-arg FLAG]... [--node]",
  );
  Deno.exit(2);
}

function parseArgs(args: readonly string[]): CliOptions {
  const [command, ...rest] = args;
  if (command !== "start") usage(command ? `unknown command: ${command}` : "missing command");
  const options: CliOptions = { envFile: undefined, printEnv: true, node: false, plane: {} };
  const apiServerArgs: string[] = [];
  const uncached: string[] = [];
  let uncachedGiven = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i] ?? "";
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    const value = (): string => {
      if (eq > 0 && arg.startsWith("--")) return arg.slice(eq + 1);
      const next = rest[++i];
      if (next === undefined) usage(`${name} needs a value`);
      return next;
    };
    switch (name) {
      case "--env-file":
        options.envFile = value();
        break;
      case "--print-env":
        options.printEnv = true;
        break;
      case "--no-print-env":
        options.printEnv = false;
        break;
      case "--uncached":
        uncached.push(...value().split(",").filter(Boolean));
        uncachedGiven = true;
        break;
      case "--no-watch-cache":
        options.plane.watchCache = false;
        break;
      case "--no-controller-manager":
        options.plane.controllerManager = false;
        break;
      case "--bin-dir":
        options.plane.binDir = value();
        break;
      case "--keep-dir":
        options.plane.keepDir = true;
        break;
      case "--apiserver-arg":
        apiServerArgs.push(value());
        break;
      case "--node":
        options.node = true;
        break;
      default:
        usage(`unknown option: ${arg}`);
    }
  }
  if (apiServerArgs.length > 0) options.plane.apiServerArgs = apiServerArgs;
  if (uncachedGiven) options.plane.uncachedResources = uncached;
  return options;
}

function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'"'"'`)}'`;
}

async function main(): Promise<number> {
  const cli = parseArgs(Deno.args);
  const aborter = new AbortController();
  let plane: ControlPlane | undefined;
  let node: TestNode | undefined;
  let resolveStop: (signo: number) => void = () => {};
  const stopRequested = new Promise<number>((resolve) => (resolveStop = resolve));
  const handlers = ([["SIGINT", 2], ["SIGTERM", 15]] as const).map(([name, signo]) => {
    const handler = () => {
      aborter.abort(new Error(`interrupted by ${name}`));
      resolveStop(signo);
    };
    Deno.addSignalListener(name, handler);
    return [name, handler] as const;
  });
  // Signal listeners and the plane's (unref'd) processes don't keep Deno running; this does.
  const keepAlive = setInterval(() => {}, 1 << 30);
  try {
    const started = Date.now();
    try {
      plane = await ControlPlane.start({
        ...cli.plane,
        signal: aborter.signal,
        handleSignals: false,
      });
      if (cli.node) {
        node = await TestNode.start(plane, { signal: aborter.signal, handleSignals: false });
      }
    } catch (error) {
      if (aborter.signal.aborted) {
        console.error("[control-plane] interrupted while starting");
        return 128 + (await stopRequested);
      }
      console.error(`[control-plane] ${error instanceof Error ? error.message : String(error)}`);
      return 1;
    }
    const env = [
      `export KOPF_TS_TEST_KUBECONFIG=${shellQuote(plane.kubeconfigPath)}`,
      `export KOPF_TS_TEST_ETCD_URL=${shellQuote(plane.etcdUrl)}`,
      ...(node
        ? [
          `export KOPF_TS_TEST_NODE=${shellQuote(node.name)}`,
          `export KOPF_TS_TEST_CONTAINERD=${shellQuote(node.containerdSocket)}`,
          `export KOPF_TS_TEST_APISERVER_PORT=${node.apiServerPort}`,
        ]
        : []),
      "",
    ].join("\n");
    if (cli.envFile) {
      await Deno.writeTextFile(`${cli.envFile}.tmp`, env);
      await Deno.rename(`${cli.envFile}.tmp`, cli.envFile);
    }
    if (cli.printEnv) await Deno.stdout.write(new TextEncoder().encode(env));
    console.error(
      `[control-plane] ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ` +
        `server ${plane.server}, etcd ${plane.etcdUrl}, kubeconfig ${plane.kubeconfigPath}` +
        (node ? `, node ${node.name} (containerd ${node.containerdSocket})` : "") + "; " +
        "stop with SIGINT/SIGTERM",
    );
    const signo = await stopRequested;
    console.error(`[control-plane] stopping (signal ${signo})`);
    return 0;
  } finally {
    await node?.stop();
    await plane?.stop();
    if (cli.envFile) {
      await Deno.remove(cli.envFile).catch(() => {});
      await Deno.remove(`${cli.envFile}.tmp`).catch(() => {});
    }
    for (const [name, handler] of handlers) Deno.removeSignalListener(name, handler);
    clearInterval(keepAlive);
  }
}

if (import.meta.main) Deno.exit(await main());
