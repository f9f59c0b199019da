/**
 * End-to-end tests of the examples that work in the background, on the shared control plane:
 * daemons (14-daemons), timers (15-timers) and indices (16-indexing), as
 * tests/examples_operator_test.ts runs the others — the real CLI as a subprocess, kubectl's
 * actions, and what a user would look at: objects, their status, the liveness endpoint, and
 * the operator's log lines (with their timestamps, for timing).
 * With `DUMP_LINES=1`, each test prints the operator's whole output when it stops.
 */

import assert from "node:assert/strict";
import {
  createExampleObject,
  FINALIZER,
  fixture,
  getObject,
  isGone,
  linesWith,
  NAME,
  opts,
  PODS,
  ref,
  runExample,
  stopCleanly,
  waitFor,
} from "./_examples.ts";
import { eventually, KOPFEXAMPLES, sleep } from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";
import { createPod, escape, probe, timeOf, timesOf } from "./_example_operator.ts";

const SYNC_PING = "=> Ping from a sync daemon";
const ASYNC_PING = "=> Ping from an async daemon";

Deno.test(
  "14-daemons: retried, live spec, stopped on deletion after the cancellation backoff",
  opts,
  async () => {
    await using fx = await fixture("ex14");
    const { client, namespace } = fx;
    await using op = await runExample("14-daemons", namespace, {
      env: { DAEMON_PING_INTERVAL: "0.5" },
    });
    const lines = op.lines;
    await createExampleObject(client, namespace);
    const p = ref(namespace);

    // Both fail three times (1 s apart), then ping with the spec's field.
    await waitFor(op, new RegExp(`${escape(p)} ${SYNC_PING}: field="value", retry=3`));
    await waitFor(op, new RegExp(`${escape(p)} ${ASYNC_PING}: field="value"`));
    for (const id of ["background_sync", "background_async"]) {
      const failed = linesWith(
        lines,
        `${p} Handler '${id}' failed temporarily: Simulated failure.`,
      );
      assert.equal(failed.length, 3, lines.join("\n"));
      const gaps = failed.slice(1).map((l, i) => timeOf(l) - timeOf(failed[i]!));
      assert.ok(gaps.every((g) => g >= 900), `${id}: gaps ${gaps}`);
    }
    // The daemons hold the finalizer while they run.
    const running = await getObject(client, namespace);
    assert.deepEqual(running.metadata?.finalizers, [FINALIZER]);

    // A change of the spec shows in the next pings: `spec` is live.
    await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
    await waitFor(op, new RegExp(`${escape(p)} ${SYNC_PING}: field="changed", retry=3`));
    await waitFor(op, new RegExp(`${escape(p)} ${ASYNC_PING}: field="changed"`));

    // Deletion stops both: the sync one exits at once; the async one ignores `stopped`, and is
    // cancelled (its `signal` aborts) after the 1 s cancellation backoff. Then the object goes.
    const deleting = Date.now();
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "the object");
    const gone = Date.now();
    assert.ok(gone - deleting >= 900, `gone after ${gone - deleting} ms`);
    const syncPings = linesWith(lines, SYNC_PING).length;
    const asyncPings = linesWith(lines, ASYNC_PING).length;
    await sleep(1_500);
    assert.equal(linesWith(lines, SYNC_PING).length, syncPings, "no sync pings after deletion");
    assert.equal(linesWith(lines, ASYNC_PING).length, asyncPings, "no async pings after deletion");
    // Not abandoned: it exited on cancellation, within the 0.5 s cancellation timeout.
    assert.deepEqual(linesWith(lines, "did not exit in time"), []);

    await stopCleanly(op);
  },
);

Deno.test(
  "14-daemons: stopped on operator shutdown, the object keeping its finalizer",
  opts,
  async () => {
    await using fx = await fixture("ex14s");
    const { client, namespace } = fx;
    const op = await runExample("14-daemons", namespace, { env: { DAEMON_PING_INTERVAL: "0.5" } });
    await createExampleObject(client, namespace);
    const p = ref(namespace);
    await waitFor(op, new RegExp(`${escape(p)} ${SYNC_PING}`));
    await waitFor(op, new RegExp(`${escape(p)} ${ASYNC_PING}`));

    // Both daemons exit with the operator within the grace period (none is abandoned): the async
    // one is cancelled at once on exit.
    await stopCleanly(op);
    assert.deepEqual(linesWith(op.lines, "did not exit in time"), []);
    // The object stays protected: its daemons will run again when an operator serves it.
    const after = await getObject(client, namespace);
    assert.deepEqual(after.metadata?.finalizers, [FINALIZER]);
  },
);

