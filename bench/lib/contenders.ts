/**
 * The contenders (this framework, its variants, Python Kopf, the raw floor, the peers
 * controller-runtime and client-node) and their operator processes.
 * @module
 */
import type { CrdVariant } from "./config.ts";
import { processTree } from "./procs.ts";

export const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");

/** One operator implementation under test. */
export interface Contender {
  readonly id: string;
  readonly label: string;
  /** Prefix of the contender's User-Agent in the audit log. */
  readonly userAgent: string;
  command(namespace: string): string[];
  /** Extra environment of the operator process. */
  readonly env?: Record<string, string>;
  /** The CRD variants it runs on (all if unset). */
  readonly variants?: readonly CrdVariant["id"][];
}

/** Contenders that run only when named in `--only` (diagnostic variants). */
export const OPT_IN: ReadonlySet<string> = new Set([
  "kopf-ts-noevents",
  "client-node-status",
  ...["kopf-ts", "kopf-py"].flatMap((id) => [`${id}-logs-off`, `${id}-logs-on`]),
]);

/**
 * The Events of log messages counted both ways: without `-q` (so that info messages reach the
 * poster), with `settings.posting.loggers` off (the default, as in Kopf 1.44+) and on.
 */
function logEventVariants(base: Contender): Contender[] {
  const verbose = (ns: string) => base.command(ns).filter((arg) => arg !== "-q");
  return [false, true].map((on): Contender => ({
    ...base,
    id: `${base.id}-logs-${on ? "on" : "off"}`,
    label: `${base.label}, no -q, posting.loggers ${on ? "on" : "off"}`,
    command: verbose,
    env: on ? { BENCH_LOGGERS: "1" } : {} as Record<string, string>,
  }));
}

/** The peers' builds (`tools/bench-peers.sh`): absent if not built. */
export interface Peers {
  /** The controller-runtime peer's binary. */
  readonly controllerRuntime?: string;
  /** The directory holding `@kubernetes/client-node` in its `node_modules`. */
  readonly clientNode?: string;
}

/** The peers' User-Agents: controller-runtime's is set; client-node sends node-fetch's own. */
export const PEER_USER_AGENTS = {
  controllerRuntime: "kopf-bench-controller-runtime",
  clientNode: "node-fetch/",
} as const;

/**
 * All contenders; Python Kopf only if its virtualenv is there, the peers only if built. Each
 * peer runs twice on the CRD with a status subresource, as kopf-ts does: with the diff base in
 * an annotation, and (`-status`) in status (`BENCH_PERSISTENCE=status`).
 */
export function contenders(venv: string | undefined, peers: Peers = {}): Contender[] {
  // As a user starts it: the `kopf` command (tools/kopf), which runs `kopf run` with the flags
  // that `kopf build` and `kopf build --image` bake in (RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS).
  const kopfTs = (ns: string) => [
    `${ROOT}/tools/kopf`,
    ...["run", "bench/handlers/kopf_ts.ts"],
    ...["-n", ns, "--standalone", "-q"],
  ];
  const list: Contender[] = [{
    id: "kopf-ts",
    label: "kopf-ts",
    userAgent: "kopf-ts",
    command: kopfTs,
  }, {
    // The opt-in persistence in status (docs/persistence.md): one /status write per cycle.
    id: "kopf-ts-status",
    label: "kopf-ts, state in status",
    userAgent: "kopf-ts",
    command: kopfTs,
    env: { BENCH_PERSISTENCE: "status" },
    variants: ["status"],
  }, {
    id: "kopf-ts-noevents",
    label: "kopf-ts, no Events",
    userAgent: "kopf-ts",
    command: kopfTs,
    env: { BENCH_NO_EVENTS: "1" },
  }];
  list.push(...logEventVariants(list[0]!));
  if (venv) {
    const kopfPy: Contender = {
      id: "kopf-py",
      label: "Kopf (Python)",
      userAgent: "kopf/",
      command: (ns) => [
        `${venv}/bin/kopf`,
        ...["run", "--standalone", "-n", ns, "-q", "bench/handlers/kopf_py.py"],
      ],
    };
    list.push(kopfPy, ...logEventVariants(kopfPy));
  }
  list.push({
    id: "raw-floor",
    label: "raw floor",
    userAgent: "kopf-bench-raw-floor",
    command: (
      ns,
    ) => [`${ROOT}/tools/deno.sh`, "run", "-A", "bench/handlers/raw_floor.ts", "-n", ns],
  });
  const withStatusMode = (peer: Contender): Contender[] => [peer, {
    ...peer,
    id: `${peer.id}-status`,
    label: `${peer.label}, state in status`,
    env: { ...peer.env, BENCH_PERSISTENCE: "status" },
    variants: ["status"],
  }];
  if (peers.controllerRuntime) {
    const bin = peers.controllerRuntime;
    list.push(...withStatusMode({
      id: "controller-runtime",
      label: "controller-runtime",
      userAgent: PEER_USER_AGENTS.controllerRuntime,
      command: (ns) => [bin, "-n", ns],
    }));
  }
  if (peers.clientNode) {
    list.push(...withStatusMode({
      id: "client-node",
      label: "client-node",
      userAgent: PEER_USER_AGENTS.clientNode,
      command: (ns) => ["node", `${ROOT}/bench/peers/client_node/main.mjs`, "-n", ns],
      env: { BENCH_CLIENT_NODE_DIR: peers.clientNode },
    }));
  }
  return list;
}

