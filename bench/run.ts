/**
 * Benchmarks this framework side by side with Python Kopf, a raw floor and the peers people pick
 * instead (Go's controller-runtime, `@kubernetes/client-node`'s informer), on ONE real control
 * plane in one run, on two CRD variants (with a status subresource — the headline — and
 * without), and reports absolute figures and ratios. See docs/performance.md.
 *
 *   deno task bench                          # the quick variant (1,000 objects)
 *   deno run -A bench/run.ts --full          # the full variant (10,000 objects)
 *   deno run -A bench/run.ts --huge          # 50,000 objects
 *   deno run -A bench/run.ts --reps 3        # repeat; the table shows medians
 *   deno run -A bench/run.ts --only kopf-ts,raw-floor --variants status
 *   deno run -A bench/run.ts --huge --scenarios backlog,finalizers   # only those namespaces
 *   deno run -A bench/run.ts --report bench/results/<file>.json   # re-render a table
 *   deno run -A bench/run.ts --full --reps 1 --first-rep 2   # a later repetition, then:
 *   deno run -A bench/run.ts --merge bench/results/<a>.json,bench/results/<b>.json
 *
 * The pieces: `lib/config.ts` (sizes, CRD variants), `lib/contenders.ts` (who runs, their
 * processes), `lib/session.ts` (measuring one scenario), `lib/scenarios.ts` (the scenarios),
 * `lib/setup.ts` (CRDs, warm-up), `lib/results.ts` (the result file), `lib/figures.ts` (its
 * figures, medians, ratios), `lib/report.ts` (the table), `lib/report_aims.ts` (the aims'
 * verdicts), `lib/merge.ts` (repetitions of several runs as one), `lib/charts.ts` (the SVGs).
 * Timings here are measurements, not assertions.
 * @module
 */
import { parseArgs } from "node:util";
import { ControlPlane } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog } from "./lib/audit.ts";
import {
  type Config,
  CRD_VARIANTS,
  FULL,
  HUGE,
  QUICK,
  SCENARIO_GROUPS,
  type ScenarioGroup,
} from "./lib/config.ts";
import {
  commandOutput,
  contenders,
  log,
  OPT_IN,
  type Peers,
  ROOT,
  RUNNING,
} from "./lib/contenders.ts";
import { Api } from "./lib/kube.ts";
import { findProcesses, loadAverage } from "./lib/procs.ts";
import { mergeResults } from "./lib/merge.ts";
import { renderMarkdown } from "./lib/report.ts";
import type { BenchResults, ContenderRun } from "./lib/results.ts";
import { runScenarios } from "./lib/scenarios.ts";
import { ContenderSession } from "./lib/session.ts";
import { applyCrd, machineInfo, waitForCrd, warmUp } from "./lib/setup.ts";