Deno.test(
  "14-daemons: a daemon that finishes by itself is not restarted",
  opts,
  async () => {
    await using fx = await fixture("ex14f");
    const { client, namespace } = fx;
    await using op = await runExample("14-daemons", namespace, {
      env: { DAEMON_PING_INTERVAL: "0.5", DAEMON_LIFETIME: "1" },
    });
    await createExampleObject(client, namespace);
    const p = ref(namespace);
    await waitFor(op, new RegExp(`${escape(p)} ${SYNC_PING}`));
    // It returns after its lifetime: reported as a success, once.
    await waitFor(op, new RegExp(`${escape(p)} Handler 'background_sync' succeeded\\.`));
    const pings = linesWith(op.lines, SYNC_PING).length;
    assert.ok(pings >= 2 && pings <= 4, `${pings} pings`);

    // A later change does not restart it; the other daemon keeps running.
    await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
    await waitFor(op, new RegExp(`${escape(p)} ${ASYNC_PING}: field="changed"`));
    await sleep(1_000);
    assert.equal(linesWith(op.lines, SYNC_PING).length, pings);
    assert.equal(linesWith(op.lines, "Handler 'background_sync' succeeded.").length, 1);

    // Only the async daemon holds the object now; deleting it still works.
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "the object");
    await stopCleanly(op);
  },
);

Deno.test({
  name: "14-daemons: the daemon's patch reaches the object's status",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex14p");
    const { client, namespace } = fx;
    await using op = await runExample("14-daemons", namespace, {
      env: { DAEMON_PING_INTERVAL: "0.5", DAEMON_LIFETIME: "3" },
    });
    await createExampleObject(client, namespace);
    const message = async () =>
      ((await getObject(client, namespace)).status as { message?: string } | undefined)?.message;
    // Written before each failure; the third one is there once the daemon runs.
    await waitFor(op, new RegExp(`${escape(ref(namespace))} ${SYNC_PING}`));
    assert.equal(await message(), "Failed 3 times.");
    // Written when it finishes by itself.
    await eventually(
      async () => (await message()) === "Accompanying is finished.",
      8_000,
      "the final status message",
    );
    await stopCleanly(op);
  },
});

Deno.test({
  name: "14-daemons: a daemon cancelled on deletion is reported as exited, not as failed",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex14c");
    const { client, namespace } = fx;
    await using op = await runExample("14-daemons", namespace, {
      env: { DAEMON_PING_INTERVAL: "0.5" },
    });
    await createExampleObject(client, namespace);
    const p = ref(namespace);
    await waitFor(op, new RegExp(`${escape(p)} ${ASYNC_PING}`));
    const deleting = op.lines.length;
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "the object");
    await stopCleanly(op);
    const after = op.lines.slice(deleting);
    assert.deepEqual(linesWith(after, "failed"), [], after.join("\n"));
    assert.deepEqual(after.filter((l) => /^\s+at /.test(l)), [], "no stack traces");
    assert.ok(after.some((l) => /'background_async'.*(has exited|is cancelled)/.test(l)));
  },
});

// ---------------------------------------------------------------------------------------------
// 15-timers
// ---------------------------------------------------------------------------------------------

Deno.test(
  "15-timers: timers fire on their interval only after the idle time, restarted by changes",
  opts,
  async () => {
    await using fx = await fixture("ex15");
    const { client, namespace } = fx;
    // Scaled: sync idle 1.5 s, interval 0.6 s; async idle 3 s, interval 1.2 s.
    await using op = await runExample("15-timers", namespace, { env: { TIMER_SCALE: "0.3" } });
    const lines = op.lines;
    const p = ref(namespace);
    const SYNC = `${p} Ping from a sync timer`;
    const ASYNC = `${p} Ping from an async timer`;

    const created = Date.now();
    await createExampleObject(client, namespace);
    await waitFor(op, new RegExp(`${escape(ASYNC)}: field="value"`));
    await eventually(() => linesWith(lines, ASYNC).length >= 2, 10_000, "two async pings");

    // Idle: nothing before the object has been unchanged for the idle time since creation.
    const sync1 = timesOf(lines, SYNC);
    const async1 = timesOf(lines, ASYNC);
    assert.ok(sync1[0]! - created >= 1_400, `first sync ping after ${sync1[0]! - created} ms`);
    assert.ok(async1[0]! - created >= 2_900, `first async ping after ${async1[0]! - created} ms`);
    // Then on the interval.
    assert.ok(sync1.length >= 3, `${sync1.length} sync pings`);
    const gaps = (ts: number[]) => ts.slice(1).map((t, i) => t - ts[i]!);
    assert.ok(gaps(sync1).every((g) => g >= 550), `sync gaps ${gaps(sync1)}`);
    assert.ok(gaps(async1).every((g) => g >= 1_150), `async gaps ${gaps(async1)}`);

    // A change restarts the idle wait: both go quiet, then resume with the new field.
    const changed = Date.now();
    await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
    await waitFor(op, new RegExp(`${escape(SYNC)}: field="changed"`));
    await waitFor(op, new RegExp(`${escape(ASYNC)}: field="changed"`));
    const quietSync = timesOf(lines, SYNC).filter((t) => t > changed + 300 && t < changed + 1_400);
    assert.deepEqual(quietSync, [], "no sync pings while not idle");
    const quietAsync = timesOf(lines, ASYNC).filter((t) =>
      t > changed + 300 && t < changed + 2_900
    );
    assert.deepEqual(quietAsync, [], "no async pings while not idle");
    const firstChanged = timeOf(linesWith(lines, `${SYNC}: field="changed"`)[0]!);
    assert.ok(firstChanged - changed >= 1_400, `resumed after ${firstChanged - changed} ms`);

    // Status changes are not essential: the timers keep firing (here a status written by hand).
    await client.api.patch(KOPFEXAMPLES, NAME, { status: { touched: true } }, { namespace });
    const touched = Date.now();
    await sleep(1_300);
    const afterTouch = timesOf(lines, SYNC).filter((t) => t > touched);
    assert.ok(afterTouch.length >= 1, "sync pings continue after a status-only change");

    await stopCleanly(op);
    assert.deepEqual(linesWith(lines, "failed"), []);
  },
);

