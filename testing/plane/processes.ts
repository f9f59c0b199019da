/**
 * The control plane's processes: spawning helpers, signals and timeouts, the watchdog that
 * outlives a hard-killed test process, the registry of runs and the reaper of orphaned ones,
 * and where the binaries are. Used by `../control_plane.ts`.
 * @module
 */

/** The Kubernetes version that `tools/kube-binaries.sh` builds by default. */
export const DEFAULT_K8S_VERSION = "v1.36.3";

/** The etcd version that `tools/kube-binaries.sh` builds by default. */
export const DEFAULT_ETCD_VERSION = "v3.6.16";

/** A file that marks a directory as a control plane's own (the reaper removes only those). */
export const MARKER = ".kopf-ts-plane";

export const COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager"] as const;

/** The test node's processes (`./node.ts`). */
export const NODE_COMPONENTS = ["containerd", "kube-scheduler", "kubelet"] as const;

export type ComponentName = typeof COMPONENTS[number] | typeof NODE_COMPONENTS[number];

export interface Component {
  readonly name: ComponentName;
  readonly child: Deno.ChildProcess;
  readonly logPath: string;
  status: Deno.CommandStatus | undefined;
  readonly exited: Promise<Deno.CommandStatus>;
}

export function trySignal(child: Deno.ChildProcess, signal: Deno.Signal): void {
  try {
    child.kill(signal);
  } catch { /* already exited */ }
}

export async function terminate(component: Component, graceMs: number): Promise<void> {
  if (component.status) return;
  component.child.ref(); // keep the Deno process alive until the child is gone
  trySignal(component.child, "SIGTERM");
  if (await exitsWithin(component.exited, graceMs)) return;
  trySignal(component.child, "SIGKILL");
  await exitsWithin(component.exited, 10_000);
}