const RESULTS = `${ROOT}/bench/results`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      full: { type: "boolean" },
      huge: { type: "boolean" },
      reps: { type: "string" },
      "first-rep": { type: "string" },
      merge: { type: "string" },
      only: { type: "string" },
      variants: { type: "string" },
      scenarios: { type: "string" },
      keep: { type: "boolean" },
      report: { type: "string" },
      charts: { type: "string" },
      set: { type: "string", multiple: true },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "Usage: deno run -A bench/run.ts [--full|--huge] [--reps N]\n" +
        "         [--only kopf-ts,kopf-ts-status,kopf-py,raw-floor,controller-runtime,\n" +
        "                 controller-runtime-status,client-node,client-node-status]\n" +
        "         [--variants status,plain]\n" +
        `         [--scenarios ${SCENARIO_GROUPS}]\n` +
        "         [--set KEY=NUMBER]... [--keep] [--report FILE] [--charts FILE]\n" +
        "         [--first-rep N]    number this run's repetitions from N (the contenders'\n" +
        "                            order rotates on), to be merged with earlier runs\n" +
        "         [--merge A.json,B.json,...]  one report (medians, spreads) of runs of one\n" +
        "                            configuration made at different times\n" +
        `Keys for --set: ${Object.keys(QUICK).filter((k) => k !== "variant").join(", ")}`,
    );
    return 0;
  }
  if (values.report) {
    const results = JSON.parse(await Deno.readTextFile(values.report)) as BenchResults;
    console.log(renderMarkdown(results));
    return 0;
  }
  if (values.merge) {
    const names = values.merge.split(",").map((s) => s.trim()).filter(Boolean);
    const sources = [];
    for (const name of names) {
      try {
        sources.push({ name, results: JSON.parse(await Deno.readTextFile(name)) as BenchResults });
      } catch (error) {
        console.error(`error: --merge ${name}: not a readable result file (${error})`);
        return 2;
      }
    }
    let merged: BenchResults;
    try {
      merged = mergeResults(
        sources.map((s) => ({ name: s.name.replace(/^.*\//, ""), results: s.results })),
      );
    } catch (error) {
      console.error(`error: ${error instanceof Error ? error.message : error}`);
      return 2;
    }
    const base = `${RESULTS}/${stampOf(new Date(merged.startedAt))}-${
      merged.config["variant"]
    }-merged`;
    await Deno.writeTextFile(`${base}.json`, JSON.stringify(merged) + "\n");
    const markdown = renderMarkdown(merged);
    await Deno.writeTextFile(`${base}.md`, markdown);
    const { writeCharts } = await import("./lib/bench_charts.ts");
    for (const path of await writeCharts(merged, base)) log(`chart: ${path}`);
    console.log(markdown);
    log(`results: ${base}.json`);
    return 0;
  }
  if (values.charts) {
    const { writeCharts } = await import("./lib/bench_charts.ts");
    const results = JSON.parse(await Deno.readTextFile(values.charts)) as BenchResults;
    for (const path of await writeCharts(results, values.charts.replace(/\.json$/, ""))) {
      log(`chart: ${path}`);
    }
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
  const firstRep = Number(values["first-rep"] ?? 1);
  if (!Number.isInteger(firstRep) || firstRep < 1) {
    console.error(`error: --first-rep ${values["first-rep"]}: expected a whole number from 1`);
    return 2;
  }
  const config: Config = {
    ...(values.huge ? HUGE : values.full ? FULL : QUICK),
    ...(values.reps ? { reps: Math.max(1, Number(values.reps)) } : {}),
    ...overrides,
  };
  const wanted = values.variants?.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = wanted?.filter((w) => !CRD_VARIANTS.some((v) => v.id === w)) ?? [];
  if (unknown.length) {
    console.error(`error: --variants: unknown ${unknown}; expected status, plain`);
    return 2;
  }
  const groupList = values.scenarios?.split(",").map((s) => s.trim()).filter(Boolean);
  const badGroups = groupList?.filter((g) => !(SCENARIO_GROUPS as readonly string[]).includes(g));
  if (badGroups?.length) {
    console.error(`error: --scenarios: unknown ${badGroups}; expected ${SCENARIO_GROUPS}`);
    return 2;
  }
  const groups = groupList && new Set(groupList as ScenarioGroup[]);
  const variants = CRD_VARIANTS.filter((v) => !wanted || wanted.includes(v.id));
  const started = new Date();
  const loadAvgAtStart = loadAverage();
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
  // The peers (docs/performance.md "Peers"): built by tools/bench-peers.sh into the cache.
  const peers: { -readonly [K in keyof Peers]: Peers[K] } = {};
  const versions: Record<string, string> = {};
  if (!only || only.some((id) => id.startsWith("controller-runtime"))) {
    peers.controllerRuntime = await buildPeer("controller-runtime");
    if (peers.controllerRuntime) {
      versions["controllerRuntime"] = await commandOutput([
        "awk",
        '$1 == "sigs.k8s.io/controller-runtime" || $1 == "k8s.io/client-go" { print $1 " " $2 }',
        `${ROOT}/bench/peers/controller_runtime/go.mod`,
      ]).then((text) => text.replace(/\n/g, ", "));
      versions["go"] = await commandOutput(["go", "version"]);
    }
  }
  if (!only || only.some((id) => id.startsWith("client-node"))) {
    peers.clientNode = await buildPeer("client-node");
    if (peers.clientNode) {
      const manifest = JSON.parse(
        await Deno.readTextFile(
          `${peers.clientNode}/node_modules/@kubernetes/client-node/package.json`,
        ),
      ) as { version?: string };
      versions["clientNode"] = manifest.version ?? "?";
      versions["node"] = await commandOutput(["node", "--version"]);
    }
  }
  const list = contenders(venv, peers).filter((c) =>
    only ? only.includes(c.id) : !OPT_IN.has(c.id)
  );

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
  const apis: Api[] = [];
  let interrupted = false;
  const stopAll = async () => {
    for (const op of [...RUNNING]) await op.stop(5_000);
    await plane?.stop();
    if (!interrupted) { for (const api of apis) api[Symbol.dispose](); }
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
    const apiOf = new Map<string, Api>();
    for (const variant of variants) {
      const api = new Api(plane, variant.resource);
      apis.push(api);
      apiOf.set(variant.id, api);
      await applyCrd(api, variant);
      await waitForCrd(api);
      await warmUp(api, plane);
    }
    const audit = new AuditLog(auditPath);
    const versionInfo = (await apis[0]!.request("GET", "/version")).body as {
      gitVersion?: string;
    };
    const foreignPlanes = findProcesses("--etcd-servers", "kube-apiserver").length - 1;
    if (foreignPlanes > 0) {
      log(`note: ${foreignPlanes} other kube-apiserver(s) running on this machine: expect noise`);
    }

    for (let rep = firstRep; rep < firstRep + config.reps; rep++) {
      for (const variant of variants) {
        // Rotate the order between repetitions so that no contender always goes first.
        const here = list.filter((c) => !c.variants || c.variants.includes(variant.id));
        const order = here.map((_, i) => here[(i + rep - 1) % here.length]!);
        for (const contender of order) {
          if (interrupted) break;
          const session = new ContenderSession({
            config,
            api: apiOf.get(variant.id)!,
            audit,
            plane,
            contender,
            variant,
            work,
            rep,
            ...(groups ? { groups } : {}),
          });
          let error: string | undefined;
          try {
            await runScenarios(session);
          } catch (e) {
            error = e instanceof Error ? `${e.message}` : String(e);
            log(`${contender.id} [${variant.id}]: FAILED: ${error}`);
            if (session.operator) log(`operator log:\n${session.operator.logTail(30)}`);
          } finally {
            session.close();
          }
          if (interrupted) break;
          runs.push({
            contender: contender.id,
            variant: variant.id,
            rep,
            phases: session.phases,
            rss: session.rss,
            error,
          });
        }
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
        loadAvgAtStart,
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
        ...versions,
      },
      contenders: list.map((c) => ({ id: c.id, label: c.label, userAgent: c.userAgent })),
      variants: variants.map((v) => ({ id: v.id, label: v.label })),
      runs,
    };
    await Deno.mkdir(RESULTS, { recursive: true });
    const stamp = stampOf(started);
    // Runs with --only, --variants, --scenarios or --set are diagnostics: kept beside the others, not as
    // latest.md.
    const custom = Boolean(only) || Boolean(wanted) || Boolean(groups) || firstRep > 1 ||
      Object.keys(overrides).length > 0;
    const base = `${RESULTS}/${stamp}-${config.variant}${custom ? "-custom" : ""}`;
    const jsonPath = `${base}.json`;
    await Deno.writeTextFile(jsonPath, JSON.stringify(results) + "\n");
    const markdown = renderMarkdown(results);
    if (!custom) await Deno.writeTextFile(`${RESULTS}/latest.md`, markdown);
    await Deno.writeTextFile(`${base}.md`, markdown);
    try {
      const { writeCharts } = await import("./lib/bench_charts.ts");
      for (const path of await writeCharts(results, base)) log(`chart: ${path}`);
    } catch (error) {
      log(`charts not rendered: ${error}`);
    }
    console.log(markdown);
    log(`results: ${jsonPath}${custom ? "" : `, ${RESULTS}/latest.md`}`);
    return runs.some((r) => r.error) ? 1 : 0;
  } finally {
    await stopAll();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

/** A result file's time stamp: `2026-11-28T09-30-00Z`. */
function stampOf(time: Date): string {
  return time.toISOString().replace(/[:.]/g, "-").replace(/-\d\d\dZ$/, "Z");
}

/** Builds (or finds in the cache) one peer with tools/bench-peers.sh; undefined if it cannot. */
async function buildPeer(name: "controller-runtime" | "client-node"): Promise<string | undefined> {
  log(`preparing ${name} (tools/bench-peers.sh ${name})`);
  const out = await new Deno.Command(`${ROOT}/tools/bench-peers.sh`, {
    args: [name],
    stdout: "piped",
    stderr: "inherit",
    signal: AbortSignal.timeout(1_800_000),
  }).output().catch((error) => {
    log(`tools/bench-peers.sh ${name} failed: ${error}`);
    return undefined;
  });
  const path = out?.success
    ? new TextDecoder().decode(out.stdout).trim().split("\n").pop()
    : undefined;
  if (!path) log(`${name} is not available: running without it`);
  return path;
}

if (import.meta.main) Deno.exit(await main());