// ---------------------------------------------------------------------------------------------
// 16-indexing
// ---------------------------------------------------------------------------------------------

/** The `by_label` index as printed by the example's timer, from its last line. */
function lastByLabel(lines: readonly string[]): Record<string, string[]> | undefined {
  const line = lines.findLast((l) => l.startsWith("by_label: "));
  return line ? JSON.parse(line.slice("by_label: ".length)) : undefined;
}

Deno.test(
  "16-indexing: index contents are visible to a timer and follow the Pods",
  opts,
  async () => {
    await using fx = await fixture("ex16");
    const { client, namespace } = fx;
    await createPod(client, namespace, "pod-a", { app: "demo" });
    await createPod(client, namespace, "pod-b", { app: "demo", tier: "web" });
    // There is no kubelet: mark one as running by hand.
    await client.api.patch(PODS, "pod-a", { status: { phase: "Running" } }, {
      namespace,
      subresource: "status",
    });
    await using op = await runExample("16-indexing", namespace, { plural: "pods" });
    await waitFor(op, new RegExp(`Watching kopfexamples\\b.* in ${namespace}$`));

    // The timer runs at once for a new object, with the indices complete.
    await createExampleObject(client, namespace);
    await waitFor(op, /^by_label: /);
    assert.deepEqual(lastByLabel(op.lines), {
      "app=demo": ["pod-a", "pod-b"],
      "tier=web": ["pod-b"],
    });

    // A deleted Pod leaves the indices (seen at the timer's next run, 5 s later).
    await client.api.delete(PODS, "pod-b", { namespace, gracePeriodSeconds: 0 });
    await eventually(() => isGone(client, PODS, namespace, "pod-b"), 10_000, "pod-b to be gone");
    const printed = linesWith(op.lines, "by_label: ").length;
    await eventually(
      () => linesWith(op.lines, "by_label: ").length > printed,
      8_000,
      "the next run of the timer",
    );
    assert.deepEqual(lastByLabel(op.lines), { "app=demo": ["pod-a"] });
    await stopCleanly(op);
  },
);

Deno.test({
  name: "16-indexing: the timer writes the running Pods to the object's status",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex16s");
    const { client, namespace } = fx;
    await createPod(client, namespace, "pod-a", { app: "demo" });
    await createPod(client, namespace, "pod-b", { app: "demo" });
    await client.api.patch(PODS, "pod-a", { status: { phase: "Running" } }, {
      namespace,
      subresource: "status",
    });
    await using op = await runExample("16-indexing", namespace);
    await createExampleObject(client, namespace);
    await waitFor(op, /^by_label: /);
    await eventually(
      async () => {
        const b = await getObject(client, namespace);
        const running = (b.status as Record<string, unknown> | undefined)?.["running-pods"];
        return JSON.stringify(running) === JSON.stringify([`${namespace}::pod-a`]);
      },
      8_000,
      "status.running-pods",
    );
    await stopCleanly(op);
  },
});

Deno.test({
  name: "16-indexing: the probes report the indexed Pods on the liveness endpoint",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex16p");
    const { client, namespace } = fx;
    await createPod(client, namespace, "pod-a", { app: "demo" });
    await createPod(client, namespace, "pod-b", { app: "demo" });
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    await using op = await runExample("16-indexing", namespace, {
      plural: "pods",
      args: ["--liveness", url],
    });
    await waitFor(op, new RegExp(`Watching kopfexamples\\b.* in ${namespace}$`));
    const answer = await eventually(
      async () => {
        const result = await probe(url);
        const body = result.body as { pod_count?: number };
        return body.pod_count === 2 ? result : undefined;
      },
      10_000,
      "the probes to count the Pods",
    );
    assert.equal(answer.status, 200);
    const names = (answer.body as { pod_names: string[] }).pod_names.sort();
    assert.deepEqual(names, ["pod-a", "pod-b"]);
    await stopCleanly(op);
  },
});
