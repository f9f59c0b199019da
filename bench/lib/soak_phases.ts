/**
 * The soak's phases (bench/soak.ts): sampling the operator every 10 s, the churn of changes,
 * the drain of the last ones, and the end state as the API server holds it.
 * @module
 */
import type { AuditLog } from "./audit.ts";
import type { Api, BenchObject } from "./kube.ts";
import { cpuSeconds, loadAverage, machineBusySeconds, memoryMiB, processTree } from "./procs.ts";
import type { Ledger } from "./soak_ledger.ts";
import type { SoakSample } from "./soak_report.ts";

/** The operator's user agent, to tell its requests in the audit log. */
const OPERATOR_AGENT = "kopf-ts";

/** The soak's log line, to stderr. */
export const log = (message: string) =>
  console.error(`[soak ${new Date().toISOString().slice(11, 19)}] ${message}`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A command's stdout, trimmed, or "unknown" if it could not be run (30 s at most). */
export async function commandOutput(cmd: string[]): Promise<string> {
  try {
    const output = await new Deno.Command(cmd[0]!, {
      args: cmd.slice(1),
      stdout: "piped",
      stderr: "null",
      signal: AbortSignal.timeout(30_000),
    }).output();
    return new TextDecoder().decode(output.stdout).trim();
  } catch {
    return "unknown";
  }
}

/** Samples the operator's RSS, CPU and API requests, and the machine's load. */
export class Sampler {
  readonly samples: SoakSample[] = [];
  /** The operator's API requests so far (all, and without Events). */
  requestsTotal = 0;
  requestsNoEvents = 0;
  #lastCpu = 0;
  #lastBusy = machineBusySeconds();
  #lastAt: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  /**
   * @param ledger The ledger (polled before each sample).
   * @param audit The API server's audit log.
   * @param operatorPid The operator's process (its tree is measured).
   * @param t0 When the operator started (ms).
   */
  constructor(
    readonly ledger: Ledger,
    readonly audit: AuditLog,
    readonly operatorPid: number,
    readonly t0: number,
  ) {
    this.#lastAt = t0;
  }

  /** The operator's CPU seconds at the last sample. */
  get cpuSeconds(): number {
    return this.#lastCpu;
  }

  /** Takes one sample now. */
  async sample(): Promise<void> {
    const { ledger, audit } = this;
    await ledger.poll();
    await audit.poll();
    let requests = 0, noEvents = 0;
    for (const record of audit.records) {
      if (!record.userAgent.startsWith(OPERATOR_AGENT)) continue;
      requests++;
      if (record.resource !== "events") noEvents++;
    }
    audit.records.length = 0; // counted: keep the memory of a long run flat
    this.requestsTotal += requests;
    this.requestsNoEvents += noEvents;
    const pids = processTree(this.operatorPid);
    const now = Date.now(), cpu = cpuSeconds(pids), busy = machineBusySeconds();
    const wall = (now - this.#lastAt) / 1000;
    this.samples.push({
      t: Math.round((now - this.t0) / 100) / 10,
      rssMiB: Math.round(memoryMiB(pids, "VmRSS") * 10) / 10,
      cpuPct: Math.round(((cpu - this.#lastCpu) / wall) * 1000) / 10,
      machinePct:
        Math.round(((busy - this.#lastBusy) / wall / navigator.hardwareConcurrency) * 1000) / 10,
      load1: loadAverage(),
      changes: ledger.changes,
      runs: ledger.totalRuns,
      pending: ledger.pending,
      requests,
      requestsNoEvents: noEvents,
    });
    this.#lastCpu = cpu;
    this.#lastBusy = busy;
    this.#lastAt = now;
  }

  /** Samples every `everyMs` until {@link stop}. */
  start(everyMs: number): void {
    this.#timer = setInterval(
      () => void this.sample().catch((e) => log(`sample failed: ${e}`)),
      everyMs,
    );
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** What the churn counted. */
export interface ChurnCounts {
  /** Ticks without a slot free of unhandled changes (the operator fell behind). */
  readonly skippedTicks: number;
  /** The harness's own requests that failed. */
  readonly failures: number;
}

/**
 * The churn until `minutes` after `t0`: every tick one slot that has no unhandled change gets
 * one (an empty slot a new object, a filled one a patch of `spec.value` (90%) or a deletion
 * (10%)); every slot is filled first, at 5× the rate. Logs progress every minute.
 */
export async function churn(
  api: Api,
  ns: string,
  ledger: Ledger,
  samples: readonly SoakSample[],
  o: { t0: number; minutes: number; rate: number },
): Promise<ChurnCounts> {
  let incarnations = 0, skippedTicks = 0, failures = 0;
  const change = async (index: number) => {
    const slot = ledger.slots[index]!;
    const at = Date.now();
    try {
      if (slot.name === undefined) {
        slot.name = `o${index}-${++incarnations}`;
        slot.value = 0;
        ledger.expect({ kind: "create", name: slot.name, value: 0, slot: index, at });
        await api.create(ns, slot.name);
      } else if (Math.random() < 0.1) {
        const name = slot.name;
        ledger.expect({ kind: "delete", name, value: slot.value, slot: index, at });
        slot.name = undefined;
        await api.delete(ns, name);
      } else {
        slot.value++;
        ledger.expect({ kind: "update", name: slot.name, value: slot.value, slot: index, at });
        await api.setValue(ns, slot.name, slot.value);
      }
    } catch (error) {
      failures++;
      log(`change failed (the harness's request, not the operator): ${error}`);
    }
  };
  const { t0 } = o;
  const deadline = t0 + o.minutes * 60_000;
  const tickMs = 1000 / o.rate;
  let nextTick = Date.now(), lastReport = t0;
  while (Date.now() < deadline) {
    await ledger.poll();
    const free = ledger.slots.flatMap((s, i) => (s.pending ? [] : [i]));
    // Fill every slot first (as fast as the rate allows), then churn at random.
    const empty = free.filter((i) =>
      ledger.slots[i]!.name === undefined && ledger.slots[i]!.incarnation === 0
    );
    if (free.length === 0) {
      skippedTicks++;
    } else {
      const index = empty[0] ?? free[Math.floor(Math.random() * free.length)]!;
      ledger.slots[index]!.incarnation++;
      await change(index);
    }
    if (Date.now() - lastReport >= 60_000) {
      lastReport = Date.now();
      const last = samples.at(-1);
      log(
        `${Math.round((Date.now() - t0) / 60_000)} min: ${ledger.changes} changes, ` +
          `${ledger.totalRuns} runs, ${ledger.pending} pending, RSS ${last?.rssMiB} MiB, ` +
          `CPU ${last?.cpuPct}%, load ${loadAverage()}`,
      );
    }
    nextTick += empty.length > 1 ? tickMs / 5 : tickMs; // fill at 5× the rate
    await sleep(Math.max(0, nextTick - Date.now()));
  }
  return { skippedTicks, failures };
}

/** Waits up to 2 min for the last changes to be handled, then 10 s more for late duplicates. */
export async function drain(ledger: Ledger): Promise<void> {
  log(`churn done: ${ledger.changes} changes; waiting for the last ones to be handled`);
  const drainUntil = Date.now() + 120_000;
  while (ledger.pending > 0 && Date.now() < drainUntil) {
    await sleep(250);
    await ledger.poll();
  }
  await sleep(10_000); // late duplicates would show up here
}

/**
 * The end state as the API server holds it: live objects whose status does not reflect their
 * last spec (stale), and objects still present with a deletionTimestamp (stuck).
 */
export async function endState(api: Api, ns: string): Promise<{ stale: number; stuck: number }> {
  const listed = await api.request("GET", api.path(ns));
  const items = (listed.body as { items?: BenchObject[] }).items ?? [];
  let stale = 0, stuck = 0;
  for (const item of items) {
    if (item.metadata.deletionTimestamp) {
      stuck++;
      continue;
    }
    const status = item.status as
      | { update_fn?: { value?: unknown }; create_fn?: { value?: unknown } }
      | undefined;
    const handled = status?.update_fn?.value ?? status?.create_fn?.value;
    if (handled !== item.spec?.["value"]) stale++;
  }
  return { stale, stuck };
}
