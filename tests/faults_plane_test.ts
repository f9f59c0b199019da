/**
 * Faults of a real cluster, on a control plane of this file's own (its kube-apiserver is frozen,
 * killed and restarted, its etcd compacted): kube-apiserver frozen (SIGSTOP) past the watch
 * inactivity timeout; kube-apiserver killed and restarted during a burst; etcd compacted while
 * the operator is stopped and while it watches (410 Gone); the operator SIGKILLed in a slow
 * handler and restarted; SIGTERM with daemons and timers running. Each test asserts that no
 * change is lost and no completed handler runs again, and records its figures
 * (tests/_faults.ts, docs/reliability.md).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { ApiError } from "../core/client/errors.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import { Logger } from "../core/actions/loggers.ts";
import { httpOptions } from "../core/reactor/lifetime/running.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { type InProcessOperator, spawnOperator, startOperator } from "./_operator.ts";
import { recordFault, RunLog } from "./_faults.ts";
import { applyCrds, CONFIGMAPS, eventually, KOPFEXAMPLES, sleep } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

let planePromise: Promise<ControlPlane> | undefined;
/** The file's own control plane (no kube-controller-manager): faults here hurt no other test. */
function plane(): Promise<ControlPlane> {
  // Without the watch cache, watches are served by etcd: a watch resumed from a compacted
  // version gets 410 Gone at once (a watch cache would serve it from its own history).
  return planePromise ??= ControlPlane.start({ controllerManager: false, watchCache: false }).then(
    async (p) => {
      const client = new KubeClient(await loadKubeconfig({ paths: [p.kubeconfigPath] }));
      try {
        await applyCrds(client, "crds/example.yaml");
      } finally {
        client[Symbol.dispose]();
      }
      return p;
    },
  );
}

async function connect(p: ControlPlane): Promise<KubeClient> {
  return new KubeClient(await loadKubeconfig({ paths: [p.kubeconfigPath] }));
}

function kex(name: string, value: number, labels?: Record<string, string>): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: labels ? { name, labels } : { name },
    spec: { value },
  };
}

/**
 * Retries a harness request until the API server answers (it may be down on purpose). A retried
 * creation may find its object made by an attempt whose answer was lost: 409 counts as done.
 */
async function persist<T>(request: () => Promise<T>, timeoutMs = 60_000): Promise<T | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0;; attempt++) {
    try {
      return await request();
    } catch (error) {
      if (attempt > 0 && error instanceof ApiError && error.code === 409) return undefined;
      if (Date.now() > deadline) throw error;
      await sleep(200);
    }
  }
}

/**
 * An in-process operator recording create and update runs (value of `spec.value`). Its client
 * retries as `kopf run`'s does (`settings.networking.errorBackoffs`, about a minute in all), not
 * with a bare client's few seconds: a kube-apiserver restart outlasts those.
 */
async function recorded(
  log: RunLog,
  p: ControlPlane,
  namespace: string,
  watching: Record<string, number> = {},
  metricsEngine?: MetricsEngine,
): Promise<InProcessOperator> {
  const settings = createSettings({ posting: { enabled: false } });
  Object.assign(settings.watching, watching);
  const client = new KubeClient(
    await loadKubeconfig({ paths: [p.kubeconfigPath] }),
    httpOptions(settings, new Logger(["kopf", "traffic"])),
  );
  return await startOperator((registry) => {
    on.create("kopfexamples", { registry }, function create({ name, spec }) {
      log.add("create", name, (spec as { value?: number }).value);
    });
    on.update("kopfexamples", { registry }, function update({ name, spec }) {
      log.add("update", name, (spec as { value?: number }).value);
    });
  }, {
    namespaces: [namespace],
    client,
    settings,
    ...(metricsEngine ? { metricsEngine } : {}),
  });
}

/** Whether every object's last value was handled (by create or update). */
function allHandled(log: RunLog, values: Map<string, number>): boolean {
  return [...values].every(([name, value]) =>
    [...log.of("create", name), ...log.of("update", name)].some((r) => r.value === value)
  );
}

