/**
 * One contender on one CRD variant in one repetition: spawning its operator, and measuring a
 * scenario (CPU, peak RSS, the control plane's CPU, handler runs, requests from the audit log)
 * from its start until the operator has settled.
 * @module
 */
import type { ControlPlane } from "../../testing/control_plane.ts";
import { type AuditLog, summarize } from "./audit.ts";
import type { Config, CrdVariant, ScenarioGroup } from "./config.ts";
import { type Contender, countBy, log, Operator, readRuns, sleep } from "./contenders.ts";
import { type Api, type Observer, pool } from "./kube.ts";
import {
  cpuSeconds,
  findProcesses,
  loadAverage,
  machineBusySeconds,
  memoryMiB,
  resetPeak,
} from "./procs.ts";
import type { PhaseResult } from "./results.ts";
import { latencySummary } from "./stats.ts";

/** What a session needs from the run. */
export interface Context {
  readonly config: Config;
  readonly api: Api;
  readonly audit: AuditLog;
  readonly plane: ControlPlane;
  readonly contender: Contender;
  readonly variant: CrdVariant;
  readonly work: string;
  readonly rep: number;
  /** The scenario groups to run (all if unset). */
  readonly groups?: ReadonlySet<ScenarioGroup>;
}

/** What a scenario's body reports. */
export interface Outcome {
  readonly completedAt: number;
  readonly complete: boolean;
  readonly metrics: Record<string, number>;
  /** Raw samples kept for the charts (e.g. latencies in ms). */
  readonly samples?: Record<string, number[]>;
}

/** The operator's RSS over the session: `[ms since the session started, MiB]`. */
export type RssSeries = Array<[number, number]>;

export class ContenderSession {
  readonly ctx: Context;
  readonly phases: Record<string, PhaseResult> = {};
  readonly notes: string[] = [];
  readonly startedAt = Date.now();
  readonly rss: RssSeries = [];
  operator: Operator | undefined;
  runlog = "";
  #sampler: ReturnType<typeof setInterval> | undefined;

  constructor(ctx: Context) {
    this.ctx = ctx;
    if (ctx.config.rssSampleMs > 0) {
      this.#sampler = setInterval(() => {
        const pids = this.operator?.pids() ?? [];
        if (pids.length) {
          this.rss.push([Date.now() - this.startedAt, Math.round(memoryMiB(pids, "VmRSS"))]);
        }
      }, ctx.config.rssSampleMs);
    }
  }

  /** Stops the RSS sampler. */
  close(): void {
    clearInterval(this.#sampler);
  }

  /** The log/runlog tag of this session's files. */
  get tag(): string {
    const { contender, variant, rep } = this.ctx;
    return `${contender.id}-${variant.id}-${rep}`;
  }

  spawn(namespace: string, tag: string, withDelete: boolean): Operator {
    const { contender, work, plane, variant } = this.ctx;
    this.runlog = `${work}/${this.tag}-${tag}.runlog`;
    const env: Record<string, string> = {
      KUBECONFIG: plane.kubeconfigPath,
      BENCH_RUNLOG: this.runlog,
      BENCH_DELETE: withDelete ? "1" : "0",
      BENCH_PLURAL: variant.resource.plural,
      BENCH_STATUS_SUBRESOURCE: variant.statusSubresource ? "1" : "0",
      NO_COLOR: "1",
      // The Deno operators (kopf-ts, the floor) run a copy of `deno` of their own, as an
      // operator's binary in its container is: the harness runs on `deno`, and pages another
      // process maps cannot be paged out (settings.process.pageOutDelay). Read by tools/deno.sh.
      KOPF_TS_DENO_PRIVATE: "bench-operator",
      ...contender.env,
    };
    const logPath = `${work}/${this.tag}-${tag}.log`;
    log(`${contender.id} [${variant.id}]: starting the operator (${tag}) in ${namespace}`);
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
    body: () => Promise<Outcome>,
    options: { settle?: boolean; requestFilter?: (r: { name: string }) => boolean } = {},
  ): Promise<PhaseResult> {
    const { audit, contender, variant } = this.ctx;
    const before = this.operator?.pids() ?? [];
    const peakReset = before.length ? resetPeak(before) : true;
    const cpu0 = cpuSeconds(before);
    const plane0 = this.planePids();
    const apiCpu0 = cpuSeconds(plane0.apiserver), etcdCpu0 = cpuSeconds(plane0.etcd);
    const runs0 = readRuns(this.runlog).length;
    const machine0 = machineBusySeconds(), harness0 = cpuSeconds([Deno.pid]);
    const startedAt = Date.now();
    log(`${contender.id} [${variant.id}]: ${name}`);
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
      ...(outcome.samples ? { samples: outcome.samples } : {}),
    };
    const m = result.metrics;
    m["harnessCpuS"] = harnessS;
    m["machineCpuS"] = machineS;
    // CPU of everything else on the machine (other engineers' tests, system daemons): noise.
    m["otherCpuS"] = machineS - harnessS - m["cpuS"]! - m["apiserverCpuS"]! - m["etcdCpuS"]!;
    m["loadAvg"] = loadAverage();
    // Watches of the served resource opened in this window: after startup, each is a reconnect
    // (the API server closes watches whose client does not keep up, or on timeout).
    m["watches"] = result.requests.byVerbResource[`watch ${variant.resource.plural}`] ?? 0;
    m["writes"] = result.requests.writes;
    m["events"] = result.requests.events;
    m["conflicts"] = result.requests.conflicts;
    m["requests"] = result.requests.total;
    for (const [handler, count] of Object.entries(result.handlerRuns)) {
      m[`runs.${handler}`] = count;
    }
    this.phases[name] = result;
    log(
      `${contender.id} [${variant.id}]: ${name} ${outcome.complete ? "done" : "INCOMPLETE"} in ` +
        `${((outcome.completedAt - startedAt) / 1000).toFixed(2)} s; writes ${m["writes"]}, ` +
        `events ${m["events"]}, requests ${m["requests"]}, cpu ${m["cpuS"]?.toFixed(2)} s, ` +
        `watches ${m["watches"]}`,
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
  ): Promise<Outcome> {
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
      return started !== undefined && at !== undefined ? [Math.round(started - at)] : [];
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
      samples: { latency: latencies },
    };
  }
}
