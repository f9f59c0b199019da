/**
 * The soak: a steady churn of creates, patches and deletes over a few hundred objects on a real
 * control plane for N minutes, with the operator (`kopf run bench/handlers/soak_ts.ts`) as a
 * separate process. Reports its RSS and CPU every 10 s, accounts for every handler run (each
 * change must be handled exactly once: none lost, none twice), and counts the operator's API
 * requests from the API server's audit log. The operator logs at its default level (so it
 * posts Events, as deployed operators do). See docs/reliability.md.
 *
 *   deno run -A bench/soak.ts --minutes 60                  # the record
 *   deno run -A bench/soak.ts --minutes 5                   # a quick look
 *   deno run -A bench/soak.ts --chart results.json          # re-render the chart of a run
 *
 * Options: `--objects 300` (slots), `--rate 4` (changes per second), `--warmup 5` (minutes
 * before the RSS slope is measured; default min(5, minutes / 5)), `--out FILE` (default
 * `bench/results/<time>-soak-<N>m.json`, with the chart beside it as `.svg`).
 *
 * The churn: every tick one slot that has no unhandled change gets one: an empty slot a new
 * object (a fresh name), a filled one a patch of `spec.value` (90%) or a deletion (10%). A
 * change waits for its handler run before its object changes again, so every change maps to
 * exactly one expected run. It is a measurement, not a test: nothing here asserts a timing.
 *
 * The parts: bench/lib/soak_ledger.ts (changes and handler runs, matched),
 * bench/lib/soak_phases.ts (sampling, churn, drain, end state), bench/lib/soak_report.ts (the
 * summary, the results file and its chart).
 * @module
 */
import { parseArgs } from "node:util";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog } from "./lib/audit.ts";
import { CRD_VARIANTS } from "./lib/config.ts";
import { Api } from "./lib/kube.ts";
import { findProcesses } from "./lib/procs.ts";
import { applyCrd, waitForCrd } from "./lib/setup.ts";
import { Ledger } from "./lib/soak_ledger.ts";
import { churn, commandOutput, drain, endState, log, Sampler } from "./lib/soak_phases.ts";
import {
  soakChartSvg,
  type SoakResults,
  soakResults,
  writeSoakResults,
} from "./lib/soak_report.ts";