export async function exitsWithin(exited: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([exited.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function killWatchdog(watchdog: Deno.ChildProcess | undefined): Promise<void> {
  if (!watchdog) return;
  watchdog.ref();
  trySignal(watchdog, "SIGKILL");
  await exitsWithin(watchdog.status, 5_000);
}

/**
 * A detached-enough shell (Linux only) that outlives a hard-killed Deno process and then kills
 * the recorded children (verifying that their command line mentions the working directory,
 * so that a recycled pid is never hit) and removes the directories.
 */
export async function spawnWatchdog(
  runDir: string,
  dir: string,
): Promise<Deno.ChildProcess | undefined> {
  if (!(await exists("/proc/self/cmdline"))) return undefined;
  const script = `
    owner=$1 run=$2 data=$3
    while kill -0 "$owner" 2>/dev/null; do sleep 1; done
    ours() { [ -r "/proc/$1/cmdline" ] && tr '\\0' '\\n' <"/proc/$1/cmdline" | grep -qF -- "$data"; }
    for sig in TERM KILL; do
      for pid in $(cat "$run/children.pids" 2>/dev/null); do
        ours "$pid" && kill -s "$sig" "$pid" 2>/dev/null
      done
      [ "$sig" = TERM ] && sleep 3
    done
    [ -e "$data/${MARKER}" ] && rm -rf -- "$data"
    rm -rf -- "$run"
  `;
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", script, "kopf-ts-watchdog", String(Deno.pid), runDir, dir],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  return child;
}

export async function waitUntil(
  what: string,
  deadline: number,
  signal: AbortSignal | undefined,
  components: readonly Component[],
  probe: () => Promise<boolean>,
): Promise<void> {
  // A probe may hang until its own timeout; a component's exit ends the wait at once.
  const anyExit = Promise.race(components.map((component) => component.exited)).then(() => false);
  for (;;) {
    signal?.throwIfAborted();
    for (const component of components) {
      if (component.status) {
        const how = component.status.signal ?? `code ${component.status.code}`;
        throw new Error(`${component.name} exited (${how}) while waiting for ${what}`);
      }
    }
    try {
      if (await Promise.race([probe(), anyExit])) return;
    } catch { /* not up yet */ }
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(150, signal);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

export function freePorts(count: number): number[] {
  // Keep all listeners open until all ports are chosen, so that they are distinct.
  const listeners = Array.from(
    { length: count },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const listener of listeners) listener.close();
  return ports;
}

// Files, directories, and the registry of runs for reaping orphans.

export function cacheRoot(): string {
  const explicit = Deno.env.get("KOPF_TS_CACHE");
  if (explicit) return explicit;
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return `${xdg || `${home}/.cache`}/kopf-ts`;
}

export function defaultBinDir(): string {
  const explicit = Deno.env.get("KOPF_TS_KUBE_BIN");
  if (explicit) return explicit;
  const k8s = Deno.env.get("KOPF_TS_K8S_VERSION") || DEFAULT_K8S_VERSION;
  const etcd = Deno.env.get("KOPF_TS_ETCD_VERSION") || DEFAULT_ETCD_VERSION;
  return `${cacheRoot()}/kube/${k8s}-etcd-${etcd}/bin`;
}

export async function checkBinaries(binDir: string, withKcm: boolean): Promise<void> {
  const wanted: string[] = [
    "etcd",
    "kube-apiserver",
    ...(withKcm ? ["kube-controller-manager"] : []),
  ];
  const missing: string[] = [];
  for (const name of wanted) {
    if (!(await exists(`${binDir}/${name}`))) missing.push(name);
  }
  if (missing.length > 0) {
    throw new Error(
      `the test control plane binaries are missing (${missing.join(", ")} not in ${binDir}). ` +
        "Build them once with `tools/kube-binaries.sh` — it needs a Go toolchain (>= 1.26) and " +
        "the Go module proxy, takes about 5 minutes the first time, and caches the result — or " +
        "set KOPF_TS_KUBE_BIN to a directory that has etcd, kube-apiserver and " +
        "kube-controller-manager.",
    );
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

export function readText(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return "";
  }
}

export async function removeQuietly(path: string): Promise<void> {
  try {
    await Deno.remove(path, { recursive: true });
  } catch { /* already gone */ }
}

export async function makeWorkDir(parent: string | undefined): Promise<string> {
  const prefix = "kopf-ts-plane-";
  if (parent !== undefined) {
    await Deno.mkdir(parent, { recursive: true });
    return await Deno.makeTempDir({ dir: parent, prefix });
  }
  if (await exists("/dev/shm")) {
    try {
      return await Deno.makeTempDir({ dir: "/dev/shm", prefix });
    } catch { /* not writable: fall back to the temp dir */ }
  }
  return await Deno.makeTempDir({ prefix });
}

/** Linux: a process's start time in clock ticks since boot (field 22 of /proc/PID/stat). */
export function processStartTime(pid: number): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19];
}

export async function processCommandLine(pid: number): Promise<string | undefined> {
  if (await exists("/proc/self/cmdline")) {
    const text = readText(`/proc/${pid}/cmdline`);
    return text ? text.replaceAll("\0", " ") : undefined;
  }
  try {
    const output = await new Deno.Command("ps", {
      args: ["-o", "command=", "-p", String(pid)],
      stdout: "piped",
      stderr: "null",
    }).output();
    const text = new TextDecoder().decode(output.stdout).trim();
    return output.success && text ? text : undefined;
  } catch {
    return undefined;
  }
}

export async function processAlive(pid: number, startTime: string | undefined): Promise<boolean> {
  if (await exists("/proc/self/stat")) {
    const actual = processStartTime(pid);
    return actual !== undefined && (startTime === undefined || startTime === actual);
  }
  try {
    Deno.kill(pid, "SIGCONT"); // no-op for a running process; throws if there is none
    return true;
  } catch {
    return false;
  }
}

export async function registerRun(dir: string): Promise<string> {
  const runsDir = `${cacheRoot()}/runs`;
  await Deno.mkdir(runsDir, { recursive: true });
  const runDir = await Deno.makeTempDir({ dir: runsDir, prefix: `${Deno.pid}-` });
  await Deno.writeTextFile(`${runDir}/data-dir`, `${dir}\n`);
  const startTime = processStartTime(Deno.pid) ?? "";
  await Deno.writeTextFile(`${runDir}/owner.pid.tmp`, `${Deno.pid} ${startTime}\n`);
  await Deno.rename(`${runDir}/owner.pid.tmp`, `${runDir}/owner.pid`);
  return runDir;
}

/** Kills the processes and removes the directories of runs whose owner process is dead. */
export async function reapOrphanedRuns(): Promise<void> {
  const runsDir = `${cacheRoot()}/runs`;
  if (!(await exists(runsDir))) return;
  for await (const entry of Deno.readDir(runsDir)) {
    if (!entry.isDirectory) continue;
    const runDir = `${runsDir}/${entry.name}`;
    const owner = readText(`${runDir}/owner.pid`).trim().split(" ");
    const ownerPid = Number(owner[0]);
    if (!Number.isInteger(ownerPid) || ownerPid <= 0) {
      // Being created right now, or garbage: only reap once it is clearly stale.
      const info = await Deno.stat(runDir).catch(() => undefined);
      if (!info?.mtime || Date.now() - info.mtime.getTime() < 60_000) continue;
    } else if (await processAlive(ownerPid, owner[1] || undefined)) {
      continue;
    }
    const dir = readText(`${runDir}/data-dir`).trim();
    const pids = readText(`${runDir}/children.pids`).split("\n").map(Number).filter((p) => p > 0);
    for (const pid of pids) {
      const cmdline = await processCommandLine(pid);
      if (dir && cmdline?.includes(dir)) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
    }
    if (dir && (await exists(`${dir}/${MARKER}`))) await removeQuietly(dir);
    await removeQuietly(runDir);
  }
}
