/**
 * The aims the benchmark checks against a run's figures: issue 12's against Python Kopf and the
 * floor, issue 31's against controller-runtime and the floor.
 * @module
 */
import { fmt, metricOf, peerOf, PY, ratio, RAW, TS } from "./figures.ts";
import { type BenchResults, runsOf, variantsOf } from "./results.ts";

/** Issue 12's aims against Python Kopf and the raw floor, per CRD variant and kopf-ts contender. */
export function aims(results: BenchResults, label: (id: string) => string): string[] {
  const config = results.config;
  const out: string[] = ["## Aims of issue #12", ""];
  const verdict = (value: number, ok: (v: number) => boolean) =>
    !Number.isFinite(value) ? "not measured" : ok(value) ? "**met**" : "**not met**";
  const perObject = (m: Record<string, number>) => m["writes"]! / m["objects"]!;
  const cpuPerObject = (m: Record<string, number>) => m["cpuS"]! / m["objects"]!;
  for (const variant of variantsOf(results)) {
    const get = metricOf(results, variant.id);
    const ours = results.contenders.map((c) => c.id).filter((id) =>
      id.startsWith(TS) && runsOf(results, variant.id).some((r) => r.contender === id)
    );
    if (!ours.length) continue;
    out.push(`${variant.label}:`);
    out.push("");
    for (const id of ours) {
      const who = label(id);
      const writes = get(id, "create", perObject);
      out.push(
        `- ${who}: writes per handled create: ${fmt(writes, 2)} (Kopf ` +
          `${fmt(get(PY, "create", perObject), 2)}, raw floor ${
            fmt(get(RAW, "create", perObject), 2)
          }).`,
      );
      const closures = get(id, "create", "watches") +
        get(id, "backlog", (m) => Math.max(0, m["watches"]! - 1));
      out.push(
        `- ${who}: watch closures in the create burst (${config["createCount"]}) and the ` +
          `backlog: ${fmt(closures, 0)} — ${verdict(closures, (x) => x === 0)}.`,
      );
      const peak = Math.max(get(id, "create", "peakRssMiB"), get(id, "backlog", "peakRssMiB"));
      const kopfPeak = Math.max(get(PY, "create", "peakRssMiB"), get(PY, "backlog", "peakRssMiB"));
      out.push(
        `- ${who}: peak RSS in the create burst and backlog ≤ 0.8× Kopf's: ` +
          `${ratio(peak, kopfPeak)} (${fmt(peak, 0)} vs ${fmt(kopfPeak, 0)} MiB) — ` +
          `${verdict(peak / kopfPeak, (x) => x <= 0.8)}.`,
      );
      const idle = get(id, "idle", "idleRssMiB"), kopfIdle = get(PY, "idle", "idleRssMiB");
      out.push(
        `- ${who}: idle RSS over ${fmt(get(id, "idle", "objects"), 0)} handled objects ≤ 0.3× ` +
          `Kopf's: ${ratio(idle, kopfIdle)} (${fmt(idle, 0)} vs ${fmt(kopfIdle, 0)} MiB) — ` +
          `${verdict(idle / kopfIdle, (x) => x <= 0.3)}.`,
      );
      const cpu = get(id, "backlog", cpuPerObject), rawCpu = get(RAW, "backlog", cpuPerObject);
      out.push(
        `- ${who}: CPU per object in the backlog ≤ 1.3× the raw floor: ${ratio(cpu, rawCpu)} — ` +
          `${verdict(cpu / rawCpu, (x) => x <= 1.3)}.`,
      );
      const tput = get(id, "backlog", "throughput"), rawTput = get(RAW, "backlog", "throughput");
      out.push(
        `- ${who}: backlog throughput ≥ 0.9× the raw floor: ${ratio(tput, rawTput)} — ` +
          `${verdict(tput / rawTput, (x) => x >= 0.9)} (Kopf: ${
            ratio(get(PY, "backlog", "throughput"), rawTput)
          } the floor).`,
      );
    }
    out.push("");
  }
  return out;
}

