/**
 * End-to-end tests of the handler examples — sub-handlers (07), raw event handlers (08),
 * built-in resources (10), filters (11) — as tests/examples_handlers_test.ts runs them: the
 * example with the real CLI as a subprocess against the shared control plane, checked by what
 * a user would look at (status, annotations, Events, the operator's log).
 */

import assert from "node:assert/strict";
import type { KubeClient, KubeObject } from "../mod.ts";
import {
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
import {
  assertStack,
  countEvents,
  eventsAbout,
  lastHandled,
  observe,
  POST_LOG_MESSAGES,
  waitIdle,
} from "./_example_checks.ts";
import { eventually, KOPFEXAMPLES, sleep } from "./_support.ts";

// ---------------------------------------------------------------------------------------------
// 07-subhandlers
// ---------------------------------------------------------------------------------------------

Deno.test("07-subhandlers: one sub-handler per item, each tracked on its own", opts, async () => {
  await using fx = await fixture("ex07");
  const { client, namespace } = fx;
  await using seen = await observe(client, KOPFEXAMPLES, namespace);
  await using op = await runExample("07-subhandlers", namespace, POST_LOG_MESSAGES);
  const created = await createExampleObject(client, namespace);
  const p = ref(namespace);

  await waitFor(op, /Creation is processed: 1 succeeded; 0 failed\./);
  // Each item is handled exactly once, though the parent is called until all are done.
  assert.equal(linesWith(op, "=== Handling creation for item1. ===").length, 1);
  assert.equal(linesWith(op, "=== Handling creation for item2. ===").length, 1);
  assert.equal(linesWith(op, `${p} Handler 'create_fn/item1' succeeded.`).length, 1);
  assert.equal(linesWith(op, `${p} Handler 'create_fn/item2' succeeded.`).length, 1);
  assert.equal(linesWith(op, `${p} Handler 'create_fn' succeeded.`).length, 1);
  assert.ok(
    lineIndex(op, "Handler 'create_fn/item2' succeeded.") <
      lineIndex(op, "Handler 'create_fn' succeeded."),
  );

  // While in progress: a record for the parent (listing its sub-handlers) and one per finished
  // sub-handler (`/` becomes `.` in the annotation name). One sub-handler runs per cycle.
  const records = seen.progress();
  assert.ok(
    records.some((r) =>
      r["create_fn"]?.success === false && r["create_fn"]?.purpose === "create" &&
      JSON.stringify(r["create_fn"]?.subrefs) ===
        JSON.stringify(["create_fn/item1", "create_fn/item2"]) &&
      r["create_fn.item1"]?.success === true && r["create_fn.item1"]?.retries === 1 &&
      r["create_fn.item2"] === undefined
    ),
    JSON.stringify(records),
  );

  // When done: all records purged, the essence remembered.
  const body = await waitIdle(client, namespace);
  assert.deepEqual(lastHandled(body)?.spec, created.spec);
  assert.deepEqual(body.status ?? {}, {});
  assert.deepEqual(body.metadata?.finalizers ?? [], []);

  await eventually(
    async () => {
      const events = await eventsAbout(client, namespace, created.metadata!.uid!);
      return countEvents(events, "Normal", "Logging", "Handler 'create_fn/item1' succeeded.") ===
          1 &&
        countEvents(events, "Normal", "Logging", "Handler 'create_fn/item2' succeeded.") === 1 &&
        countEvents(events, "Normal", "Logging", "Handler 'create_fn' succeeded.") === 1;
    },
    15_000,
    "Events of the sub-handlers",
  );

  await stopCleanly(op);
});

// ---------------------------------------------------------------------------------------------
// 08-events
// ---------------------------------------------------------------------------------------------

Deno.test("08-events: raw event handlers, a failing one ignored", opts, async () => {
  await using fx = await fixture("ex08");
  const { client, namespace } = fx;

  // One object exists before the operator starts: it is reported by the listing (type null).
  const early = await createExampleObject(client, namespace, "kopf-example-early");
  await using op = await runExample("08-events", namespace);
  const received = (name: string) =>
    linesWith(op, "Event received: ")
      .map((l) =>
        JSON.parse(l.slice(l.indexOf("{"))) as { type: string | null; object: KubeObject }
      )
      .filter((e) => e.object.metadata?.name === name);
  await eventually(() => received("kopf-example-early").length === 1, 10_000, "the listing");
  assert.equal(received("kopf-example-early")[0]!.type, null);

  // Objects created, changed and deleted later arrive as watch events.
  const created = await createExampleObject(client, namespace);
  await eventually(() => received(NAME).length === 1, 10_000, "ADDED");
  await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
  await eventually(() => received(NAME).length === 2, 10_000, "MODIFIED");
  await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
  await eventually(() => received(NAME).length === 3, 10_000, "DELETED");
  const events = received(NAME);
  assert.deepEqual(events.map((e) => e.type), ["ADDED", "MODIFIED", "DELETED"]);
  assert.equal(events[0]!.object.metadata?.uid, created.metadata?.uid);
  assert.equal((events[1]!.object.spec as Record<string, unknown>).field, "changed");

  // The failing handler: logged with its stack for every event, and ignored.
  const failure = `${ref(namespace)} Handler 'event_fn_with_error' failed with an exception ` +
    `and will ignore it: Oops!`;
  assert.equal(linesWith(op, failure).length, 3);
  assertStack(op, failure, "Error: Oops!");
  assert.equal(
    linesWith(op, `${ref(namespace, "kopf-example-early")} Handler 'event_fn_with_error'`).length,
    1,
  );

  // Event handlers leave no traces on objects and post no Events (their logs are local only).
  const body = await getObject(client, namespace, "kopf-example-early");
  assert.deepEqual(Object.keys(body.metadata?.annotations ?? {}), ["someannotation"]);
  assert.deepEqual(body.metadata?.finalizers ?? [], []);
  assert.deepEqual(body.status ?? {}, {});
  await sleep(1500); // A batch of Events would be posted within 0.2 s after the first message.
  assert.deepEqual(await eventsAbout(client, namespace, early.metadata!.uid!), []);
  assert.deepEqual(await eventsAbout(client, namespace, created.metadata!.uid!), []);

  await stopCleanly(op);
});

// ---------------------------------------------------------------------------------------------
// 10-builtins
// ---------------------------------------------------------------------------------------------

/** A Pod that will never run (there is no kubelet), like the one in Kopf's test. */
async function createPod(client: KubeClient, namespace: string): Promise<KubeObject> {
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { generateName: "kopf-pod-", namespace },
    spec: {
      containers: [{
        name: "the-only-one",
        image: "busybox",
        command: ["sh", "-x", "-c", "sleep 1"],
      }],
    },
  };
  // The namespace's default ServiceAccount (needed for Pods) appears shortly after the namespace.
  return await eventually(() => client.api.create(PODS, body, { namespace }), 10_000, "a Pod");
}