/** Operators still running (stopped at the end, also after an error or a signal). */
export const RUNNING: Set<Operator> = new Set();

/** A contender's operator process; output goes to a log file. */
export class Operator {
  readonly child: Deno.ChildProcess;
  readonly spawnedAt: number;
  readonly logPath: string;
  status: Deno.CommandStatus | undefined;
  readonly exited: Promise<Deno.CommandStatus>;

  constructor(cmd: string[], env: Record<string, string>, logPath: string) {
    this.logPath = logPath;
    this.spawnedAt = Date.now();
    // The shell only redirects the output and then becomes the operator (exec): same pid.
    this.child = new Deno.Command("/bin/sh", {
      args: ["-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "sh", logPath, ...cmd],
      cwd: ROOT,
      env,
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    this.exited = this.child.status.then((status) => (this.status = status));
    RUNNING.add(this);
  }

  get pid(): number {
    return this.child.pid;
  }

  pids(): number[] {
    return this.status ? [] : processTree(this.pid);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; returns how long the exit took (ms). */
  async stop(graceMs = 15_000): Promise<number> {
    const started = Date.now();
    if (!this.status) {
      try {
        this.child.kill("SIGTERM");
      } catch { /* already gone */ }
      const timer = setTimeout(() => {
        for (const pid of processTree(this.pid).reverse()) {
          try {
            Deno.kill(pid, "SIGKILL");
          } catch { /* gone */ }
        }
      }, graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    RUNNING.delete(this);
    return Date.now() - started;
  }

  logTail(lines = 20): string {
    try {
      return Deno.readTextFileSync(this.logPath).trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "";
    }
  }
}

/** Handler runs recorded by the handlers in `$BENCH_RUNLOG`: `handler name started`. */
export function readRuns(path: string): { handler: string; name: string }[] {
  try {
    return Deno.readTextFileSync(path).split("\n").filter(Boolean).map((line) => {
      const [handler = "", name = ""] = line.split(" ");
      return { handler, name };
    });
  } catch {
    return [];
  }
}

export const log = (message: string) =>
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const names = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(5, "0")}`);

export function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const item of items) result[key(item)] = (result[key(item)] ?? 0) + 1;
  return result;
}

/** The trimmed output of a command, or why it is unavailable. */
export async function commandOutput(cmd: string[], timeoutMs = 60_000): Promise<string> {
  try {
    const output = await new Deno.Command(cmd[0]!, {
      args: cmd.slice(1),
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(timeoutMs),
    }).output();
    return new TextDecoder().decode(output.stdout).trim() ||
      new TextDecoder().decode(output.stderr).trim();
  } catch (error) {
    return `unavailable (${error instanceof Error ? error.message : error})`;
  }
}
