/**
 * Benchmarks this framework side by side with Python Kopf and a raw floor, on ONE real control
 * plane in one run, and reports absolute figures and ratios. See docs/performance.md.
 *
 *   deno task bench                          # the quick variant (a few minutes on 2 cores)
 *   deno run -A bench/run.ts --full          # the full variant (1,000 / 10,000 objects)
 *   deno run -A bench/run.ts --reps 3        # repeat; the table shows medians
 *   deno run -A bench/run.ts --only kopf-ts,raw-floor
 *   deno run -A bench/run.ts --report bench/results/<file>.json   # re-render a table
 *
 * Contenders run one after the other, each in its own namespaces, as separate processes:
 * `kopf-ts` (this framework, `cli.ts run bench/handlers/kopf_ts.ts`), `kopf-py` (Python Kopf
 * from PyPI via tools/python-kopf.sh, `bench/handlers/kopf_py.py`) and `raw-floor`
 * (`bench/handlers/raw_floor.ts`). Requests are counted from the API server's audit log.
 * Timings here are measurements, not assertions.
 * @module
 */
import { parseArgs } from "node:util";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog, summarize } from "./lib/audit.ts";
import { Api, Observer, pool } from "./lib/kube.ts";
import {
  cpuSeconds,
  findProcesses,
  loadAverage,
  machineBusySeconds,
  memoryMiB,
  processTree,
  resetPeak,
} from "./lib/procs.ts";
import { latencySummary } from "./lib/stats.ts";
import {
  type BenchResults,
  type ContenderRun,
  type PhaseResult,
  renderMarkdown,
} from "./lib/report.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const RESULTS = `${ROOT}/bench/results`;

// ---------------------------------------------------------------------------------------------
// Configuration.

interface Config {
  readonly variant: "quick" | "full";
  /** Objects in the create scenario. */
  readonly createCount: number;
  /** Objects created with a delete handler, then deleted (the finalizer scenarios). */
  readonly deleteCount: number;
  /** Steady load: objects per second and seconds. */
  readonly steadyRate: number;
  readonly steadySeconds: number;
  /** Updates: objects × changes each. */
  readonly updateObjects: number;
  readonly updateChanges: number;
  /** Objects created before the operator starts (throughput without the harness creating). */
  readonly backlogCount: number;
  /** Handled objects watched in the idle and restart scenarios. */
  readonly idleCount: number;
  /** Idle: how long the operator idles before the measurement window, and the window. */
  readonly idleSettleMs: number;
  readonly idleWindowMs: number;
  /** Concurrent creations/deletions by the harness. */
  readonly concurrency: number;
  /** After a scenario completes: wait at least this long, then until the operator is quiet. */
  readonly settleMinMs: number;
  readonly settleQuietMs: number;
  readonly settleMaxMs: number;
  readonly reps: number;
}

const QUICK: Config = {
  variant: "quick",
  createCount: 1_000,
  deleteCount: 1_000,
  steadyRate: 100,
  steadySeconds: 7,
  updateObjects: 100,
  updateChanges: 10,
  backlogCount: 1_000,
  idleCount: 1_000,
  idleSettleMs: 30_000,
  idleWindowMs: 5_000,
  concurrency: 16,
  // Our Events are aggregated in 5-second windows: a scenario's last batch can come up to 5 s
  // after its last handler, and must be counted in that scenario, not the next one.
  settleMinMs: 5_500,
  settleQuietMs: 1_500,
  settleMaxMs: 20_000,
  reps: 1,
};

const FULL: Config = {
  ...QUICK,
  variant: "full",
  // The 10,000 variant of the create scenario; it also fills the namespace for idle and restart.
  createCount: 10_000,
  steadySeconds: 20,
  backlogCount: 5_000,
  idleCount: 10_000,
};

// ---------------------------------------------------------------------------------------------
// Contenders.

interface Contender {
  readonly id: string;
  readonly label: string;
  /** Prefix of the contender's User-Agent in the audit log. */
  readonly userAgent: string;
  command(namespace: string): string[];
  /** Extra environment of the operator process. */
  readonly env?: Record<string, string>;
}

/** Contenders that run only when named in `--only` (diagnostic variants). */
const OPT_IN = new Set([
  "kopf-ts-noevents",
  ...["kopf-ts", "kopf-py"].flatMap((id) => [`${id}-logs-off`, `${id}-logs-on`]),
]);

