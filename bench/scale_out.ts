/**
 * Sharded replicas and leader election, measured on one private control plane (the
 * `ShardedListAndWatch` gate on, or off with `--gate-off`), with the benchmark's handlers
 * (bench/handlers/kopf_ts.ts).
 *
 * Sharding: for 1, 2 and 3 replicas of `kopf run --shards` (32 shards by default, as
 * `kopf run`), it creates N objects with 48 requests in flight and waits until all are handled,
 * then reports per replica: the handler runs (its share), the watch events it RECEIVED from the
 * server and those it KEPT (`kopf_watch_events_total` from its `--metrics` endpoint: the type
 * `FILTERED` counts what the client-side hash filter dropped, i.e. what the server sent for
 * other shards; received = kept + FILTERED: about 1/N of all with the gate on, each held shard's
 * watch receiving everything with it off), CPU seconds and peak RSS. With 2+ replicas it then
 * SIGKILLs one, creates N/10 more objects at once, and measures the takeover directly: from the
 * kill to the first and to the last handled object in the victim's shards (its shard Leases just
 * before the kill; the handling time is when the harness's own watch saw `status.create_fn`).
 * The API server's audit log gives the replicas' writes (all replicas together, as they share a
 * User-Agent): to the objects (one per handled creation is the floor) and to the Leases.
 *
 * Leader election (unless `--no-leader`): two replicas of `kopf run --leader-elect` with the
 * default Lease timings (15 s / 10 s / 2 s); SIGTERM to the leader and one object created at
 * once: the time until the standby has handled it; then a third replica stands by, SIGKILL to
 * the leader and again one object: the time until it is handled.
 *
 *   tools/deno.sh run -A bench/scale_out.ts [--count 1000] [--replicas 1,2,3] [--shards 32]
 *     [--gate-off] [--lease 15,10,2] [--no-leader]
 *
 * Figures are measurements of one run on this machine, not assertions; the control plane and all
 * replicas share its cores, so CPU and latency depend on what else runs.
 * @module
 */
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { ControlPlane } from "../testing/control_plane.ts";
import { AUDIT_POLICY, AuditLog, summarize } from "./lib/audit.ts";
import { Api, Observer, pool } from "./lib/kube.ts";
import { cpuSeconds, memoryMiB, processTree } from "./lib/procs.ts";
import { shardOfObject } from "../core/structs/shards.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");
const { values } = parseArgs({
  args: Deno.args,
  options: {
    count: { type: "string" },
    replicas: { type: "string" },
    shards: { type: "string" },
    lease: { type: "string" },
    "gate-off": { type: "boolean" },
    "no-leader": { type: "boolean" },
  },
});
const count = Number(values.count ?? 1000);
const replicaCounts = (values.replicas ?? "1,2,3").split(",").map(Number);
const shards = Number(values.shards ?? 32);
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

/** Watch events from a replica's metrics: kept by it, and received (kept + FILTERED). */
async function watchEvents(port: number): Promise<{ kept: number; received: number }> {
  const text = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text())
    .catch(() => "");
  const lines = text.split("\n").filter((l) => l.startsWith("kopf_watch_events_total{"))
    .filter((l) => !l.includes('type="BOOKMARK"'));
  const sum = (ls: string[]) => ls.reduce((total, l) => total + Number(l.split(" ").pop()), 0);
  const filtered = sum(lines.filter((l) => l.includes('type="FILTERED"')));
  const kept = sum(lines.filter((l) => !l.includes('type="FILTERED"')));
  return { kept, received: kept + filtered };
}