/** `kopf_watch_connections_total` of one reason, from an in-process metrics engine. */
async function connections(engine: MetricsEngine, reason: string): Promise<number> {
  const { text } = await engine.exposition();
  return text.split("\n")
    .filter((l) =>
      l.startsWith("kopf_watch_connections_total{") && l.includes(`reason="${reason}"`)
    )
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

Deno.test(
  "fault: kube-apiserver frozen (SIGSTOP) past the watch inactivity timeout, objects created and changed during and after — the stalled watch is replaced, nothing lost, nothing repeated (X-REL-01)",
  opts,
  async () => {
    const p = await plane();
    using client = await connect(p);
    const namespace = await createTestNamespace(p, "freeze");
    const log = new RunLog();
    const engine = new MetricsEngine({ process: false });
    const op = await recorded(log, p, namespace, { inactivityTimeout: 3 }, engine);
    const values = new Map<string, number>();
    try {
      await op.ready;
      for (let i = 0; i < 5; i++) {
        await client.api.create(KOPFEXAMPLES, kex(`f-${i}`, 1), { namespace });
        values.set(`f-${i}`, 1);
      }
      await eventually(() => allHandled(log, values), 30_000, "the first objects");
      p.signal("kube-apiserver", "SIGSTOP");
      let resumedAt = 0;
      try {
        // Requests sent during the freeze wait for the server; they land after it.
        const during = [
          ...Array.from({ length: 5 }, (_, i) => {
            values.set(`g-${i}`, 1);
            return persist(() => client.api.create(KOPFEXAMPLES, kex(`g-${i}`, 1), { namespace }));
          }),
          ...Array.from({ length: 5 }, (_, i) => {
            values.set(`f-${i}`, 2);
            return persist(() =>
              client.api.patch(KOPFEXAMPLES, `f-${i}`, { spec: { value: 2 } }, { namespace })
            );
          }),
        ];
        await sleep(5_000); // past the 3-second inactivity timeout
        p.signal("kube-apiserver", "SIGCONT");
        resumedAt = Date.now();
        await Promise.all(during);
      } finally {
        p.signal("kube-apiserver", "SIGCONT");
      }
      for (let i = 0; i < 5; i++) {
        await client.api.create(KOPFEXAMPLES, kex(`h-${i}`, 1), { namespace });
        values.set(`h-${i}`, 1);
      }
      await eventually(() => allHandled(log, values), 90_000, "every change after the freeze");
      const recovery = (Date.now() - resumedAt) / 1000;
      await sleep(1_000);
      assert.equal(log.repeats(), 0, "no completed handler ran again");
      assert.ok(await connections(engine, "stall") >= 1, "the silent watch was detected");
      await recordFault({
        fault: "kube-apiserver frozen (SIGSTOP) 5 s, past a 3 s inactivity timeout",
        recoverySeconds: recovery,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: `stalled watches replaced: ${await connections(engine, "stall")}`,
      });
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "fault: kube-apiserver killed and restarted (same etcd) during a burst of creations and changes — nothing lost, nothing repeated (X-REL-02)",
  opts,
  async () => {
    const p = await plane();
    using client = await connect(p);
    const namespace = await createTestNamespace(p, "restart");
    const log = new RunLog();
    const op = await recorded(log, p, namespace);
    const values = new Map<string, number>();
    try {
      await op.ready;
      let restartedAt = 0;
      const burst = (async () => {
        for (let i = 0; i < 30; i++) {
          await persist(() => client.api.create(KOPFEXAMPLES, kex(`r-${i}`, 1), { namespace }));
          values.set(`r-${i}`, 1);
          if (i % 3 === 0 && i > 0) {
            const name = `r-${i - 1}`;
            await persist(() =>
              client.api.patch(KOPFEXAMPLES, name, { spec: { value: 2 } }, { namespace })
            );
            values.set(name, 2);
          }
          await sleep(100);
        }
      })();
      await sleep(1_000);
      await p.restartApiServer({ downtimeMs: 2_000 });
      restartedAt = Date.now();
      await burst;
      await eventually(() => allHandled(log, values), 90_000, "every change after the restart");
      const recovery = (Date.now() - restartedAt) / 1000;
      await sleep(1_000);
      assert.equal(
        log.repeats(),
        0,
        `no completed handler ran again: ${
          JSON.stringify(log.runs.map((r) => [r.handler, r.name, r.value, r.at - restartedAt]))
        }\n${op.logs.map((e) => `${e.level} ${e.object?.name ?? ""} ${e.message}`).join("\n")}`,
      );
      await recordFault({
        fault:
          "kube-apiserver killed (SIGKILL), 2 s down, restarted on the same etcd, during a burst",
        recoverySeconds: recovery,
        lostChanges: 0,
        repeatedRuns: 0,
      });
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "fault: etcd compacted while the operator is stopped, then while it watches (410 Gone on resume) — changes handled with the right diff, nothing repeated (X-REL-03)",
  opts,
  async () => {
    const p = await plane();
    using client = await connect(p);
    const namespace = await createTestNamespace(p, "compact");
    const log = new RunLog();
    const values = new Map<string, number>();
    let op = await recorded(log, p, namespace);
    try {
      await op.ready;
      for (let i = 0; i < 5; i++) {
        await client.api.create(KOPFEXAMPLES, kex(`c-${i}`, 1), { namespace });
        values.set(`c-${i}`, 1);
      }
      await eventually(() => allHandled(log, values), 30_000, "the first objects");
      await op.stop();

      // While stopped: changes and creations, then a compaction of all history.
      for (let i = 0; i < 3; i++) {
        await client.api.patch(KOPFEXAMPLES, `c-${i}`, { spec: { value: 2 } }, { namespace });
        values.set(`c-${i}`, 2);
        await client.api.create(KOPFEXAMPLES, kex(`d-${i}`, 1), { namespace });
        values.set(`d-${i}`, 1);
      }
      await p.compact();
      const restarted = Date.now();
      const engine = new MetricsEngine({ process: false });
      op = await recorded(log, p, namespace, { serverTimeout: 5 }, engine);
      await eventually(() => allHandled(log, values), 60_000, "the changes made while stopped");
      const recoveryStopped = (Date.now() - restarted) / 1000;

      // While watching: the version moves on elsewhere (writes the operator does not watch),
      // then history is compacted past everything the operator has seen; its watch ends within
      // the 5-second server timeout and is resumed from the last version seen, now compacted
      // away: 410 Gone, relist. (Without the writes elsewhere, the next version after the last
      // one seen would be the compaction's own and stay watchable.)
      const other = await createTestNamespace(p, "compact-other");
      for (let i = 0; i < 3; i++) {
        await client.api.create(CONFIGMAPS, { metadata: { name: `elsewhere-${i}` } }, {
          namespace: other,
        });
      }
      await p.compact();
      await eventually(async () => await connections(engine, "gone") >= 1, 60_000, "a 410 Gone");
      const gone = Date.now();
      await client.api.patch(KOPFEXAMPLES, "c-4", { spec: { value: 3 } }, { namespace });
      values.set("c-4", 3);
      await eventually(() => allHandled(log, values), 60_000, "the change after the relist");
      const recoveryWatching = (Date.now() - gone) / 1000;
      await sleep(1_000);
      assert.equal(
        log.repeats(),
        0,
        `no completed handler ran again: ${
          JSON.stringify(log.runs.map((r) => [r.handler, r.name, r.value, r.at - restarted]))
        }\n${op.logs.map((e) => `${e.level} ${e.object?.name ?? ""} ${e.message}`).join("\n")}`,
      );
      // The diffs were right: each update saw the value it was changed to, once.
      assert.deepEqual(log.of("update", "c-0").map((r) => r.value), [2]);
      assert.deepEqual(log.of("update", "c-4").map((r) => r.value), [3]);
      await recordFault({
        fault: "etcd compacted while the operator was stopped (3 changes, 3 creations meanwhile)",
        recoverySeconds: recoveryStopped,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: "from the restart until all handled",
      });
      await recordFault({
        fault: "etcd compacted while the operator watched (410 Gone on resume, relist)",
        recoverySeconds: recoveryWatching,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: `410s: ${await connections(engine, "gone")}`,
      });
    } finally {
      await op.stop();
    }
  },
);

/** Lines of the process tests' run log. */
async function runlog(path: string): Promise<string[]> {
  return (await Deno.readTextFile(path).catch(() => "")).split("\n").filter(Boolean);
}

Deno.test(
  "fault: the operator SIGKILLed in a slow handler and restarted — that handler runs exactly once more, completed ones never, a change made while down is handled with the right diff (X-REL-04)",
  opts,
  async () => {
    const p = await plane();
    using client = await connect(p);
    const namespace = await createTestNamespace(p, "sigkill");
    const path = await Deno.makeTempFile({ prefix: "kopf-faults-" });
    const env = { KUBECONFIG: p.kubeconfigPath, FAULT_RUNLOG: path };
    const args = ["tests/fixtures/fault_handlers.ts", "-n", namespace, "--standalone"];
    try {
      let op = await spawnOperator(args, env);
      await client.api.create(KOPFEXAMPLES, kex("fast-1", 1), { namespace });
      await eventually(async () => (await runlog(path)).includes("end create fast-1"), 30_000);
      await client.api.create(KOPFEXAMPLES, kex("slow-1", 1), { namespace });
      await eventually(
        async () => (await runlog(path)).some((l) => l.startsWith("start create slow-1")),
        30_000,
      );
      op.kill("SIGKILL");
      await op.exited;
      await client.api.patch(KOPFEXAMPLES, "fast-1", { spec: { value: 2 } }, { namespace });
      const restarted = Date.now();
      op = await spawnOperator(args, env);
      try {
        await eventually(
          async () => {
            const lines = await runlog(path);
            return lines.includes("end create slow-1") && lines.includes("end update fast-1 1->2");
          },
          60_000,
          "the interrupted handler and the change made while down",
        );
        const recovery = (Date.now() - restarted) / 1000;
        await sleep(1_000);
        const lines = await runlog(path);
        const count = (prefix: string) => lines.filter((l) => l.startsWith(prefix)).length;
        assert.equal(count("start create slow-1"), 2, "the interrupted handler: once more");
        assert.equal(count("end create slow-1"), 1);
        assert.equal(count("start create fast-1"), 1, "a completed handler: never again");
        assert.equal(count("end update fast-1"), 1, "the change: once, with its diff 1->2");
        await recordFault({
          fault: "operator SIGKILLed in a 4 s handler, a change made while down, restarted",
          recoverySeconds: recovery,
          lostChanges: 0,
          repeatedRuns: 0,
          notes: "the interrupted handler ran once more (at-least-once, as Kopf)",
        });
      } finally {
        await op.stop();
      }
    } finally {
      await Deno.remove(path).catch(() => {});
    }
  },
);

Deno.test(
  "fault: SIGTERM with daemons and timers running — exit 0 within the grace period, every daemon sees its stop, no finalizer of a deletion in flight stays for good (X-REL-05)",
  opts,
  async () => {
    const p = await plane();
    using client = await connect(p);
    const namespace = await createTestNamespace(p, "sigterm");
    const path = await Deno.makeTempFile({ prefix: "kopf-faults-" });
    const env = { KUBECONFIG: p.kubeconfigPath, FAULT_RUNLOG: path };
    try {
      const op = await spawnOperator(
        ["tests/fixtures/fault_handlers.ts", "-n", namespace, "--standalone"],
        env,
      );
      const names = ["d-1", "d-2", "d-3"];
      for (const name of names) {
        await client.api.create(KOPFEXAMPLES, kex(name, 1, { daemon: "y" }), { namespace });
      }
      await eventually(
        async () => {
          const lines = await runlog(path);
          return names.every((n) =>
            lines.includes(`start daemon ${n}`) && lines.includes(`tick timer ${n}`)
          );
        },
        30_000,
        "daemons and timers running",
      );
      await client.api.delete(KOPFEXAMPLES, "d-3", { namespace });
      const termAt = Date.now();
      op.kill("SIGTERM");
      const code = await op.exited;
      const exitSeconds = (Date.now() - termAt) / 1000;
      assert.equal(code, 0, "a clean exit");
      assert.ok(
        exitSeconds < 5 + 5,
        `exit within the grace period (5 s) and a margin: ${exitSeconds}`,
      );
      const lines = await runlog(path);
      for (const name of names) {
        assert.ok(
          lines.some((l) => l.startsWith(`stop daemon ${name}`)),
          `${name}'s daemon stopped`,
        );
      }
      // The deletion's cycle asked d-3's daemon to stop; its exit would wake the object for the
      // finalizer's release, but no new cycle starts once the operator stops (as in Kopf): the
      // finalizer stays until the next start, which releases it at once. Either way none stays.
      const stillThere = await client.api.get(KOPFEXAMPLES, "d-3", { namespace }).then(
        () => true,
        () => false,
      );
      if (stillThere) {
        const again = await spawnOperator(
          ["tests/fixtures/fault_handlers.ts", "-n", namespace, "--standalone"],
          env,
        );
        try {
          await eventually(
            () => client.api.get(KOPFEXAMPLES, "d-3", { namespace }).then(() => false, () => true),
            30_000,
            "the deleted object gone after the restart (its finalizer released)",
          );
        } finally {
          await again.stop();
        }
      }
      for (const name of ["d-1", "d-2"]) {
        const body = await client.api.get<KubeObject>(KOPFEXAMPLES, name, { namespace });
        assert.ok(!body.metadata?.deletionTimestamp, `${name} is not being deleted`);
      }
      await recordFault({
        fault: "SIGTERM with 3 daemons and 3 timers running and a deletion in flight",
        recoverySeconds: exitSeconds,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: `exit time; every daemon saw its stop; the deletion's finalizer released ${
          stillThere ? "by the next start" : "before the exit"
        }`,
      });
    } finally {
      await Deno.remove(path).catch(() => {});
    }
  },
);