/**
 * The Events of log messages counted both ways: without `-q` (so that info messages reach the
 * poster), with `settings.posting.loggers` off (the default, as in Kopf 1.44+) and on.
 */
function logEventVariants(base: Contender): Contender[] {
  const verbose = (ns: string) => base.command(ns).filter((arg) => arg !== "-q");
  return [false, true].map((on) => ({
    ...base,
    id: `${base.id}-logs-${on ? "on" : "off"}`,
    label: `${base.label}, no -q, posting.loggers ${on ? "on" : "off"}`,
    command: verbose,
    env: (on ? { BENCH_LOGGERS: "1" } : {}) as Record<string, string>,
  }));
}

function contenders(venv: string | undefined): Contender[] {
  const kopfTs = (ns: string) => [
    `${ROOT}/tools/deno.sh`,
    ...["run", "-A", "cli.ts", "run", "bench/handlers/kopf_ts.ts"],
    ...["-n", ns, "--standalone", "-q"],
  ];
  const list: Contender[] = [{
    id: "kopf-ts",
    label: "kopf-ts",
    userAgent: "kopf-ts",
    command: kopfTs,
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
  return list;
}

// ---------------------------------------------------------------------------------------------
// Helpers.

const log = (message: string) =>
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const names = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(5, "0")}`);

async function commandOutput(cmd: string[], timeoutMs = 60_000): Promise<string> {
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

/** A contender's operator process; output goes to a log file. */
class Operator {
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

const RUNNING = new Set<Operator>();

/** Handler runs recorded by the handlers in `$BENCH_RUNLOG`: `handler name started`. */
function readRuns(path: string): { handler: string; name: string }[] {
  try {
    return Deno.readTextFileSync(path).split("\n").filter(Boolean).map((line) => {
      const [handler = "", name = ""] = line.split(" ");
      return { handler, name };
    });
  } catch {
    return [];
  }
}

function countBy<T>(items: readonly T[], key: (item: T) => string): Record<string, number> {
  const result: Record<string, number> = {};
  for (const item of items) result[key(item)] = (result[key(item)] ?? 0) + 1;
  return result;
}

// ---------------------------------------------------------------------------------------------
// The scenarios of one contender.

interface Context {
  readonly config: Config;
  readonly api: Api;
  readonly audit: AuditLog;
  readonly plane: ControlPlane;
  readonly contender: Contender;
  readonly work: string;
  readonly rep: number;
}

class ContenderSession {
  readonly ctx: Context;
  readonly phases: Record<string, PhaseResult> = {};
  readonly notes: string[] = [];
  operator: Operator | undefined;
  runlog = "";

  constructor(ctx: Context) {
    this.ctx = ctx;
  }

  spawn(namespace: string, tag: string, withDelete: boolean): Operator {
    const { contender, work, plane, rep } = this.ctx;
    this.runlog = `${work}/${contender.id}-${rep}-${tag}.runlog`;
    const env: Record<string, string> = {
      KUBECONFIG: plane.kubeconfigPath,
      BENCH_RUNLOG: this.runlog,
      BENCH_DELETE: withDelete ? "1" : "0",
      NO_COLOR: "1",
      ...contender.env,
    };
    const logPath = `${work}/${contender.id}-${rep}-${tag}.log`;
    log(`${contender.id}: starting the operator (${tag}) in ${namespace}`);
    this.operator = new Operator(contender.command(namespace), env, logPath);
    return this.operator;
  }

  planePids(): { apiserver: number[]; etcd: number[] } {
    return {
      apiserver: findProcesses(this.ctx.plane.dir, "kube-apiserver"),
      etcd: findProcesses(this.ctx.plane.dir, "etcd"),
    };
  }

  /** Waits until the contender made no request other than watches for a while. */
  async settle(completedAt: number): Promise<void> {
    const { config, audit, contender } = this.ctx;
    const deadline = completedAt + config.settleMaxMs;
    for (;;) {
      await audit.poll();
      const now = Date.now();
      const quietFor = now - Math.max(audit.lastActivity(contender.userAgent), completedAt);
      if (now - completedAt >= config.settleMinMs && quietFor >= config.settleQuietMs) return;
      if (now >= deadline) return;
      this.checkAlive();
      await sleep(250);
    }
  }

  checkAlive(): void {
    const op = this.operator;
    if (op?.status) {
      throw new Error(
        `the operator exited with code ${op.status.code} (signal ${op.status.signal})\n` +
          op.logTail(),
      );
    }
  }

  /**
   * Runs one scenario: measures the operator's CPU and peak RSS, the control plane's CPU, the
   * handler runs and the contender's requests from the start until it has settled.
   */
  async phase(
    name: string,
    body: () => Promise<
      { completedAt: number; complete: boolean; metrics: Record<string, number> }
    >,
    options: { settle?: boolean; requestFilter?: (r: { name: string }) => boolean } = {},
  ): Promise<PhaseResult> {
    const { audit, contender } = this.ctx;
    const before = this.operator?.pids() ?? [];
    const peakReset = before.length ? resetPeak(before) : true;
    const cpu0 = cpuSeconds(before);
    const plane0 = this.planePids();
    const apiCpu0 = cpuSeconds(plane0.apiserver), etcdCpu0 = cpuSeconds(plane0.etcd);
    const runs0 = readRuns(this.runlog).length;
    const machine0 = machineBusySeconds(), harness0 = cpuSeconds([Deno.pid]);
    const startedAt = Date.now();
    log(`${contender.id}: ${name}`);
    const outcome = await body();
    if (options.settle !== false) await this.settle(outcome.completedAt);
    this.checkAlive();
    const windowEnd = Date.now();
    const machineS = machineBusySeconds() - machine0, harnessS = cpuSeconds([Deno.pid]) - harness0;
    const pids = this.operator?.pids() ?? [];
    const plane1 = this.planePids();
    await audit.poll();
    const records = audit.select(
      contender.userAgent,
      startedAt,
      windowEnd,
      options.requestFilter,
    );
    const runs = readRuns(this.runlog).slice(runs0);
    const result: PhaseResult = {
      name,
      startedAt,
      completedAt: outcome.completedAt,
      windowEnd,
      complete: outcome.complete,
      metrics: {
        ...outcome.metrics,
        cpuS: cpuSeconds(pids) - cpu0,
        peakRssMiB: memoryMiB(pids, "VmHWM"),
        rssMiB: memoryMiB(pids, "VmRSS"),
        apiserverCpuS: cpuSeconds(plane1.apiserver) - apiCpu0,
        etcdCpuS: cpuSeconds(plane1.etcd) - etcdCpu0,
        writes: 0,
        events: 0,
      },
      requests: summarize(records),
      handlerRuns: countBy(runs, (r) => r.handler),
      peakIsSincePhaseStart: before.length > 0 && peakReset,
    };
    const m0 = result.metrics;
    m0["harnessCpuS"] = harnessS;
    m0["machineCpuS"] = machineS;
    // CPU of everything else on the machine (other engineers' tests, system daemons): noise.
    m0["otherCpuS"] = machineS - harnessS - m0["cpuS"]! - m0["apiserverCpuS"]! - m0["etcdCpuS"]!;
    m0["loadAvg"] = loadAverage();
    // Watches of the served resource opened in this window: after startup, each is a reconnect
    // (the API server closes watches whose client does not keep up, or on timeout).
    m0["watches"] = result.requests.byVerbResource["watch kopfexamples"] ?? 0;
    result.metrics["writes"] = result.requests.writes;
    result.metrics["events"] = result.requests.events;
    result.metrics["conflicts"] = result.requests.conflicts;
    result.metrics["requests"] = result.requests.total;
    for (const [handler, count] of Object.entries(result.handlerRuns)) {
      result.metrics[`runs.${handler}`] = count;
    }
    this.phases[name] = result;
    const m = result.metrics;
    log(
      `${contender.id}: ${name} ${outcome.complete ? "done" : "INCOMPLETE"} in ` +
        `${((outcome.completedAt - startedAt) / 1000).toFixed(2)} s; writes ${m["writes"]}, ` +
        `events ${m["events"]}, requests ${m["requests"]}, cpu ${m["cpuS"]?.toFixed(2)} s`,
    );
    return result;
  }

  /** Creates objects as fast as `concurrency` allows; returns send times by name. */
  async createBulk(namespace: string, list: readonly string[]): Promise<Map<string, number>> {
    const sent = new Map<string, number>();
    await pool(list, this.ctx.config.concurrency, async (name) => {
      sent.set(name, Date.now());
      await this.ctx.api.create(namespace, name);
    });
    return sent;
  }

  /** Creation, then waiting until all are handled: the throughput scenarios. */
  async createAndWait(
    observer: Observer,
    namespace: string,
    list: readonly string[],
    timeoutMs: number,
  ) {
    const t0 = Date.now();
    const sent = await this.createBulk(namespace, list);
    const createdAt = Date.now();
    const complete = await observer.waitUntil(
      () => observer.countHandled(list) === list.length,
      timeoutMs - (createdAt - t0),
    );
    const handled = list.map((n) => observer.get(n).handledAt).filter((t) => t !== undefined);
    const completedAt = handled.length ? Math.max(...handled) : Date.now();
    const latencies = list.flatMap((n) => {
      const started = observer.get(n).createStarted, at = sent.get(n);
      return started !== undefined && at !== undefined ? [started - at] : [];
    });
    const durationS = (completedAt - t0) / 1000;
    const lat = latencySummary(latencies);
    return {
      completedAt,
      complete,
      metrics: {
        objects: list.length,
        handled: handled.length,
        durationS,
        throughput: handled.length / durationS,
        creationS: (createdAt - t0) / 1000,
        "latency.p50": lat["p50"]!,
        "latency.p99": lat["p99"]!,
      },
    };
  }

  async run(): Promise<void> {
    const { config, api, plane, contender } = this.ctx;
    const timeoutFor = (count: number) => 60_000 + count * 200;

    // --- Namespace A: startup, create, steady load, updates, fill, idle, restart. ---
    const ns = await createTestNamespace(plane, `bench-${contender.id}`);
    const observer = new Observer(api, ns);
    await observer.start();
    const createNames = names("create", config.createCount);
    const steadyCount = Math.round(config.steadyRate * config.steadySeconds);
    const steadyNames = names("steady", steadyCount);
    const fillNames = names(
      "fill",
      Math.max(0, config.idleCount - createNames.length - steadyCount),
    );
    try {
      const op = this.spawn(ns, "a", false);
      await this.phase("startup", async () => {
        await api.create(ns, "sentinel-start");
        const complete = await observer.waitUntil(
          () => observer.get("sentinel-start").handledAt !== undefined,
          120_000,
        );
        const completedAt = observer.get("sentinel-start").handledAt ?? Date.now();
        return {
          completedAt,
          complete,
          metrics: { readyS: (completedAt - op.spawnedAt) / 1000 },
        };
      });

      await this.phase(
        "create",
        () => this.createAndWait(observer, ns, createNames, timeoutFor(createNames.length)),
      );

      await this.phase("steady", async () => {
        const sent = new Map<string, number>();
        const inflight = new Set<Promise<void>>();
        const t0 = Date.now();
        for (let i = 0; i < steadyNames.length; i++) {
          const name = steadyNames[i]!;
          const due = t0 + (i * 1000) / config.steadyRate;
          const wait = due - Date.now();
          if (wait > 0) await sleep(wait);
          while (inflight.size >= 64) await Promise.race(inflight);
          sent.set(name, Date.now());
          const p: Promise<void> = api.create(ns, name).finally(() => inflight.delete(p));
          inflight.add(p);
        }
        await Promise.all(inflight);
        const createdAt = Date.now();
        const complete = await observer.waitUntil(
          () => observer.countHandled(steadyNames) === steadyNames.length,
          60_000,
        );
        const latencies = steadyNames.flatMap((n) => {
          const started = observer.get(n).createStarted, at = sent.get(n);
          return started !== undefined && at !== undefined ? [started - at] : [];
        });
        const observed = steadyNames.flatMap((n) => {
          const handled = observer.get(n).handledAt, at = sent.get(n);
          return handled !== undefined && at !== undefined ? [handled - at] : [];
        });
        const handled = steadyNames.map((n) => observer.get(n).handledAt ?? 0);
        const lat = latencySummary(latencies), obs = latencySummary(observed);
        return {
          completedAt: Math.max(...handled, createdAt),
          complete,
          metrics: {
            objects: steadyNames.length,
            handled: observer.countHandled(steadyNames),
            rate: steadyNames.length / ((createdAt - t0) / 1000),
            "latency.p50": lat["p50"]!,
            "latency.p95": lat["p95"]!,
            "latency.p99": lat["p99"]!,
            "latency.max": lat["max"]!,
            "observed.p50": obs["p50"]!,
            "observed.p99": obs["p99"]!,
          },
        };
      });

      await this.phase("updates", async () => {
        const targets = createNames.slice(0, config.updateObjects);
        const latencies: number[] = [];
        let changes = 0, failed = 0;
        const t0 = Date.now();
        const deadline = t0 + 180_000;
        await Promise.all(targets.map(async (name) => {
          for (let value = 1; value <= config.updateChanges; value++) {
            const sentAt = Date.now();
            await api.setValue(ns, name, value);
            changes++;
            const seen = observer.get(name);
            const ok = await observer.waitUntil(
              () => seen.updateValue === value,
              Math.min(30_000, deadline - Date.now()),
            );
            if (!ok) {
              failed++;
              return;
            }
            if (seen.updateStarted !== undefined) latencies.push(seen.updateStarted - sentAt);
          }
        }));
        const concurrentDone = Date.now();
        // Then one object alone, change after change: the latency without load.
        const single = createNames[Math.min(config.updateObjects, createNames.length - 1)]!;
        const singleLatencies: number[] = [];
        for (let value = 1; value <= 10 && failed === 0; value++) {
          const sentAt = Date.now();
          await api.setValue(ns, single, value);
          changes++;
          const seen = observer.get(single);
          if (!await observer.waitUntil(() => seen.updateValue === value, 30_000)) failed++;
          else if (seen.updateStarted !== undefined) {
            singleLatencies.push(seen.updateStarted - sentAt);
          }
        }
        const completedAt = Date.now();
        const lat = latencySummary(latencies);
        const one = latencySummary(singleLatencies);
        return {
          completedAt,
          complete: failed === 0,
          metrics: {
            "single.p50": one["p50"]!,
            "single.max": one["max"]!,
            objects: targets.length,
            changes,
            failed,
            durationS: (concurrentDone - t0) / 1000,
            "latency.p50": lat["p50"]!,
            "latency.p99": lat["p99"]!,
          },
        };
      });

      if (fillNames.length) {
        await this.phase(
          "fill",
          () => this.createAndWait(observer, ns, fillNames, timeoutFor(fillNames.length)),
        );
      }

      await this.phase("idle", async () => {
        // RSS right after the load, then after idling: V8 returns memory to the OS only some
        // time after a peak, so "idle" is measured after idleSettleMs without any activity.
        const afterLoad = memoryMiB(op.pids(), "VmRSS");
        await sleep(config.idleSettleMs);
        const samples: number[] = [];
        const t0 = Date.now();
        while (Date.now() - t0 < config.idleWindowMs) {
          samples.push(memoryMiB(op.pids(), "VmRSS"));
          await sleep(250);
        }
        return {
          completedAt: Date.now(),
          complete: true,
          metrics: {
            objects: observer.seen.size,
            windowS: (Date.now() - t0) / 1000,
            rssAfterLoadMiB: afterLoad,
            idleRssMiB: samples.length ? Math.max(...samples) : NaN,
          },
        };
      }, { settle: false });

      const stopMs = await op.stop();
      this.phases["idle"]!.metrics["stopS"] = stopMs / 1000;

      // Restart over the handled objects: time until a new object is served, writes made.
      const existing = observer.seen.size;
      let restarted: Operator | undefined;
      await this.phase("restart", async () => {
        restarted = this.spawn(ns, "b", false);
        const sentinel = "sentinel-restart";
        await api.create(ns, sentinel);
        const complete = await observer.waitUntil(
          () => observer.get(sentinel).handledAt !== undefined,
          120_000,
        );
        const completedAt = observer.get(sentinel).handledAt ?? Date.now();
        return {
          completedAt,
          complete,
          metrics: { objects: existing, readyS: (completedAt - restarted.spawnedAt) / 1000 },
        };
      }, { requestFilter: (r) => r.name !== "sentinel-restart" });
      const restart = this.phases["restart"]!;
      const oldRuns = readRuns(this.runlog).filter((r) => r.name !== "sentinel-restart");
      restart.metrics["runs.old"] = oldRuns.length;
      const firstWatch = this.ctx.audit.select(
        contender.userAgent,
        restart.startedAt,
        restart.windowEnd,
        (r) => r.verb === "watch" && r.resource === "kopfexamples",
      )[0];
      if (firstWatch && restarted) {
        restart.metrics["watchS"] = (firstWatch.t - restarted.spawnedAt) / 1000;
      }
      await restarted?.stop();
    } finally {
      await this.operator?.stop();
      await observer.stop();
    }
    log(`${contender.id}: clearing ${ns}`);
    await api.clear(ns);

    // --- Namespace B: with a delete handler (finalizers): create, then delete. ---
    const nsDel = await createTestNamespace(plane, `bench-${contender.id}-del`);
    const observerDel = new Observer(api, nsDel);
    await observerDel.start();
    const delNames = names("del", config.deleteCount);
    try {
      this.spawn(nsDel, "c", true);
      await this.phase(
        "create-finalizers",
        () =>
          this.createAndWait(observerDel, nsDel, delNames, timeoutFor(delNames.length) + 60_000),
      );
      await this.phase("delete", async () => {
        const t0 = Date.now();
        await pool(delNames, config.concurrency, (name) => api.delete(nsDel, name));
        const complete = await observerDel.waitUntil(
          () => observerDel.countDeleted(delNames) === delNames.length,
          timeoutFor(delNames.length),
        );
        const deleted = delNames.map((n) => observerDel.get(n).deletedAt ?? 0);
        const completedAt = Math.max(...deleted, t0);
        return {
          completedAt,
          complete,
          metrics: {
            objects: delNames.length,
            deleted: observerDel.countDeleted(delNames),
            durationS: (completedAt - t0) / 1000,
            throughput: observerDel.countDeleted(delNames) / ((completedAt - t0) / 1000),
          },
        };
      });
    } finally {
      await this.operator?.stop();
      await observerDel.stop();
    }
    await api.clear(nsDel);

    // --- Namespace C: a backlog created before the operator starts: its throughput alone. ---
    if (config.backlogCount > 0) {
      const nsBacklog = await createTestNamespace(plane, `bench-${contender.id}-backlog`);
      const observerBacklog = new Observer(api, nsBacklog);
      await observerBacklog.start();
      const backlogNames = names("backlog", config.backlogCount);
      try {
        log(`${contender.id}: creating a backlog of ${backlogNames.length} objects`);
        await this.createBulk(nsBacklog, backlogNames);
        await this.phase("backlog", async () => {
          const op = this.spawn(nsBacklog, "d", false);
          const complete = await observerBacklog.waitUntil(
            () => observerBacklog.countHandled(backlogNames) === backlogNames.length,
            timeoutFor(backlogNames.length),
          );
          const handled = backlogNames.flatMap((n) => {
            const at = observerBacklog.get(n).handledAt;
            return at === undefined ? [] : [at];
          });
          const completedAt = handled.length ? Math.max(...handled) : Date.now();
          const durationS = (completedAt - op.spawnedAt) / 1000;
          return {
            completedAt,
            complete,
            metrics: {
              objects: backlogNames.length,
              handled: handled.length,
              durationS,
              throughput: handled.length / durationS,
              firstS: handled.length ? (Math.min(...handled) - op.spawnedAt) / 1000 : NaN,
            },
          };
        });
      } finally {
        await this.operator?.stop();
        await observerBacklog.stop();
      }
      await api.clear(nsBacklog);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Main.

async function machineInfo(): Promise<Record<string, string | number>> {
  const cpuinfo = await Deno.readTextFile("/proc/cpuinfo").catch(() => "");
  const meminfo = await Deno.readTextFile("/proc/meminfo").catch(() => "");
  const memKb = Number(meminfo.match(/^MemTotal:\s+(\d+)/m)?.[1] ?? NaN);
  return {
    nproc: navigator.hardwareConcurrency,
    cpuModel: cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1]?.trim() ?? "unknown",
    memoryGiB: Math.round((memKb / 1024 / 1024) * 10) / 10,
    kernel: Deno.osRelease(),
  };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      full: { type: "boolean" },
      reps: { type: "string" },
      only: { type: "string" },
      keep: { type: "boolean" },
      report: { type: "string" },
      set: { type: "string", multiple: true },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "Usage: deno run -A bench/run.ts [--full] [--reps N] [--only kopf-ts,kopf-py,raw-floor]\n" +
        "         [--set KEY=NUMBER]... [--keep] [--report FILE]\n" +
        `Keys for --set: ${Object.keys(QUICK).filter((k) => k !== "variant").join(", ")}`,
    );
    return 0;
  }
  if (values.report) {
    const results = JSON.parse(await Deno.readTextFile(values.report)) as BenchResults;
    console.log(renderMarkdown(results));
    return 0;
  }
  const overrides: Record<string, number> = {};
  for (const item of values.set ?? []) {
    const [key = "", value = ""] = item.split("=");
    if (!(key in QUICK) || key === "variant" || !Number.isFinite(Number(value))) {
      console.error(
        `error: --set ${item}: expected KEY=NUMBER with a key of ${Object.keys(QUICK)}`,
      );
      return 2;
    }
    overrides[key] = Number(value);
  }
  const config: Config = {
    ...(values.full ? FULL : QUICK),
    ...(values.reps ? { reps: Math.max(1, Number(values.reps)) } : {}),
    ...overrides,
  };
  const started = new Date();
  // The code under test is what is checked out when the run starts (operators load it then).
  const commit = await commandOutput(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]);
  const dirty = (await commandOutput([
    "git",
    "-C",
    ROOT,
    "status",
    "--porcelain",
    "--",
    "core",
    "mod.ts",
    "cli.ts",
  ])).length > 0;

  // Python Kopf: the virtualenv made by tools/python-kopf.sh (pinned release from PyPI).
  let venv: string | undefined;
  let kopfVersion = "not available";
  const only = values.only?.split(",").map((s) => s.trim()).filter(Boolean);
  if (!only || only.some((id) => id.startsWith("kopf-py"))) {
    log("preparing Python Kopf (tools/python-kopf.sh)");
    const out = await new Deno.Command(`${ROOT}/tools/python-kopf.sh`, {
      stdout: "piped",
      stderr: "inherit",
      signal: AbortSignal.timeout(600_000),
    }).output().catch((error) => {
      log(`tools/python-kopf.sh failed: ${error}`);
      return undefined;
    });
    if (out?.success) {
      venv = new TextDecoder().decode(out.stdout).trim().split("\n").pop();
      kopfVersion = await commandOutput([`${venv}/bin/kopf`, "--version"]);
    } else {
      log("Python Kopf is not available: running without it (no Kopf ratios)");
    }
  }
  const list = contenders(venv).filter((c) => only ? only.includes(c.id) : !OPT_IN.has(c.id));

  log("warming the Deno module cache");
  await commandOutput([
    `${ROOT}/tools/deno.sh`,
    "cache",
    "cli.ts",
    "bench/handlers/kopf_ts.ts",
    "bench/handlers/raw_floor.ts",
  ], 300_000);

  const work = await Deno.makeTempDir({
    dir: await Deno.stat("/dev/shm").then(() => "/dev/shm").catch(() => undefined),
    prefix: "kopf-bench-",
  });
  const auditPath = `${work}/audit.log`;
  await Deno.writeTextFile(`${work}/audit-policy.yaml`, AUDIT_POLICY);

  let plane: ControlPlane | undefined;
  let api: Api | undefined;
  let interrupted = false;
  const stopAll = async () => {
    for (const op of [...RUNNING]) await op.stop(5_000);
    await plane?.stop();
    if (!interrupted) api?.[Symbol.dispose]();
    if (!values.keep) await Deno.remove(work, { recursive: true }).catch(() => {});
  };
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log("interrupted: stopping everything");
    // Requests still in flight fail once the plane is gone: that is expected now.
    globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());
    stopAll().finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);

  const runs: ContenderRun[] = [];
  try {
    log("starting the control plane (with an audit log)");
    plane = await ControlPlane.start({
      controllerManager: false,
      handleSignals: false,
      keepDir: Boolean(values.keep),
      apiServerArgs: [
        `--audit-policy-file=${work}/audit-policy.yaml`,
        `--audit-log-path=${auditPath}`,
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
        "--audit-log-maxbackup=0",
      ],
    });
    api = new Api(plane);
    await applyCrd(api);
    await waitForCrd(api);
    await warmUp(api, plane);
    const audit = new AuditLog(auditPath);
    const versionInfo = (await api.request("GET", "/version")).body as { gitVersion?: string };
    const foreignPlanes = findProcesses("--etcd-servers", "kube-apiserver").length - 1;
    if (foreignPlanes > 0) {
      log(`note: ${foreignPlanes} other kube-apiserver(s) running on this machine: expect noise`);
    }

    for (let rep = 1; rep <= config.reps; rep++) {
      // Rotate the order between repetitions so that no contender always goes first.
      const order = list.map((_, i) => list[(i + rep - 1) % list.length]!);
      for (const contender of order) {
        if (interrupted) break;
        const session = new ContenderSession({
          config,
          api,
          audit,
          plane,
          contender,
          work,
          rep,
        });
        let error: string | undefined;
        try {
          await session.run();
        } catch (e) {
          error = e instanceof Error ? `${e.message}` : String(e);
          log(`${contender.id}: FAILED: ${error}`);
          if (session.operator) log(`operator log:\n${session.operator.logTail(30)}`);
        }
        if (interrupted) break;
        runs.push({ contender: contender.id, rep, phases: session.phases, error });
      }
    }

    if (interrupted) return 130;
    const results: BenchResults = {
      startedAt: started.toISOString(),
      finishedAt: new Date().toISOString(),
      config: { ...config },
      machine: {
        ...await machineInfo(),
        otherApiServers: foreignPlanes,
        loadAvgAtEnd: loadAverage(),
      },
      versions: {
        deno: Deno.version.deno,
        v8: Deno.version.v8,
        kopfPython: kopfVersion,
        python: venv ? await commandOutput([`${venv}/bin/python`, "--version"]) : "-",
        kubernetes: versionInfo.gitVersion ?? "unknown",
        kopfTs: JSON.parse(await Deno.readTextFile(`${ROOT}/deno.json`)).version ?? "?",
        commit: await (async () => {
          const end = await commandOutput(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]);
          return end === commit ? commit : `${commit}, HEAD moved to ${end} during the run`;
        })(),
        dirty: dirty ? "yes" : "no",
      },
      contenders: list.map((c) => ({ id: c.id, label: c.label, userAgent: c.userAgent })),
      runs,
    };
    await Deno.mkdir(RESULTS, { recursive: true });
    const stamp = started.toISOString().replace(/[:.]/g, "-").replace(/-\d\d\dZ$/, "Z");
    // Runs with --only or --set are diagnostics: kept beside the others, not as latest.md.
    const custom = Boolean(only) || Object.keys(overrides).length > 0;
    const jsonPath = `${RESULTS}/${stamp}-${config.variant}${custom ? "-custom" : ""}.json`;
    await Deno.writeTextFile(jsonPath, JSON.stringify(results, null, 2) + "\n");
    const markdown = renderMarkdown(results);
    if (!custom) await Deno.writeTextFile(`${RESULTS}/latest.md`, markdown);
    await Deno.writeTextFile(jsonPath.replace(/\.json$/, ".md"), markdown);
    console.log(markdown);
    log(`results: ${jsonPath}${custom ? "" : `, ${RESULTS}/latest.md`}`);
    return runs.some((r) => r.error) ? 1 : 0;
  } finally {
    await stopAll();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

/** Installs crds/example.yaml (idempotent). */
export async function applyCrd(api: Api): Promise<void> {
  const { parse } = await import("yaml");
  const crd = parse(await Deno.readTextFile(`${ROOT}/crds/example.yaml`));
  const { status, body } = await api.request(
    "POST",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    crd,
  );
  if (status !== 201 && status !== 409) {
    throw new Error(`cannot create the CRD: HTTP ${status}: ${JSON.stringify(body)}`);
  }
}

/**
 * The API server's first write of a new custom resource takes seconds (it sets up the CRD's
 * storage): do it before any contender is timed, with a throw-away object.
 */
async function warmUp(api: Api, plane: ControlPlane): Promise<void> {
  const ns = await createTestNamespace(plane, "bench-warmup");
  for (let i = 0; i < 3; i++) {
    await api.create(ns, `warmup-${i}`);
    await api.delete(ns, `warmup-${i}`);
  }
}

/** Waits until the API server serves kopfexamples. */
export async function waitForCrd(api: Api): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { status } = await api.request(
      "GET",
      "/apis/kopf.dev/v1/namespaces/default/kopfexamples",
    );
    if (status === 200) return;
    await sleep(200);
  }
  throw new Error("the kopfexamples CRD was not served within 60 s");
}

if (import.meta.main) Deno.exit(await main());
