/**
 * End-to-end tests of the examples of the operator around its handlers: children (02-children),
 * an operator embedded in a program (12-embedded), operator hooks (13-hooks), daemons and timers
 * (14-daemons, 15-timers) and indices (16-indexing), on the shared control plane. Each runs `examples/NN-name/example.ts` the way
 * a user would — with the real CLI (`cli.ts run … --verbose -n <namespace>`) as a subprocess,
 * or, for 12-embedded, as a program of its own — does what a user would do with kubectl, and
 * checks what a user would look at: objects, their status and finalizers, children, the
 * liveness endpoint, and the operator's log lines (with their timestamps, for timing).
 * With `DUMP_LINES=1`, each test prints the operator's whole output when it stops.
 */

import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import type { KubeClient, KubeObject } from "../mod.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  assertNoCrashes,
  createExampleObject,
  FINALIZER,
  fixture,
  getObject,
  isGone,
  lineIndex,
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

const SERVICEACCOUNTS: ResourceRef = {
  group: "",
  version: "v1",
  plural: "serviceaccounts",
  namespaced: true,
};

// ---------------------------------------------------------------------------------------------
// Helpers (as in examples_handlers_test.ts)
// ---------------------------------------------------------------------------------------------

/** The time (ms since the epoch) of a log line in the `full` format: `[2024-01-31 12:34:56,789] …`. */
function timeOf(line: string): number {
  const m = line.match(/^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\]/);
  if (!m) throw new Error(`No timestamp in: ${line}`);
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return new Date(y, mo - 1, d, h, mi, s, ms).getTime();
}

/** The times of the lines containing `text`. */
function timesOf(lines: readonly string[], text: string): number[] {
  return linesWith(lines, text).map(timeOf);
}

/** GETs the liveness endpoint: the status and the JSON body. */
async function probe(url: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.json() };
}

/** Waits until the namespace's default ServiceAccount exists (Pods need it). */
async function waitForServiceAccount(client: KubeClient, namespace: string): Promise<void> {
  await eventually(
    () => client.api.get(SERVICEACCOUNTS, "default", { namespace }),
    15_000,
    "the default ServiceAccount",
  );
}

/** A Pod that will never run (there is no kubelet). */
async function createPod(
  client: KubeClient,
  namespace: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<KubeObject> {
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels },
    spec: {
      containers: [{ name: "the-only-one", image: "busybox", command: ["sleep", "1000"] }],
    },
  };
  await waitForServiceAccount(client, namespace);
  return await client.api.create(PODS, body, { namespace });
}

// ---------------------------------------------------------------------------------------------
// 02-children
// ---------------------------------------------------------------------------------------------

Deno.test(
  "02-children: a Pod is adopted by its parent and garbage-collected with it",
  opts,
  async () => {
    await using fx = await fixture("ex02");
    const { client, namespace } = fx;
    await waitForServiceAccount(client, namespace);
    await using op = await runExample("02-children", namespace);
    const parent = await createExampleObject(client, namespace);
    const p = ref(namespace);

    await waitFor(op, new RegExp(`\\[${namespace}/${NAME}\\] Handler 'create_fn' succeeded\\.`));
    const handled = await eventually(
      async () => {
        const b = await getObject(client, namespace);
        const status = b.status as { create_fn?: { children?: string[] } } | undefined;
        return status?.create_fn?.children ? b : undefined;
      },
      10_000,
      "the children in the parent's status",
    );
    const children = (handled.status as { create_fn: { children: string[] } }).create_fn.children;
    assert.equal(children.length, 1);

    // The child: found by its uid, adopted by the parent.
    const { items } = await client.api.list(PODS, { namespace });
    assert.equal(items.length, 1);
    const pod = items[0]!;
    assert.equal(pod.metadata?.uid, children[0]);
    assert.equal(pod.metadata?.namespace, namespace);
    assert.equal(pod.metadata?.generateName, `${NAME}-`);
    assert.ok(pod.metadata?.name?.startsWith(`${NAME}-`));
    assert.deepEqual(pod.metadata?.labels, { somelabel: "somevalue" });
    assert.deepEqual(pod.metadata?.ownerReferences, [{
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      name: NAME,
      uid: parent.metadata!.uid!,
      controller: true,
      blockOwnerDeletion: true,
    }]);
    // Rendered from the parent's spec.
    const container = (pod.spec as { containers: Array<Record<string, unknown>> }).containers[0]!;
    assert.deepEqual(container.env, [{ name: "FIELD", value: "value" }]);
    assert.match(String((container.args as string[])[0]), /echo "FIELD=\$FIELD"\nsleep 1m/);
    // Only a creation handler: no finalizer on the parent.
    assert.equal(handled.metadata?.finalizers, undefined);
    assert.equal(linesWith(op.lines, `${p} Handler 'create_fn' succeeded.`).length, 1);

    // The parent goes; the controller manager's garbage collector deletes the child.
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "the parent");
    await eventually(
      () => isGone(client, PODS, namespace, pod.metadata!.name!),
      25_000,
      "the child to be garbage-collected",
    );

    await stopCleanly(op);
    assert.deepEqual(linesWith(op.lines, "Handler 'create_fn' failed"), []);
  },
);

// ---------------------------------------------------------------------------------------------
// 12-embedded
// ---------------------------------------------------------------------------------------------

