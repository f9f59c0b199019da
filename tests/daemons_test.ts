/**
 * Daemons and timers on the real control plane: spawning per object, live bodies, stopping on
 * deletion (holding the finalizer until exit), abandonment after the cancellation timeout,
 * exit on operator shutdown, timers on interval, results in status.
 */

import assert from "node:assert/strict";
import { daemon, timer } from "../core/api/spawning.ts";
import { createSettings } from "../core/settings/settings.ts";
import { DaemonStoppingReason } from "../mod.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const FINALIZER = "kopf.zalando.org/KopfFinalizerMarker";

function kex(name: string, spec: Record<string, unknown> = {}) {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec };
}

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
