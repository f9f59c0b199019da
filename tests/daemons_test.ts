/**
 * Daemons and timers on the real control plane: spawning per object, live bodies, stopping on
 * deletion (holding the finalizer until exit), abandonment after the cancellation timeout,
 * exit on operator shutdown, timers on interval, results in status.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import { on } from "../core/api/on.ts";
import { daemon, type DaemonOptions, timer } from "../core/api/spawning.ts";
import type { SpawnedContext } from "../core/engines/runners/daemons.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { DaemonStoppingReason } from "../mod.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
Deno.test(
  "a daemon runs per object with a live body and stops on deletion, holding the finalizer (HK-DMN-01, 13, 14)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon");
    const seen: unknown[] = [];
    let exits = 0;
    await using op = await startOperator((registry) => {
      daemon("kopfexamples", { registry }, async function watcher({ stopped, sleep, spec, body }) {
        while (!stopped.aborted) {
          seen.push((body.spec as { v?: number }).v ?? spec.v);
          await sleep(0.1);
        }
        await sleep(0); // already stopped: returns at once
        exits++;
        assert.equal(stopped.reason, "resource-deleted");
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("d1", { v: 1 }), { namespace });
    await eventually(() => seen.includes(1), 15_000, "the daemon to run");
    const withFinalizer = await client.api.get(KOPFEXAMPLES, "d1", { namespace });
    assert.deepEqual(withFinalizer.metadata?.finalizers, [FINALIZER]);
    await client.api.patch(KOPFEXAMPLES, "d1", { spec: { v: 2 } }, { namespace });
    await eventually(() => seen.includes(2), 15_000, "the daemon to see the new spec (live body)");
    await client.api.delete(KOPFEXAMPLES, "d1", { namespace });
    await eventually(
      async () => {
        try {
          await client.api.get(KOPFEXAMPLES, "d1", { namespace });
          return false;
        } catch {
          return true;
        }
      },
      15_000,
      "the object to be gone once the daemon exited",
    );
    assert.equal(exits, 1);
  },
);

Deno.test(
  "a daemon that returns is not restarted; a hung one is abandoned after cancellationTimeout (HK-DMN-05, 11)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon2");
    let once = 0;
    let hungStarted = 0;
    await using op = await startOperator((registry) => {
      daemon("kopfexamples", { registry }, function short() {
        once++;
        return { done: true };
      });
      daemon("kopfexamples", { registry, cancellationTimeout: 0.5 }, async function hung() {
        hungStarted++;
        await new Promise(() => {}); // ignores every signal
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("d2"), { namespace });
    const done = await eventually(
      async () => {
        const obj = await client.api.get(KOPFEXAMPLES, "d2", { namespace });
        return (obj.status as { short?: unknown } | undefined)?.short ? obj : undefined;
      },
      15_000,
      "the short daemon's result in status",
    );
    assert.deepEqual((done.status as { short?: unknown }).short, { done: true });
    await client.api.patch(KOPFEXAMPLES, "d2", { spec: { x: 1 } }, { namespace });
    await sleep(500);
    assert.equal(once, 1, "not restarted after returning");
    assert.equal(hungStarted, 1);
    await client.api.delete(KOPFEXAMPLES, "d2", { namespace });
    await eventually(
      async () => {
        try {
          await client.api.get(KOPFEXAMPLES, "d2", { namespace });
          return false;
        } catch {
          return true;
        }
      },
      15_000,
      "the object released after abandoning the hung daemon",
    );
    await op.waitForLog(/did not exit in time.*abandoning/);
  },
);

Deno.test(
  "timers fire on interval and deliver results; shutdown stops them (HK-TMR-01, 09)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("timer");
    let ticks = 0;
    const op = await startOperator((registry) => {
      timer("kopfexamples", { registry, interval: 0.3 }, function tick() {
        ticks++;
        return ticks;
      });
    }, { namespaces: [namespace], settings: createSettings({ posting: { enabled: false } }) });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("t1"), { namespace });
    await eventually(() => ticks >= 3, 15_000, "three ticks");
    const obj = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "t1", { namespace });
        return ((o.status as { tick?: number } | undefined)?.tick ?? 0) >= 2 ? o : undefined;
      },
      15_000,
      "a result in status",
    );
    assert.ok(obj);
    await op.stop();
    const after = ticks;
    await sleep(800);
    assert.equal(ticks, after, "no timer outlives the operator");
  },
);

Deno.test(
  "bookkeeping is released for created-and-deleted objects with daemons and timers (HK-DMN-*, SUB-50)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon-mem");
    await using op = await startOperator((registry) => {
      daemon("kopfexamples", { registry, cancellationTimeout: 1 }, async function d({ sleep }) {
        while (!(await sleep(0.05)));
      });
      timer("kopfexamples", { registry, interval: 0.1 }, function t() {});
    }, {
      namespaces: [namespace],
      settings: createSettings({ posting: { enabled: false }, queueing: { idleTimeout: 0.5 } }),
    });
    await op.ready;
    const names = Array.from({ length: 30 }, (_, i) => `m${i}`);
    await Promise.all(
      names.map((name) => client.api.create(KOPFEXAMPLES, kex(name), { namespace })),
    );
    await eventually(() => op.stats().tasks === 60, 20_000, "60 tasks running");
    assert.equal(op.stats().objects, 30);
    await Promise.all(names.map((name) => client.api.delete(KOPFEXAMPLES, name, { namespace })));
    await eventually(
      async () => (await client.api.list(KOPFEXAMPLES, { namespace })).items.length === 0,
      30_000,
      "all gone",
    );
    await eventually(
      () => op.stats().objects === 0 && op.stats().tasks === 0,
      15_000,
      `no bookkeeping left: ${JSON.stringify(op.stats())}`,
    );
    await eventually(() => op.stats().workers === 0, 5_000, "workers idle-exited");
  },
);

Deno.test(
  "a stopping daemon collects DaemonStoppingReason flags: signalled, cancelled, abandoned, done (HK-DMN-20)",
  opts,
  async () => {
    assert.deepEqual(Object.keys(DaemonStoppingReason), [
      "DONE",
      "FILTERS_MISMATCH",
      "RESOURCE_DELETED",
      "OPERATOR_PAUSING",
      "OPERATOR_EXITING",
      "DAEMON_SIGNALLED",
      "DAEMON_CANCELLED",
      "DAEMON_ABANDONED",
    ]);
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon-reasons");
    const reasons: Record<string, ReadonlySet<DaemonStoppingReason>> = {};
    await using op = await startOperator((registry) => {
      // Exits as soon as it is told to stop.
      daemon("kopfexamples", { registry }, async function polite({ stopped, stoppingReasons }) {
        reasons.polite = stoppingReasons;
        await new Promise((resolve) => stopped.addEventListener("abort", resolve));
      });
      // Ignores `stopped`; exits only when cancelled after the backoff.
      daemon(
        "kopfexamples",
        { registry, cancellationBackoff: 0.3, cancellationTimeout: 10 },
        async function stubborn({ signal, stoppingReasons }) {
          reasons.stubborn = stoppingReasons;
          await new Promise((resolve) => signal.addEventListener("abort", resolve));
        },
      );
      // Ignores everything: abandoned.
      daemon(
        "kopfexamples",
        { registry, cancellationTimeout: 0.3 },
        async function hung({ stoppingReasons }) {
          reasons.hung = stoppingReasons;
          await new Promise(() => {});
        },
      );
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("r1"), { namespace });
    await eventually(() => Object.keys(reasons).length === 3, 15_000, "all daemons to run");
    for (const set of Object.values(reasons)) assert.equal(set.size, 0, "no reasons while running");
    await client.api.delete(KOPFEXAMPLES, "r1", { namespace });
    await op.waitForLog(/'hung' did not exit in time/);
    await eventually(() => reasons.stubborn!.has("done"), 15_000, "the stubborn daemon to exit");
    assert.deepEqual([...reasons.polite!], ["resource-deleted", "done"]);
    assert.deepEqual([...reasons.stubborn!], [
      DaemonStoppingReason.RESOURCE_DELETED,
      DaemonStoppingReason.DAEMON_SIGNALLED,
      DaemonStoppingReason.DAEMON_CANCELLED,
      DaemonStoppingReason.DONE,
    ]);
    assert.deepEqual([...reasons.hung!], [
      "resource-deleted",
      "daemon-cancelled",
      "daemon-abandoned",
    ]);
  },
);

Deno.test(
  "at operator exit, daemons collect operator-exiting, then cancelled and done, or abandoned (HK-DMN-20)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon-exit-reasons");
    const reasons: Record<string, ReadonlySet<DaemonStoppingReason>> = {};
    const op = await startOperator((registry) => {
      daemon("kopfexamples", { registry }, async function polite({ stopped, stoppingReasons }) {
        reasons.polite = stoppingReasons;
        await new Promise((resolve) => stopped.addEventListener("abort", resolve));
      });
      daemon("kopfexamples", { registry }, async function stubborn({ signal, stoppingReasons }) {
        reasons.stubborn = stoppingReasons;
        await new Promise((resolve) => signal.addEventListener("abort", resolve));
      });
      daemon("kopfexamples", { registry }, async function hung({ stoppingReasons }) {
        reasons.hung = stoppingReasons;
        await new Promise(() => {});
      });
    }, {
      namespaces: [namespace],
      settings: createSettings({ posting: { enabled: false }, process: { gracePeriod: 0.5 } }),
    });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("x1"), { namespace });
    await eventually(() => Object.keys(reasons).length === 3, 15_000, "all daemons to run");
    await op.stop();
    // The hung one is abandoned when the grace period is over (the stop may return first).
    await eventually(() => reasons.hung!.has("daemon-abandoned"), 10_000, "the hung daemon");
    const seen = (name: string) => [...reasons[name]!];
    // At exit every daemon is stopped and cancelled at once (no backoff to wait through).
    assert.deepEqual(seen("polite"), ["operator-exiting", "daemon-cancelled", "done"]);
    assert.deepEqual(seen("stubborn"), ["operator-exiting", "daemon-cancelled", "done"]);
    assert.deepEqual(seen("hung"), ["operator-exiting", "daemon-cancelled", "daemon-abandoned"]);
  },
);

Deno.test(
  "daemons: initialDelay, restarts after TemporaryError delays (none: at once), retries and timeout limits, PermanentError, filters, one instance at a time, the order with changing handlers (HK-DMN-10, 12, 16, 17, 18, 21; OPT-15)",
  opts,
  async (t) => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("daemon-cases");
    /** Per case: the starts (ms), retries and stop reasons of its runs, and how many at once. */
    const cases = new Map<
      string,
      { starts: number[]; retries: number[]; exits: number[]; reasons: unknown[]; most: number }
    >();
    const of = (name: string) => {
      if (!cases.has(name)) {
        cases.set(name, { starts: [], retries: [], exits: [], reasons: [], most: 0 });
      }
      return cases.get(name)!;
    };
    let running = 0;
    /** A daemon serving the objects labelled `<name>: "y"`, recording its runs. */
    const watched = (
      registry: OperatorRegistry,
      name: string,
      options: DaemonOptions,
      body: (ctx: SpawnedContext) => unknown,
    ) =>
      daemon("kopfexamples", { ...options, registry, id: name, labels: { [name]: "y" } }, async (
        ctx,
      ) => {
        const c = of(name);
        c.starts.push(Date.now());
        c.retries.push(ctx.retry);
        if (name === "filtered") c.most = Math.max(c.most, ++running);
        try {
          return await body(ctx);
        } finally {
          if (name === "filtered") running--;
          c.exits.push(Date.now());
          c.reasons.push(ctx.stopped.reason);
        }
      });
    const untilStopped = ({ stopped }: SpawnedContext) =>
      new Promise((resolve) => stopped.addEventListener("abort", resolve, { once: true }));
    const guard = {
      stopped: undefined as AbortSignal | undefined,
      createdSawDaemon: false,
      deleteSawStopped: false,
      deleteSawExited: true,
    };
    let stopping = 0;
    await using op = await startOperator((registry) => {
      watched(registry, "late", { initialDelay: 1 }, untilStopped);
      watched(registry, "instant", {}, async (ctx) => {
        if (ctx.retry === 0) throw new TemporaryError("at once", { delay: null });
        if (ctx.retry === 1) throw new TemporaryError("soon", { delay: 0.5 });
        await untilStopped(ctx);
      });
      watched(registry, "failing", { retries: 2, backoff: 0.2 }, () => {
        throw new Error("boom");
      });
      watched(registry, "permanent", {}, () => {
        throw new PermanentError("never again");
      });
      watched(registry, "timed", { timeout: 0.6 }, () => {
        throw new TemporaryError("not yet", { delay: 0.25 });
      });
      // Ignores `stopped` for 0.8 s: it is still exiting when it matches again.
      watched(registry, "filtered", { cancellationPolling: 0.2 }, async (ctx) => {
        await untilStopped(ctx);
        stopping++;
        await sleep(800);
      });
      watched(registry, "guard", {}, async (ctx) => {
        guard.stopped = ctx.stopped;
        await untilStopped(ctx);
        await sleep(800);
      });
      on.create("kopfexamples", { registry, labels: { guard: "y" } }, function hello() {
        guard.createdSawDaemon = of("guard").starts.length === 1;
      });
      on.delete("kopfexamples", { registry, labels: { guard: "y" } }, function farewell() {
        const c = of("guard");
        guard.deleteSawStopped = guard.stopped?.aborted === true;
        guard.deleteSawExited = c.exits.length > 0;
      });
    }, { namespaces: [namespace], settings: createSettings({ posting: { enabled: false } }) });
    await op.ready;

    const created = new Map<string, number>();
    for (const name of ["late", "instant", "failing", "permanent", "timed", "filtered", "guard"]) {
      created.set(name, Date.now());
      await client.api.create(KOPFEXAMPLES, kex(name, { v: 1 }, { [name]: "y" }), { namespace });
    }
    // Deleted during its initial delay: the daemon never runs, the deletion is not held up.
    await client.api.create(KOPFEXAMPLES, kex("late2", {}, { late: "y" }), { namespace });
    await client.api.delete(KOPFEXAMPLES, "late2", { namespace });
    const change = (name: string) =>
      client.api.patch(KOPFEXAMPLES, name, { spec: { v: 2 } }, { namespace });
    const gone = (name: string) =>
      eventually(
        async () => {
          try {
            await client.api.get(KOPFEXAMPLES, name, { namespace });
            return false;
          } catch {
            return true;
          }
        },
        15_000,
        `${name} to be gone`,
      );

    await t.step("initialDelay postpones the daemon (HK-DMN-10, OPT-15)", async () => {
      await eventually(() => of("late").starts.length === 1, 15_000);
      const after = of("late").starts[0]! - created.get("late")!;
      assert.ok(after >= 1_000 - 20, `started ${after} ms after creation`);
      await gone("late2");
      assert.equal(of("late").starts.length, 1, "not for the object deleted while waiting");
    });

    await t.step("TemporaryError restarts after its delay; none: at once (HK-DMN-12)", async () => {
      await eventually(() => of("instant").starts.length === 3, 15_000);
      // delay=null restarts at once: three starts within the 15 s wait above could not have
      // waited the 60 s default delay. How soon is a timing figure, not asserted here.
      const [, s1, s2] = of("instant").starts as [number, number, number];
      assert.ok(s2 - s1 >= 500 - 20, `delay=0.5: restarted after ${s2 - s1} ms`);
      assert.deepEqual(of("instant").retries, [0, 1, 2]);
    });

    await t.step(
      "retries, timeout and PermanentError end a daemon for good (HK-DMN-16)",
      async () => {
        // Kopf 1.45's look-ahead: the last allowed attempt's failure ends the daemon at once.
        await op.waitForLog(/Handler 'failing' .*would exceed 2 retries on the next attempt/);
        await op.waitForLog(/Handler 'timed' (has timed out|.*will time out after 0\.6 seconds)/);
        await op.waitForLog(/Handler 'permanent' failed permanently: never again/);
        const counts = () => ["failing", "timed", "permanent"].map((n) => of(n).starts.length);
        const before = counts();
        assert.equal(before[0], 2, "retries=2: two attempts");
        assert.equal(before[2], 1, "a permanent error: one attempt");
        await Promise.all(["failing", "timed", "permanent"].map(change));
        await sleep(1_000);
        assert.deepEqual(counts(), before, "not restarted, not even by a change");
      },
    );

    await t.step(
      "filters stop a daemon and start it again; a stopping one still counts (HK-DMN-17, 18)",
      async () => {
        const label = (value: string | null) =>
          client.api.patch(KOPFEXAMPLES, "filtered", {
            metadata: { labels: { filtered: value } },
          }, { namespace });
        await eventually(() => of("filtered").starts.length === 1, 15_000);
        await label(null);
        await eventually(() => stopping === 1, 15_000, "the first one to be stopping");
        await label("y"); // matches again while the first one is still exiting
        await eventually(() => of("filtered").exits.length === 1, 15_000, "the first exit");
        assert.deepEqual(of("filtered").reasons, ["filters-mismatch"]);
        await change("filtered");
        await eventually(() => of("filtered").starts.length === 2, 15_000, "a new instance");
        assert.ok(of("filtered").starts[1]! >= of("filtered").exits[0]!, "after the exit");
        assert.equal(of("filtered").most, 1, "never two at once");
      },
    );

    await t.step(
      "daemons start before the changing handlers; on deletion they are stopped first and awaited (HK-DMN-21)",
      async () => {
        await eventually(() => guard.createdSawDaemon, 15_000, "the create handler");
        await client.api.delete(KOPFEXAMPLES, "guard", { namespace });
        await gone("guard");
        const c = of("guard");
        assert.deepEqual(c.reasons, ["resource-deleted"]);
        assert.equal(guard.deleteSawStopped, true, "the stop was requested before");
        assert.equal(guard.deleteSawExited, false, "the delete handler ran while it exited");
      },
    );
  },
);
