/**
 * Sharded replicas, measured: for 1, 2 and 3 replicas of `kopf run --shards` (the benchmark's
 * handlers, bench/handlers/kopf_ts.ts) on one private control plane (the `ShardedListAndWatch`
 * gate on, or off with `--gate-off`), it creates N objects with 48 requests in flight and waits
 * until all are handled, then reports per replica: the handler runs (its share), the watch events
 * it kept (`kopf_watch_events_total` from its `--metrics` endpoint, counted after the client-side
 * filter: about 1/R either way; with the gate off the discarded events cost CPU but are not
 * counted here), CPU seconds and peak RSS. With 2+ replicas it then
 * SIGKILLs one, creates N/10 more objects, and reports how long until all are handled (the
 * takeover: the lease duration, 15 s by default, plus a round or two). The API server's audit
 * log gives the replicas' writes (all replicas together, as they share a User-Agent): to the
 * objects (one per handled creation is the floor) and to the shards' Leases.
 *
 *   tools/deno.sh run -A bench/scale_out.ts [--count 1000] [--replicas 1,2,3] [--shards 8]
 *     [--gate-off] [--lease 15,10,2]
 *
 * Figures are measurements of one run on this machine, not assertions; the control plane and all
 * replicas share its cores, so CPU and latency depend on what else runs.
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { ControlPlane } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog, summarize } from "./lib/audit.ts";
import { Api, pool } from "./lib/kube.ts";
import { cpuSeconds, memoryMiB, processTree } from "./lib/procs.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string" },
    replicas: { type: "string" },
    shards: { type: "string" },
    lease: { type: "string" },
    "gate-off": { type: "boolean" },
  },
});
const count = Number(values.count ?? 1000);
const replicaCounts = (values.replicas ?? "1,2,3").split(",").map(Number);
const shards = Number(values.shards ?? 8);
const lease = values.lease ?? "15,10,2";
const gateOn = !values["gate-off"];

const log = (message: string) =>
  console.error(`[scale-out ${new Date().toISOString().slice(11, 19)}] ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

log(`starting a control plane (ShardedListAndWatch=${gateOn}, with an audit log)`);
const auditDir = await Deno.makeTempDir({ prefix: "kopf-scale-out-audit-" });
await Deno.writeTextFile(`${auditDir}/policy.yaml`, AUDIT_POLICY);
await using plane = await ControlPlane.start({
  controllerManager: false,
  featureGates: { ShardedListAndWatch: gateOn },
  apiServerArgs: [
    `--audit-policy-file=${auditDir}/policy.yaml`,
    `--audit-log-path=${auditDir}/audit.log`,
    "--audit-log-format=json",
    "--audit-log-mode=blocking",
    "--audit-log-maxsize=0",
    "--audit-log-maxbackup=0",
  ],
});
const audit = new AuditLog(`${auditDir}/audit.log`);
using api = new Api(plane);
const crd = parseYaml(await Deno.readTextFile(`${ROOT}/crds/example.yaml`));
await api.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);

async function handledCount(namespace: string): Promise<number> {
  const { body } = await api.request("GET", api.path(namespace), undefined, { timeoutMs: 60_000 });
  const items = (body as { items?: { status?: { create_fn?: unknown } }[] }).items ?? [];
  return items.filter((item) => item.status?.create_fn).length;
}

async function waitHandled(namespace: string, target: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (await handledCount(namespace) < target) {
    if (Date.now() > deadline) throw new Error(`not all ${target} objects handled in time`);
    await sleep(target > 2_000 ? 2_000 : 300); // a list of thousands is no free poll
  }
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  return port;
}

async function watchEvents(port: number): Promise<number> {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text())
    .catch(() => "");
  return text.split("\n").filter((l) => l.startsWith("kopf_watch_events_total{"))
    .filter((l) => !l.includes('type="BOOKMARK"'))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

function runs(path: string): number {
  try {
    return Deno.readTextFileSync(path).split("\n").filter((l) => l.startsWith("create ")).length;
  } catch {
    return 0;
  }
}

interface Replica {
  readonly id: string;
  readonly child: Deno.ChildProcess;
  readonly port: number;
  readonly runlog: string;
  /** The replica's stdout and stderr. */
  readonly output: string;
  /** Ends when both are copied. */
  readonly copies: Promise<unknown>;
}

