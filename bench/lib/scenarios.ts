/**
 * The scenarios of one contender on one CRD variant, in order (`--scenarios` picks groups): startup, create, steady,
 * updates, fill, idle, restart (namespace A); create with a delete handler and delete
 * (namespace B); a backlog created before the operator starts (namespace C).
 * See docs/performance.md for what each measures.
 * @module
 */
import { createTestNamespace } from "../../testing/control_plane.ts";
import { log, names, type Operator, readRuns, sleep } from "./contenders.ts";
import { Observer, pool } from "./kube.ts";
import { memoryMiB } from "./procs.ts";
import type { ScenarioGroup } from "./config.ts";
import type { ContenderSession, Outcome } from "./session.ts";
import { latencySummary } from "./stats.ts";

/** Runs every scenario of the session's contender; results land in `session.phases`. */
export async function runScenarios(session: ContenderSession): Promise<void> {
  const self = session;
  const { config } = self.ctx;
  const timeoutFor = (count: number) => 60_000 + count * 200;
  const runs = (group: ScenarioGroup) => !self.ctx.groups || self.ctx.groups.has(group);
  if (runs("main")) await mainGroup(self, timeoutFor);
  if (runs("finalizers")) await finalizersGroup(self, timeoutFor);
  if (runs("backlog") && config.backlogCount > 0) await backlogGroup(self, timeoutFor);
}

type TimeoutFor = (count: number) => number;

/** Namespace A: startup, create, steady load, updates, fill, idle, restart. */
async function mainGroup(self: ContenderSession, timeoutFor: TimeoutFor): Promise<void> {
  const { config, api, plane, contender, variant } = self.ctx;

  const ns = await createTestNamespace(plane, `bench-${contender.id}-${variant.id}`);
  const observer = new Observer(api, ns);
  await observer.start();
  const createNames = names("create", config.createCount);
  const steadyCount = Math.round(config.steadyRate * config.steadySeconds);
  const steadyNames = names("steady", steadyCount);
  const fastNames = names("fast", Math.round(config.steadyFastRate * config.steadySeconds));
  const fillNames = names(
    "fill",
    Math.max(0, config.idleCount - createNames.length - steadyCount - fastNames.length),
  );
  try {
    const op = self.spawn(ns, "a", false);
    await self.phase("startup", async () => {
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

    await self.phase(
      "create",
      () => self.createAndWait(observer, ns, createNames, timeoutFor(createNames.length)),
    );

    await self.phase(
      "steady",
      () => steadyLoad(self, observer, ns, steadyNames, config.steadyRate),
    );
    if (fastNames.length) {
      await self.phase(
        "steady-fast",
        () => steadyLoad(self, observer, ns, fastNames, config.steadyFastRate),
      );
    }

    await self.phase("updates", async () => {
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
        samples: { latency: latencies.map(Math.round) },
      };
    });

    if (fillNames.length) {
      await self.phase(
        "fill",
        () => self.createAndWait(observer, ns, fillNames, timeoutFor(fillNames.length)),
      );
    }

    await self.phase("idle", async () => {
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
    self.phases["idle"]!.metrics["stopS"] = stopMs / 1000;

    // Restart over the handled objects: time until a new object is served, writes made.
    const existing = observer.seen.size;
    let restarted: Operator | undefined;
    await self.phase("restart", async () => {
      restarted = self.spawn(ns, "b", false);
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
    const restart = self.phases["restart"]!;
    const oldRuns = readRuns(self.runlog).filter((r) => r.name !== "sentinel-restart");
    restart.metrics["runs.old"] = oldRuns.length;
    const firstWatch = self.ctx.audit.select(
      contender.userAgent,
      restart.startedAt,
      restart.windowEnd,
      (r) => r.verb === "watch" && r.resource === variant.resource.plural,
    )[0];
    if (firstWatch && restarted) {
      restart.metrics["watchS"] = (firstWatch.t - restarted.spawnedAt) / 1000;
    }
    await restarted?.stop();
  } finally {
    await self.operator?.stop();
    await observer.stop();
  }
  log(`${contender.id}: clearing ${ns}`);
  await api.clear(ns);
}

/** Namespace B: with a delete handler (finalizers): create, then delete. */
async function finalizersGroup(self: ContenderSession, timeoutFor: TimeoutFor): Promise<void> {
  const { config, api, plane, contender, variant } = self.ctx;
  const nsDel = await createTestNamespace(plane, `bench-${contender.id}-${variant.id}-del`);
  const observerDel = new Observer(api, nsDel);
  await observerDel.start();
  const delNames = names("del", config.deleteCount);
  try {
    self.spawn(nsDel, "c", true);
    await self.phase(
      "create-finalizers",
      () => self.createAndWait(observerDel, nsDel, delNames, timeoutFor(delNames.length) + 60_000),
    );
    await self.phase("delete", async () => {
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
    await self.operator?.stop();
    await observerDel.stop();
  }
  await api.clear(nsDel);
}

/** Namespace C: a backlog created before the operator starts: its throughput alone. */
async function backlogGroup(self: ContenderSession, timeoutFor: TimeoutFor): Promise<void> {
  const { config, api, plane, contender, variant } = self.ctx;
  {
    const nsBacklog = await createTestNamespace(
      plane,
      `bench-${contender.id}-${variant.id}-backlog`,
    );
    const observerBacklog = new Observer(api, nsBacklog);
    await observerBacklog.start();
    const backlogNames = names("backlog", config.backlogCount);
    try {
      log(`${contender.id}: creating a backlog of ${backlogNames.length} objects`);
      await self.createBulk(nsBacklog, backlogNames);
      await self.phase("backlog", async () => {
        const op = self.spawn(nsBacklog, "d", false);
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
      await self.operator?.stop();
      await observerBacklog.stop();
    }
    await api.clear(nsBacklog);
  }
}

/**
 * Creates the objects at a fixed rate (at most 64 creations in flight), then waits until all are
 * handled: the creation → handler start latencies (the steady scenarios).
 */
async function steadyLoad(
  self: ContenderSession,
  observer: Observer,
  ns: string,
  objects: readonly string[],
  rate: number,
): Promise<Outcome> {
  const { api } = self.ctx;
  const sent = new Map<string, number>();
  const inflight = new Set<Promise<void>>();
  const t0 = Date.now();
  for (let i = 0; i < objects.length; i++) {
    const name = objects[i]!;
    const due = t0 + (i * 1000) / rate;
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
    () => observer.countHandled(objects) === objects.length,
    60_000,
  );
  const latencies = objects.flatMap((n) => {
    const started = observer.get(n).createStarted, at = sent.get(n);
    return started !== undefined && at !== undefined ? [started - at] : [];
  });
  const observed = objects.flatMap((n) => {
    const handled = observer.get(n).handledAt, at = sent.get(n);
    return handled !== undefined && at !== undefined ? [handled - at] : [];
  });
  const handled = objects.map((n) => observer.get(n).handledAt ?? 0);
  const lat = latencySummary(latencies), obs = latencySummary(observed);
  return {
    completedAt: Math.max(...handled, createdAt),
    complete,
    metrics: {
      objects: objects.length,
      handled: observer.countHandled(objects),
      rate: objects.length / ((createdAt - t0) / 1000),
      "latency.p50": lat["p50"]!,
      "latency.p95": lat["p95"]!,
      "latency.p99": lat["p99"]!,
      "latency.max": lat["max"]!,
      "observed.p50": obs["p50"]!,
      "observed.p99": obs["p99"]!,
    },
    samples: { latency: latencies.map(Math.round) },
  };
}