/** The shards each holder's identity holds now, from the shard Leases `kopf-shard-<k>`. */
async function shardHolders(namespace: string): Promise<Map<number, string>> {
  const { body } = await api.request(
    "GET",
    `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
  );
  const items = (body as {
    items?: { metadata: { name: string }; spec?: { holderIdentity?: string } }[];
  }).items ?? [];
  const holders = new Map<number, string>();
  for (const lease of items) {
    const match = /^kopf-shard-(\d+)$/.exec(lease.metadata.name);
    if (match && lease.spec?.holderIdentity) {
      holders.set(Number(match[1]), lease.spec.holderIdentity);
    }
  }
  return holders;
}

/** The objects' uids by name (for their shards). */
async function uids(namespace: string): Promise<Map<string, string>> {
  const { body } = await api.request("GET", api.path(namespace), undefined, { timeoutMs: 60_000 });
  const items = (body as { items?: { metadata: { name: string; uid: string } }[] }).items ?? [];
  return new Map(items.map((item) => [item.metadata.name, item.metadata.uid]));
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
    ...(await watchEvents(r.port).then((now) => ({
      events: now.kept - before[i]!.kept,
      received: now.received - before[i]!.received,
    }))),
    cpu: cpuSeconds(processTree(r.child.pid)) - cpuBefore[i]!,
    peakRssMiB: memoryMiB(processTree(r.child.pid), "VmHWM"),
  })));
  let takeoverSeconds: number | undefined;
  let takeover: { objects: number; firstSeconds: number; lastSeconds: number } | undefined;
  if (replicas >= 2) {
    const victim = started.at(-1)!;
    const victimShards = new Set(
      [...(await shardHolders(namespace))].filter(([, holder]) =>
        holder.startsWith(`${victim.id}_`)
      ).map(([shard]) => shard),
    );
    const observer = new Observer(api, namespace);
    await observer.start();
    const extra = Math.max(1, Math.floor(count / 10));
    const names = Array.from({ length: extra }, (_, i) => `k${i}`);
    const killedAt = Date.now();
    victim.child.kill("SIGKILL");
    await victim.child.status;
    const t1 = performance.now();
    await pool(names, 48, (n) => api.create(namespace, n));
    await waitHandled(namespace, count + 1 + extra, 300_000);
    takeoverSeconds = (performance.now() - t1) / 1000;
    await observer.waitUntil(() => observer.countHandled(names) === extra, 60_000);
    await observer.stop();
    const uid = await uids(namespace);
    const moved = names.filter((name) =>
      victimShards.has(shardOfObject({ metadata: { uid: uid.get(name) } }, "uid", shards))
    );
    const times = moved.map((name) => observer.seen.get(name)!.handledAt! - killedAt);
    takeover = {
      objects: moved.length,
      firstSeconds: Math.min(...times) / 1000,
      lastSeconds: Math.max(...times) / 1000,
    };
    log(
      `takeover after SIGKILL: ${JSON.stringify({ victimShards: [...victimShards], ...takeover })}`,
    );
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
    takeover,
    per,
    said,
    writes,
  };
  results.push(result);
  log(JSON.stringify(result));
  for (const [i, p] of per.entries()) {
    const lines = said[i]!;
    const moved = takeover
      ? `${takeover.firstSeconds.toFixed(1)} / ${
        takeover.lastSeconds.toFixed(1)
      } (${takeover.objects})`
      : "—";
    rows.push(
      `| ${replicas} | ${p.id} | ${p.handled} | ${p.repeated} | ${lines.renewalFailed} / ${lines.membershipLapsed} / ${lines.shardsTaken} | ${p.received} | ${p.events} | ${
        p.cpu.toFixed(2)
      } | ` +
        `${p.peakRssMiB.toFixed(0)} | ${seconds.toFixed(1)} | ${
          takeoverSeconds?.toFixed(1) ?? "—"
        } | ${moved} | ${objectWrites} (${writes.perObject.toFixed(2)}/object) | ${leaseWrites} |`,
    );
  }
}
/** A `kopf run --leader-elect` replica with its output in a file. */
interface Contender {
  readonly id: string;
  readonly child: Deno.ChildProcess;
  readonly runlog: string;
  readonly output: string;
  readonly copies: Promise<unknown>;
}

function readText(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return "";
  }
}

async function until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/**
 * Leader election's hand-over: the time from a signal to the leader (SIGTERM: it releases the
 * Lease; SIGKILL: the Lease expires) until an object created right after it is handled, and by
 * whom. Each trial has a fresh standby waiting; default Lease timings (15 s / 10 s / 2 s).
 */
async function leaderElection(plan: readonly Deno.Signal[]) {
  const namespace = `le-${Date.now() % 100_000}`;
  await api.request("POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: namespace },
  });
  let serial = 0;
  const spawn = async (): Promise<Contender> => {
    const id = `l${++serial}`;
    const runlog = `${dir}/${namespace}-${id}.log`;
    const output = `${dir}/${namespace}-${id}.out`;
    const child = new Deno.Command(`${ROOT}/tools/deno.sh`, {
      args: [
        ...["run", "-A", "cli.ts", "run", "bench/handlers/kopf_ts.ts", "-n", namespace],
        ...["--standalone", "--leader-elect", "--lease-namespace", namespace],
        ...["--log-format", "plain"],
      ],
      cwd: ROOT,
      env: { KUBECONFIG: plane.kubeconfigPath, POD_NAME: id, BENCH_RUNLOG: runlog },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const file = await Deno.open(output, { write: true, create: true, append: true });
    const copies = Promise.all([
      child.stdout.pipeTo(file.writable, { preventClose: true }),
      child.stderr.pipeTo(new WritableStream({ write: (chunk) => void file.writeSync(chunk) })),
    ]).finally(() => file.close());
    return { id, child, runlog, output, copies };
  };
  const says = (c: Contender, pattern: RegExp) => pattern.test(readText(c.output));
  const handledBy = (name: string, live: readonly Contender[]) =>
    live.filter((c) => readText(c.runlog).split("\n").some((l) => l.startsWith(`create ${name} `)))
      .map((c) => c.id);
  const live = [await spawn(), await spawn()];
  const all = [...live];
  await until(() => live.some((c) => says(c, /Leading:/)), 120_000, "a leader");
  await api.create(namespace, "warm-up");
  await waitHandled(namespace, 1, 120_000);
  const observer = new Observer(api, namespace);
  await observer.start();
  const trials: Array<{ signal: string; seconds: number; handledBy: string[]; leader: string }> =
    [];
  try {
    for (const [i, signal] of plan.entries()) {
      if (live.length < 2) {
        const fresh = await spawn();
        live.push(fresh);
        all.push(fresh);
      }
      const standing = (c: Contender) => says(c, /Standing by/) && !says(c, /Leading:/);
      await until(() => live.some(standing), 120_000, "a standby");
      await until(() => live.some((c) => says(c, /Leading:/)), 120_000, "a leader");
      const leader = live.find((c) => says(c, /Leading:/))!;
      // A random phase against the standby's attempts (its first came just now).
      await sleep(2_000 + Math.random() * 2_000);
      const name = `${signal.toLowerCase()}-${i}`;
      const sentAt = Date.now();
      leader.child.kill(signal);
      await api.create(namespace, name);
      await observer.waitUntil(() => observer.countHandled([name]) === 1, 120_000);
      const seconds = (observer.seen.get(name)!.handledAt! - sentAt) / 1000;
      await leader.child.status;
      live.splice(live.indexOf(leader), 1);
      trials.push({ signal, seconds, handledBy: handledBy(name, all), leader: leader.id });
      log(`leader election: ${JSON.stringify(trials.at(-1))}`);
    }
  } finally {
    await observer.stop();
    for (const c of all) {
      try {
        c.child.kill("SIGTERM");
      } catch {
        // already gone
      }
      await c.child.status;
      await c.copies.catch(() => {});
    }
  }
  return trials;
}

const leaderRows: string[] = [];
let leader: Awaited<ReturnType<typeof leaderElection>> | undefined;
if (!values["no-leader"]) {
  leader = await leaderElection([
    ...Array<Deno.Signal>(5).fill("SIGTERM"),
    ...Array<Deno.Signal>(2).fill("SIGKILL"),
  ]);
  leaderRows.push(
    "",
    "Leader election (two replicas of `kopf run --leader-elect`, default Lease timings 15 s / " +
      "10 s / 2 s, a fresh standby for each trial): from the signal to the leader until an " +
      "object created right after it was handled.",
    "",
    "| signal to the leader | handled after, s | handled by |",
    "| --- | ---: | --- |",
    ...leader.map((t) =>
      `| ${t.signal} (leader ${t.leader}) | ${t.seconds.toFixed(1)} | ${
        t.handledBy.join(", ") || "?"
      } |`
    ),
  );
}
await Deno.remove(dir, { recursive: true }).catch(() => {});
await Deno.remove(auditDir, { recursive: true }).catch(() => {});

const stamp = new Date().toISOString().replace(/:/g, "-").replace(/\.\d+/, "");
await Deno.writeTextFile(
  `${ROOT}/bench/results/${stamp}-scale-out.json`,
  JSON.stringify({ count, shards, lease, gateOn, results, leader }, null, 2) + "\n",
);
console.log(
  [
    `Scale-out: ${count} objects, ${shards} shards, lease ${lease} s, ShardedListAndWatch ${
      gateOn ? "on" : "off"
    }; one run on this machine (the control plane and all replicas share its cores).`,
    "",
    "| replicas | replica | create handlers run (incl. a warm-up object) | of them repeated | membership: renewals failed / lapses / shards taken | watch events received from the server | of them kept (after the client-side filter) | CPU, s | peak RSS, MiB | all handled, s | after SIGKILL of one: N/10 more handled, s | takeover: SIGKILL → first / last object of the victim's shards handled, s (objects) | writes to the objects, all replicas (audit log) | Lease writes, all replicas |",
    "| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ...rows,
    ...leaderRows,
  ].join("\n"),
);