/** Creation handlers that ran more than once (the runlog has one line per run). */
function repeatedRuns(path: string): number {
  try {
    const names = Deno.readTextFileSync(path).split("\n").filter((l) => l.startsWith("create "));
    return names.length - new Set(names).size;
  } catch {
    return 0;
  }
}

/** What a replica said about its shards: the lines that explain a stop and a re-take. */
function shardEvents(path: string): {
  renewalFailed: number;
  membershipLapsed: number;
  shardsTaken: number;
  warnings: number;
} {
  const text = (() => {
    try {
      return Deno.readTextFileSync(path);
    } catch {
      return "";
    }
  })();
  const count = (pattern: RegExp) => text.split("\n").filter((l) => pattern.test(l)).length;
  return {
    renewalFailed: count(/Cannot renew the shard membership/),
    membershipLapsed: count(/Shard membership not renewed within/),
    shardsTaken: count(/are held by others now/),
    warnings: count(/WARNING|ERROR/i),
  };
}

const rows: string[] = [];
const results: Record<string, unknown>[] = [];
const dir = await Deno.makeTempDir({ prefix: "kopf-scale-out-" });
for (const replicas of replicaCounts) {
  const namespace = `so-${replicas}-${Date.now() % 100_000}`;
  await api.request("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  await api.create(namespace, "warm-up").catch(() => {});
  const started: Replica[] = [];
  for (let i = 0; i < replicas; i++) {
    const id = `r${i + 1}`;
    const port = freePort();
    const runlog = `${dir}/${namespace}-${id}.log`;
    const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
      args: [
        ...["run", "-A", "cli.ts", "run", "bench/handlers/kopf_ts.ts"],
        ...["-n", namespace, "--standalone", "-q", "--shards", "--shard-count", String(shards)],
        ...["--lease-namespace", namespace, "--metrics", `http://127.0.0.1:${port}/metrics`],
      ],
      cwd: ROOT,
      env: {
        KUBECONFIG: plane.kubeconfigPath,
        POD_NAME: id,
        BENCH_RUNLOG: runlog,
        BENCH_NO_EVENTS: "1",
        BENCH_LEASE: lease,
      },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    // The replica's own lines (warnings and errors: `-q`), kept to explain what the numbers show.
    const output = `${dir}/${namespace}-${id}.out`;
    const file = await Deno.open(output, { write: true, create: true, append: true });
    const copies = Promise.all([
      child.stdout.pipeTo(file.writable, { preventClose: true }),
      child.stderr.pipeTo(
        new WritableStream({ write: (chunk) => void file.writeSync(chunk) }),
      ),
    ]).finally(() => file.close());
    started.push({ id, child, port, runlog, output, copies });
  }
  // Wait for the warm-up object to be handled and the shards to settle (a few rounds).
  await waitHandled(namespace, 1, 120_000);
  await sleep(Number(lease.split(",")[2]) * 1000 * 4);
  const before = await Promise.all(started.map((r) => watchEvents(r.port)));
  const cpuBefore = started.map((r) => cpuSeconds(processTree(r.child.pid)));
  log(`${replicas} replica(s): creating ${count} objects`);
  const t0 = performance.now();
  await pool(Array.from({ length: count }, (_, i) => `o${i}`), 48, (n) => api.create(namespace, n));
  await waitHandled(namespace, count + 1, 600_000);
  const seconds = (performance.now() - t0) / 1000;
  const per = await Promise.all(started.map(async (r, i) => ({
    id: r.id,
    handled: runs(r.runlog),
    repeated: repeatedRuns(r.runlog),
    events: (await watchEvents(r.port)) - before[i]!,
    cpu: cpuSeconds(processTree(r.child.pid)) - cpuBefore[i]!,
    peakRssMiB: memoryMiB(processTree(r.child.pid), "VmHWM"),
  })));
  let takeoverSeconds: number | undefined;
  if (replicas >= 2) {
    const victim = started.at(-1)!;
    victim.child.kill("SIGKILL");
    await victim.child.status;
    const extra = Math.max(1, Math.floor(count / 10));
    const t1 = performance.now();
    await pool(
      Array.from({ length: extra }, (_, i) => `k${i}`),
      48,
      (n) => api.create(namespace, n),
    );
    await waitHandled(namespace, count + 1 + extra, 300_000);
    takeoverSeconds = (performance.now() - t1) / 1000;
  }
  for (const r of started) {
    try {
      r.child.kill("SIGTERM");
    } catch {
      // already gone
    }
    await r.child.status;
    await r.copies.catch(() => {});
  }
  const said = started.map((r) => ({ id: r.id, ...shardEvents(r.output) }));
  // Kept for a look when something needs explaining (the temporary directory goes).
  for (const r of started) {
    await Deno.copyFile(r.output, `${ROOT}/bench/results/.last-scale-out-${replicas}-${r.id}.out`)
      .catch(() => {});
  }
  await sleep(1_000);
  await audit.poll();
  const ours = audit.records.filter((r) =>
    r.namespace === namespace && r.userAgent.startsWith("kopf-ts")
  );
  audit.records.length = 0;
  const objects = count + 1 + (replicas >= 2 ? Math.max(1, Math.floor(count / 10)) : 0);
  const objectWrites = summarize(ours.filter((r) => r.resource === "kopfexamples")).writes;
  const leaseWrites = summarize(ours.filter((r) => r.resource === "leases")).writes;
  const writes = { objectWrites, perObject: objectWrites / objects, leaseWrites, objects };
  const result = {
    replicas,
    count,
    shards,
    gateOn,
    seconds,
    takeoverSeconds,
    per,
    said,
    writes,
  };
  results.push(result);
  log(JSON.stringify(result));
  for (const [i, p] of per.entries()) {
    const lines = said[i]!;
    rows.push(
      `| ${replicas} | ${p.id} | ${p.handled} | ${p.repeated} | ${lines.renewalFailed} / ${lines.membershipLapsed} / ${lines.shardsTaken} | ${p.events} | ${
        p.cpu.toFixed(2)
      } | ` +
        `${p.peakRssMiB.toFixed(0)} | ${seconds.toFixed(1)} | ${
          takeoverSeconds?.toFixed(1) ?? "—"
        } | ${objectWrites} (${writes.perObject.toFixed(2)}/object) | ${leaseWrites} |`,
    );
  }
}
await Deno.remove(dir, { recursive: true }).catch(() => {});
await Deno.remove(auditDir, { recursive: true }).catch(() => {});

const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+/, "");
await Deno.writeTextFile(
  `${ROOT}/bench/results/${stamp}-scale-out.json`,
  JSON.stringify({ count, shards, lease, gateOn, results }, null, 2) + "\n",
);
console.log(
  [
    `Scale-out: ${count} objects, ${shards} shards, lease ${lease} s, ShardedListAndWatch ${
      gateOn ? "on" : "off"
    }; one run on this machine (the control plane and all replicas share its cores).`,
    "",
    "| replicas | replica | create handlers run (incl. a warm-up object) | of them repeated | membership: renewals failed / lapses / shards taken | watch events kept (after the client-side filter) | CPU, s | peak RSS, MiB | all handled, s | after SIGKILL of one: N/10 more handled, s | writes to the objects, all replicas (audit log) | Lease writes, all replicas |",
    "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rows,
  ].join("\n"),
);