/**
 * The aims of issue 31 against controller-runtime (same persistence mode) and the raw floor,
 * per CRD variant and kopf-ts contender: only those this run measured.
 */
export function peerAims(results: BenchResults, label: (id: string) => string): string[] {
  const GO = "controller-runtime";
  const size = Number(results.config["createCount"]);
  const out: string[] = [`## Aims of issue 31 (against controller-runtime and the floor)`, ""];
  const mark = (ok: boolean | undefined) =>
    ok === undefined ? "not measured" : ok ? "**met**" : "**not met**";
  let any = false;
  for (const variant of variantsOf(results)) {
    const runs = runsOf(results, variant.id);
    const ids = results.contenders.map((c) => c.id).filter((id) =>
      runs.some((r) => r.contender === id)
    );
    const get = metricOf(results, variant.id);
    for (const id of ids.filter((i) => i.startsWith(TS))) {
      const go = peerOf(id, GO, ids);
      if (!go) continue;
      any = true;
      out.push(`${variant.label}, ${label(id)} vs ${label(go)}:`);
      out.push("");
      const line = (
        aim: string,
        pairs: Array<[string, number, number]>,
        ok: (r: number) => boolean,
      ) => {
        const measured = pairs.filter(([, a, b]) => Number.isFinite(a) && Number.isFinite(b) && b);
        if (!measured.length) return;
        const all = measured.every(([, a, b]) => ok(a / b));
        out.push(
          `- ${aim}: ${measured.map(([what, a, b]) => `${what} ${ratio(a, b)}`).join(", ")} — ${
            mark(all)
          }.`,
        );
      };
      const peakCap = size >= 10_000 ? 0.8 : 1.2;
      line(
        `peak RSS ≤ ${peakCap}× Go's`,
        ["create", "backlog", "restart"].map((
          p,
        ) => [p, get(id, p, "peakRssMiB"), get(go, p, "peakRssMiB")]),
        (r) => r <= peakCap,
      );
      line("idle RSS ≤ 0.5× Go's", [[
        "idle",
        get(id, "idle", "idleRssMiB"),
        get(go, "idle", "idleRssMiB"),
      ]], (r) => r <= 0.5);
      line(
        "throughput ≥ 1.1× Go's",
        ["create", "backlog"].map((p) => [p, get(id, p, "throughput"), get(go, p, "throughput")]),
        (r) => r >= 1.1,
      );
      const cpuPhases = ["create", "steady", "steady-fast", "updates", "restart", "backlog"];
      line(
        "operator CPU ≤ 0.5× Go's",
        cpuPhases.map((p) => [p, get(id, p, "cpuS"), get(go, p, "cpuS")]),
        (r) => r <= 0.5,
      );
      if (ids.includes(RAW)) {
        line(
          "backlog throughput ≥ 0.9× the floor's",
          [["backlog", get(id, "backlog", "throughput"), get(RAW, "backlog", "throughput")]],
          (r) => r >= 0.9,
        );
        line(
          "operator CPU ≤ 1.3× the floor's",
          cpuPhases.map((p) => [p, get(id, p, "cpuS"), get(RAW, p, "cpuS")]),
          (r) => r <= 1.3,
        );
      }
      for (const phase of ["steady", "steady-fast"]) {
        const p99 = get(id, phase, "latency.p99");
        line(
          `${
            phase === "steady" ? results.config["steadyRate"] : results.config["steadyFastRate"]
          }/s: p99 ≤ Go's`,
          [["p99", p99, get(go, phase, "latency.p99")]],
          (r) => r <= 1,
        );
        if (ids.includes(RAW)) {
          line(
            `${
              phase === "steady" ? results.config["steadyRate"] : results.config["steadyFastRate"]
            }/s: p99 ≤ 2× the floor's`,
            [["p99", p99, get(RAW, phase, "latency.p99")]],
            (r) => r <= 2,
          );
        }
      }
      out.push("");
    }
  }
  return any ? out : [];
}