Deno.test("10-builtins: a Pod deleted early cancels its killer", opts, async () => {
  await using fx = await fixture("ex10");
  const { client, namespace } = fx;
  await using op = await runExample("10-builtins", namespace, "pods");
  const pod = await createPod(client, namespace);
  const name = pod.metadata!.name!;
  const p = ref(namespace, name);

  await waitFor(op, new RegExp(`\\[${namespace}/${name}\\] Creation is in progress`));
  await waitFor(op, /Creation is processed: 1 succeeded; 0 failed\./);
  assert.equal(linesWith(op, `${p} === Pod killing happens in 30s.`).length, 1);
  // The delete handler keeps a finalizer on the Pod.
  await eventually(
    async () => {
      const live = await client.api.get(PODS, name, { namespace });
      return live.metadata?.finalizers?.includes(FINALIZER) && lastHandled(live);
    },
    10_000,
    "the finalizer",
  );

  await client.api.delete(PODS, name, { namespace });
  await waitFor(op, new RegExp(`\\[${namespace}/${name}\\] Deletion is in progress`));
  await waitFor(op, /=== Pod killing is cancelled!/);
  await waitFor(op, /Deletion is processed: 1 succeeded; 0 failed\./);
  await eventually(() => isGone(client, PODS, namespace, name), 10_000, "the Pod to be gone");
  assert.deepEqual(linesWith(op, "Pod killing happens NOW!"), []);

  // The handlers' messages are not Events of the Pod by default (settings.posting.loggers off,
  // as in Kopf 1.44+); the stop flushes the poster's queue, so none can come later.
  await stopCleanly(op);
  const events = await eventsAbout(client, namespace, pod.metadata!.uid!);
  assert.deepEqual(
    events.filter((e) => e.reason === "Logging").map((e) => e.message),
    [],
    "no Events from log messages by default (K26-01)",
  );
});