export { soakChartSvg };
export type { SoakResults, SoakSample } from "./lib/soak_report.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const SAMPLE_MS = 10_000;

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      minutes: { type: "string", default: "5" },
      objects: { type: "string", default: "300" },
      rate: { type: "string", default: "4" },
      warmup: { type: "string" },
      out: { type: "string" },
      chart: { type: "string" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(
      "Usage: deno run -A bench/soak.ts [--minutes 5] [--objects 300] [--rate 4] " +
        "[--warmup MIN] [--out FILE.json] [--keep]\n       deno run -A bench/soak.ts --chart FILE.json",
    );
    return 0;
  }
  if (values.chart) {
    const results = JSON.parse(await Deno.readTextFile(values.chart)) as SoakResults;
    const svgPath = values.chart.replace(/\.json$/, "") + ".svg";
    await Deno.writeTextFile(svgPath, await soakChartSvg(results));
    log(`chart: ${svgPath}`);
    return 0;
  }
  const minutes = Number(values.minutes), objects = Number(values.objects);
  const rate = Number(values.rate);
  const warmupMinutes = values.warmup ? Number(values.warmup) : Math.min(5, minutes / 5);
  for (const [name, value] of [["minutes", minutes], ["objects", objects], ["rate", rate]]) {
    if (!(Number(value) > 0)) throw new RangeError(`--${name} must be a positive number`);
  }
  const started = new Date();
  const stamp = started.toISOString().replace(/[:.]/g, "-").replace(/-\d\d\dZ$/, "Z");
  const outPath = values.out ?? `${ROOT}/bench/results/${stamp}-soak-${minutes}m.json`;

  log("warming the Deno module cache");
  await commandOutput([`${ROOT}/tools/deno.sh`, "cache", "cli.ts", "bench/handlers/soak_ts.ts"]);
  const work = await Deno.makeTempDir({
    dir: await Deno.stat("/dev/shm").then(() => "/dev/shm").catch(() => undefined),
    prefix: "kopf-soak-",
  });
  const auditPath = `${work}/audit.log`;
  await Deno.writeTextFile(`${work}/audit-policy.yaml`, AUDIT_POLICY);
  log(`work directory: ${work}`);

  let operator: Deno.ChildProcess | undefined;
  let plane: ControlPlane | undefined;
  const stopAll = async () => {
    try {
      operator?.kill("SIGKILL");
    } catch { /* gone */ }
    await operator?.status;
    await plane?.stop();
    if (!values.keep) await Deno.remove(work, { recursive: true }).catch(() => {});
  };
  const onSignal = () => {
    log("interrupted: stopping everything");
    globalThis.addEventListener("unhandledrejection", (event) => event.preventDefault());
    stopAll().finally(() => Deno.exit(130));
  };
  Deno.addSignalListener("SIGINT", onSignal);
  Deno.addSignalListener("SIGTERM", onSignal);

  try {
    log("starting the control plane (with an audit log)");
    plane = await ControlPlane.start({
      controllerManager: false,
      handleSignals: false,
      apiServerArgs: [
        `--audit-policy-file=${work}/audit-policy.yaml`,
        `--audit-log-path=${auditPath}`,
        "--audit-log-format=json",
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
        "--audit-log-maxbackup=0",
      ],
    });
    using api = new Api(plane);
    await applyCrd(api, CRD_VARIANTS.find((v) => v.id === "plain") ?? CRD_VARIANTS[0]!);
    await waitForCrd(api);
    const warmNs = await createTestNamespace(plane, "soak-warmup");
    for (let i = 0; i < 3; i++) {
      await api.create(warmNs, `warmup-${i}`);
      await api.delete(warmNs, `warmup-${i}`);
    }
    const ns = await createTestNamespace(plane, "soak");
    const audit = new AuditLog(auditPath);
    const otherApiServers = findProcesses("--etcd-servers", "kube-apiserver").length - 1;
    const versionInfo = (await api.request("GET", "/version")).body as { gitVersion?: string };

    const runlog = `${work}/runs.log`;
    const ledger = new Ledger(runlog, objects, log);
    log(`starting the operator in namespace ${ns}`);
    operator = new Deno.Command("/bin/sh", {
      args: [
        "-c",
        'log=$1; shift; exec "$@" >>"$log" 2>&1',
        "sh",
        `${work}/operator.log`,
        `${ROOT}/tools/deno.sh`,
        ...["run", "-A", "cli.ts", "run", "bench/handlers/soak_ts.ts"],
        ...["-n", ns, "--standalone"],
      ],
      cwd: ROOT,
      env: { KUBECONFIG: plane.kubeconfigPath, SOAK_RUNLOG: runlog, NO_COLOR: "1" },
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    const operatorPid = operator.pid;
    const t0 = Date.now();

    const sampler = new Sampler(ledger, audit, operatorPid, t0);
    sampler.start(SAMPLE_MS);
    const { skippedTicks, failures } = await churn(api, ns, ledger, sampler.samples, {
      t0,
      minutes,
      rate,
    });
    await drain(ledger);
    sampler.stop();
    await sampler.sample();
    const { stale, stuck } = await endState(api, ns);

    log("stopping the operator (SIGTERM)");
    const stopAt = Date.now();
    operator.kill("SIGTERM");
    const timer = setTimeout(() => operator?.kill("SIGKILL"), 30_000);
    const status = await operator.status;
    clearTimeout(timer);
    const operatorExitMs = Date.now() - stopAt;
    operator = undefined;

    const finishedAt = new Date().toISOString();
    const results = soakResults({
      started,
      finishedAt,
      config: { minutes, objects, rate, warmupMinutes },
      machine: {
        nproc: navigator.hardwareConcurrency,
        kernel: Deno.osRelease(),
        otherApiServers,
        harnessFailures: failures,
      },
      versions: {
        deno: Deno.version.deno,
        kubernetes: versionInfo.gitVersion ?? "unknown",
        commit: await commandOutput(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
      },
      samples: sampler.samples,
      ledger,
      stale,
      stuck,
      skippedTicks,
      cpuSecondsTotal: sampler.cpuSeconds,
      requestsTotal: sampler.requestsTotal,
      requestsNoEvents: sampler.requestsNoEvents,
      operatorExitMs,
      operatorExitCode: status.code,
    });
    const svgPath = await writeSoakResults(outPath, results);
    console.log(JSON.stringify(results.summary, null, 2));
    log(`results: ${outPath}, chart: ${svgPath}`);
    if (results.summary.lost || results.summary.duplicated || results.summary.unexpected) {
      log(
        `operator log tail:\n${
          (await Deno.readTextFile(`${work}/operator.log`).catch(() => "")).split("\n").slice(-30)
            .join("\n")
        }`,
      );
    }
    const clean = !results.summary.lost && !results.summary.duplicated &&
      !results.summary.unexpected && !stale && !stuck;
    return clean ? 0 : 1;
  } finally {
    await stopAll();
    Deno.removeSignalListener("SIGINT", onSignal);
    Deno.removeSignalListener("SIGTERM", onSignal);
  }
}

if (import.meta.main) Deno.exit(await main());