Deno.test(
  "12-embedded: a program starts an operator, works with it running, and stops it",
  opts,
  async () => {
    await using fx = await fixture("ex12");
    const { client, namespace } = fx;
    const plane = await sharedControlPlane();
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check", "examples/12-embedded/example.ts"],
      env: { KUBECONFIG: plane.kubeconfigPath, EXAMPLE_NAMESPACE: namespace, NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(40_000),
    }).output();
    const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
    const stdout = new TextDecoder().decode(output.stdout).split("\n");
    const lines = text.split("\n");
    assert.equal(output.code, 0, text);
    assertNoCrashes(lines);

    // The program's own steps, in order, while the operator runs in the background.
    const expected = [
      "Starting the main app.",
      "Do the main app activity here. Step 1/3.",
      "Do the main app activity here. Step 2/3.",
      "Do the main app activity here. Step 3/3.",
      "Exiting the main app.",
      "The operator has stopped.",
    ];
    assert.deepEqual(stdout.filter((l) => l && !l.startsWith("[")), expected, text);

    // The embedded operator handled each object: creation, then deletion (its finalizer kept
    // the object until the deletion handler had run).
    for (const step of [0, 1, 2]) {
      const p = ref(namespace, `kopf-example-${step}`);
      assert.equal(linesWith(lines, `${p} Handler 'create_fn' succeeded.`).length, 1, text);
      assert.equal(linesWith(lines, `${p} Handler 'delete_fn' succeeded.`).length, 1, text);
      assert.ok(
        lineIndex(lines, `${p} Handler 'create_fn' succeeded.`) <
          lineIndex(lines, `${p} Handler 'delete_fn' succeeded.`),
      );
    }
    // The operator was ready before the program started working, and stopped at the end.
    assert.ok(lineIndex(lines, `Watching kopfexamples`) >= 0, text);
    assert.ok(lineIndex(lines, "Operator stopped.") > lineIndex(lines, "Exiting the main app."));
    // Everything was deleted for real: no finalizer left behind.
    const { items } = await client.api.list(KOPFEXAMPLES, { namespace });
    assert.deepEqual(items.map((i) => i.metadata?.name), []);
  },
);

// ---------------------------------------------------------------------------------------------
// 13-hooks
// ---------------------------------------------------------------------------------------------

Deno.test(
  "13-hooks: startup, login, probes on the liveness endpoint, and cleanup",
  opts,
  async () => {
    await using fx = await fixture("ex13");
    const { client, namespace } = fx;
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    await using op = await runExample("13-hooks", namespace, {
      plural: "pods",
      args: ["--liveness", url],
      env: { SERVE_DELAY_MAX: "1" },
    });
    const lines = op.lines;

    // Startup: the simple handler once; the retried one fails three times, 1 s apart.
    assert.equal(linesWith(lines, "Initialising the task registry...").length, 1);
    assert.equal(linesWith(lines, "Handler 'startup_fn_simple' succeeded.").length, 1);
    const failures = [3, 2, 1].map((n) =>
      linesWith(lines, `Handler 'startup_fn_retried' failed temporarily: Going to succeed in ${n}s`)
    );
    assert.deepEqual(failures.map((f) => f.length), [1, 1, 1], lines.join("\n"));
    const retried = linesWith(lines, "Starting retried...");
    assert.equal(retried.length, 1);
    assert.equal(linesWith(lines, "Handler 'startup_fn_retried' succeeded.").length, 1);
    const startupTook = timeOf(retried[0]!) - timeOf(failures[0]![0]!);
    assert.ok(startupTook >= 2_900, `retried for ${startupTook} ms`);

    // Login only after the startup; watching only after the login (which takes 2 s).
    const loginAt = lineIndex(lines, "Logging in in 2s...");
    assert.ok(loginAt > lineIndex(lines, "Starting retried..."), lines.join("\n"));
    const loggedIn = lineIndex(lines, "Handler 'login_fn' succeeded.");
    assert.ok(loggedIn > loginAt, lines.join("\n"));
    assert.ok(lineIndex(lines, "Watching pods") > loggedIn, lines.join("\n"));

    // The liveness endpoint answers with the probes' results: no tasks yet.
    assert.deepEqual(await probe(url), {
      status: 200,
      body: { tasks_count: 0, monitored_objects: {} },
    });
    const missing = await fetch(url.replace("/healthz", "/other"));
    assert.equal(missing.status, 404);
    await missing.body?.cancel();

    // A Pod gets a background task, which the probes report.
    await createPod(client, namespace, "kopf-pod");
    const p = ref(namespace, "kopf-pod");
    await waitFor(op, new RegExp(`\\[${namespace}/kopf-pod\\] Served by the background task\\.`));
    await waitFor(op, new RegExp(`\\[${namespace}/kopf-pod\\] Served by the background task\\.`));
    // Probe results are reused for 10 s (PROBE-04): the earlier answer may still be served.
    const expected = {
      status: 200,
      body: { tasks_count: 1, monitored_objects: { [namespace]: ["kopf-pod"] } },
    };
    await eventually(
      async () => isDeepStrictEqual(await probe(url), expected),
      20_000,
      "the probes to report the task",
    );
    assert.ok(linesWith(lines, `${p} Served by the background task.`).length >= 1);

    // On exit, the cleanup handler stops the tasks.
    await stopCleanly(op);
    const cleaning = lineIndex(lines, "Cleaning up...");
    assert.ok(cleaning > lineIndex(lines, "Stop requested"), lines.join("\n"));
    assert.equal(linesWith(lines, "All pod-tasks are requested to stop...").length, 1);
    assert.equal(linesWith(lines, "Handler 'cleanup_fn' succeeded.").length, 1);
    assert.equal(linesWith(lines, `${p} Serving is finished by request.`).length, 1);
    assert.ok(lineIndex(lines, `${p} Serving is finished by request.`) > cleaning);
    // The endpoint is gone with the operator.
    await assert.rejects(() => fetch(url));
  },
);

// ---------------------------------------------------------------------------------------------
// 14-daemons
// ---------------------------------------------------------------------------------------------

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

/** Escapes a text for a regular expression. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