Deno.test("10-builtins: the killer deletes a Pod when its time comes", opts, async () => {
  await using fx = await fixture("ex10k");
  const { client, namespace } = fx;
  await using op = await runExample("10-builtins", namespace, "pods", { POD_KILL_DELAY: "1" });
  const pod = await createPod(client, namespace);
  const name = pod.metadata!.name!;
  const p = ref(namespace, name);

  await waitFor(op, new RegExp(`\\[${namespace}/${name}\\] === Pod killing happens in 1s\\.`));
  await waitFor(op, /=== Pod killing happens NOW!/);
  // The operator's own deletion runs the delete handler, which releases the Pod.
  await waitFor(op, /Deletion is processed: 1 succeeded; 0 failed\./);
  await eventually(() => isGone(client, PODS, namespace, name), 10_000, "the Pod to be gone");
  assert.equal(linesWith(op, `${p} === Pod killing happens NOW!`).length, 1);
  assert.deepEqual(linesWith(op, "Pod killing failed"), []);
  assert.deepEqual(linesWith(op, "Pod killing is cancelled"), []);

  await stopCleanly(op);
});

// ---------------------------------------------------------------------------------------------
// 11-filtering-handlers
// ---------------------------------------------------------------------------------------------

Deno.test("11-filtering-handlers: only the handlers whose filters match run", opts, async () => {
  await using fx = await fixture("ex11");
  const { client, namespace } = fx;
  await using op = await runExample("11-filtering-handlers", namespace, POST_LOG_MESSAGES);
  const created = await createExampleObject(client, namespace);
  const p = ref(namespace);

  // 10 of the 14 create handlers match examples/obj.yaml.
  await waitFor(op, /Creation is processed: 10 succeeded; 0 failed\./);
  await waitIdle(client, namespace);
  await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
  await waitFor(op, /Updating is processed: 1 succeeded; 0 failed\./);
  await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
  await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "deletion");
  await stopCleanly(op);

  const expected = [
    "Label is matching.",
    "Label is present.",
    "Label is absent.",
    "Label callback matching.",
    "Annotation is matching.",
    "Annotation is present.",
    "Annotation is absent.",
    "Filter satisfied.",
    "Field value is satisfied.",
    "Field presence is satisfied.",
    "Field change is satisfied.",
  ];
  const unexpected = [
    "Annotation callback mismatch.",
    "Filter not satisfied.",
    "Field value is not satisfied.",
    "Field presence is not satisfied.",
  ];
  for (const message of expected) {
    assert.equal(linesWith(op, `${p} ${message}`).length, 1, message);
  }
  for (const message of unexpected) {
    assert.deepEqual(linesWith(op, message), [], message);
  }
  assert.deepEqual(linesWith(op, "Handler 'create_with_filter_not_satisfied'"), []);

  // The handlers' messages are Events too. The creation logs 21 messages at once: more than the
  // poster's 10 distinct Events per object per batch, so some are summarised in a "Throttled"
  // warning instead (a deliberate difference from Kopf). Every message is accounted for.
  const infos = op.lines.filter((l) => l.includes(`[INFO    ] ${p} `))
    .map((l) => l.slice(l.indexOf(p) + p.length + 1));
  const events = await eventsAbout(client, namespace, created.metadata!.uid!);
  const posted = events.filter((e) => e.reason === "Logging");
  for (const event of posted) {
    assert.equal(event.type, "Normal");
    assert.ok(infos.includes(event.message), event.message);
  }
  const throttled = events.filter((e) => e.reason === "Throttled")
    .map((e) => Number(/^(\d+) more messages were not posted/.exec(e.message)?.[1]));
  assert.equal(
    posted.reduce((n, e) => n + e.count, 0) + throttled.reduce((n, c) => n + c, 0),
    infos.length,
    JSON.stringify(events.map((e) => [e.reason, e.message, e.count])),
  );
  for (const message of unexpected) {
    assert.equal(countEvents(events, "Normal", "Logging", message), 0, message);
  }
});

Deno.test({
  name: "11-filtering-handlers: a daemon filtered by a field value",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex11d");
    const { client, namespace } = fx;
    await using op = await runExample("11-filtering-handlers", namespace);
    await createExampleObject(client, namespace);
    const daemonLine = new RegExp(`\\[${namespace}/${NAME}\\] Field daemon is satisfied\\.`);
    await waitFor(op, daemonLine, 10_000);
    await stopCleanly(op);
  },
});
