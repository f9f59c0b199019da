/**
 * End-to-end tests of the handler examples — errors and retries (03), Events (04, 08), the
 * handler kinds (05), sub-handlers (07), built-in resources (10), filters (11). Each runs
 * `examples/NN-name/example.ts` with the real CLI
 * (`cli.ts run … --verbose -n <namespace>`) as a subprocess against the shared control plane,
 * does what a user would do with kubectl, and checks what a user would look at: the object's
 * status, annotations and finalizers, its Events, and the operator's log lines.
 */

import assert from "node:assert/strict";
import type { KubeClient, KubeObject } from "../mod.ts";
import { watcher } from "../client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { type SpawnedOperator, spawnOperator } from "./_operator.ts";
import {
  createExampleObject,
  EVENTS,
  FINALIZER,
  fixture,
  getObject,
  isGone,
  LAST_HANDLED,
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
import { eventually, KOPFEXAMPLES, sleep, tempDir } from "./_support.ts";

// Log messages become Events only with settings.posting.loggers (off by default, as in Kopf
// 1.44+); the tests of those Events add this handlers file, which turns it on at startup.
const POST_LOG_MESSAGES = { args: ["tests/fixtures/post_log_messages.ts"] };

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

interface EventSummary {
  type: string;
  reason: string;
  message: string;
  count: number;
  involvedObject: Record<string, unknown>;
  source: Record<string, unknown>;
}

/** The core v1 Events about an object (as `kubectl describe` shows them). */
async function eventsAbout(
  client: KubeClient,
  namespace: string,
  uid: string,
): Promise<EventSummary[]> {
  const { items } = await client.api.list(EVENTS, {
    namespace,
    fieldSelector: `involvedObject.uid=${uid}`,
  });
  return items.map((e) => e as unknown as EventSummary);
}

/** The total count of Events about an object matching type, reason and message. */
function countEvents(
  events: EventSummary[],
  type: string,
  reason: string,
  message: string | RegExp,
): number {
  return events
    .filter((e) => e.type === type && e.reason === reason)
    .filter((e) => typeof message === "string" ? e.message === message : message.test(e.message))
    .reduce((sum, e) => sum + (e.count ?? 1), 0);
}

/** Every version of the objects of a resource in a namespace, as a watch sees them. */
async function observe(client: KubeClient, resource: ResourceRef, namespace: string) {
  const controller = new AbortController();
  const versions: KubeObject[] = [];
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const done = (async () => {
    for await (const e of watcher(client.api, resource, { namespace, signal: controller.signal })) {
      if (e.type === "initDone") markReady();
      if (e.type === "apply" || e.type === "initApply") versions.push(e.object);
    }
  })().catch(() => {});
  await ready;
  return {
    versions,
    /** Parsed progress records (`kopf.zalando.org/<id>` annotations) of each observed version. */
    progress(name = NAME): Array<Record<string, Record<string, unknown>>> {
      return versions.filter((v) => v.metadata?.name === name).map((v) =>
        Object.fromEntries(
          Object.entries(v.metadata?.annotations ?? {})
            .filter(([key]) => key.startsWith("kopf.zalando.org/") && key !== LAST_HANDLED)
            .map(([key, value]) => [key.slice("kopf.zalando.org/".length), JSON.parse(value)]),
        )
      );
    },
    async [Symbol.asyncDispose]() {
      controller.abort();
      await done;
    },
  };
}

/** Progress annotations (`kopf.zalando.org/…` except the diff-base) of an object. */
function progressKeys(body: KubeObject): string[] {
  return Object.keys(body.metadata?.annotations ?? {})
    .filter((k) => k.startsWith("kopf.zalando.org/") && k !== LAST_HANDLED);
}

/**
 * Waits until the operator has finished with the object: its essence stored and no progress
 * annotations left (the last write of a cycle is done). Changing the object before that may
 * hit the framework bug described at "a change made while a handler runs is not lost".
 */
async function waitIdle(client: KubeClient, namespace: string, name = NAME): Promise<KubeObject> {
  return await eventually(
    async () => {
      const b = await getObject(client, namespace, name);
      return lastHandled(b) && progressKeys(b).length === 0 ? b : undefined;
    },
    10_000,
    `${name} to be handled completely`,
  );
}

/** The last handled essence stored on an object. */
function lastHandled(body: KubeObject): { spec?: Record<string, unknown> } | undefined {
  const raw = body.metadata?.annotations?.[LAST_HANDLED];
  return raw === undefined ? undefined : JSON.parse(raw);
}

/** Asserts that the line after the first one containing `text` is (or is not) an error stack. */
function assertStack(op: SpawnedOperator, text: string, header: string | undefined): void {
  const i = lineIndex(op, text);
  assert.ok(i >= 0, `no line with ${text}:\n${op.lines.join("\n")}`);
  const next = op.lines[i + 1] ?? "";
  if (header === undefined) {
    assert.ok(
      !/^\s+at /.test(next) && !/^\w*(Error|Exception)\b/.test(next),
      `stack after ${text}`,
    );
  } else {
    assert.equal(next, header);
    assert.match(op.lines[i + 2] ?? "", /^\s+at /);
  }
}

// ---------------------------------------------------------------------------------------------
// 03-exceptions
// ---------------------------------------------------------------------------------------------

Deno.test("03-exceptions: temporary, permanent and arbitrary errors, retries", opts, async () => {
  await using fx = await fixture("ex03");
  const { client, namespace } = fx;
  await using seen = await observe(client, KOPFEXAMPLES, namespace);
  await using op = await runExample("03-exceptions", namespace, POST_LOG_MESSAGES);
  const created = await createExampleObject(client, namespace);
  const p = ref(namespace);

  await waitFor(op, /Creation is processed: 1 succeeded; 3 failed\./, 20_000);

  // Log lines: messages only for the framework's errors, stack traces for arbitrary ones.
  const permanentMsg = `${p} Handler 'instant_failure_with_only_a_message' failed permanently: ` +
    `Fail once and for all.`;
  assert.equal(linesWith(op, permanentMsg).length, 1);
  assertStack(op, permanentMsg, undefined);

  const temporaryMsg = `${p} Handler 'eventual_success_with_few_messages' failed temporarily: ` +
    `Expected recoverable error.`;
  assert.equal(linesWith(op, temporaryMsg).length, 3);
  assertStack(op, temporaryMsg, undefined);
  assert.equal(
    linesWith(op, `${p} Handler 'eventual_success_with_few_messages' succeeded.`).length,
    1,
  );

  const retryMsg = `${p} Handler 'eventual_failure_with_tracebacks' failed with an exception ` +
    `and will try again in 1 seconds: An error that is supposed to be recoverable.`;
  assert.equal(linesWith(op, retryMsg).length, 2);
  assertStack(op, retryMsg, "MyException: An error that is supposed to be recoverable.");
  // The third failure ends it at once (a fourth attempt would exceed the retries), as in Kopf.
  const exhaustedMsg = `${p} Handler 'eventual_failure_with_tracebacks' failed with an ` +
    `exception and will stop now (it would exceed 3 retries on the next attempt): ` +
    `An error that is supposed to be recoverable.`;
  assert.equal(linesWith(op, exhaustedMsg).length, 1);
  assertStack(op, exhaustedMsg, "MyException: An error that is supposed to be recoverable.");

  const stopMsg = `${p} Handler 'instant_failure_with_traceback' failed with an exception ` +
    `and will stop now: An error that is supposed to be recoverable.`;
  assert.equal(linesWith(op, stopMsg).length, 1);
  assertStack(op, stopMsg, "MyException: An error that is supposed to be recoverable.");

  // While in progress, each handler's state was kept in its own annotation.
  const records = seen.progress();
  const during = (id: string) =>
    records.map((r) => r[id]).filter((r): r is Record<string, unknown> => r !== undefined);
  const retried = during("eventual_success_with_few_messages");
  assert.ok(
    retried.some((r) =>
      r.retries === 1 && r.success === false && typeof r.delayed === "string" &&
      r.message === "Expected recoverable error." && r.purpose === "create"
    ),
    JSON.stringify(retried),
  );
  assert.ok(retried.some((r) => r.retries === 3 && r.success === false), JSON.stringify(retried));
  assert.ok(
    during("eventual_failure_with_tracebacks").some((r) =>
      r.retries === 2 && r.message === "An error that is supposed to be recoverable."
    ),
  );
  assert.ok(
    during("instant_failure_with_only_a_message").some((r) =>
      r.failure === true && r.retries === 1 && r.message === "Fail once and for all."
    ),
  );
  assert.ok(
    during("instant_failure_with_traceback").some((r) =>
      r.failure === true && r.retries === 1 &&
      r.message === "An error that is supposed to be recoverable."
    ),
  );

  // When done: progress purged, the essence remembered, nothing else left on the object.
  const body = await waitIdle(client, namespace);
  assert.deepEqual(lastHandled(body)?.spec, created.spec);
  assert.deepEqual(body.metadata?.finalizers ?? [], []);
  assert.deepEqual(body.status ?? {}, {});

  // Events: each failure as an Error, the success and the summary as Normal.
  const uid = created.metadata!.uid!;
  await eventually(
    async () => {
      const events = await eventsAbout(client, namespace, uid);
      const strip = (line: string) => line.slice(line.indexOf("] Handler") + 2);
      return countEvents(events, "Error", "Logging", strip(permanentMsg)) === 1 &&
        countEvents(events, "Error", "Logging", strip(temporaryMsg)) === 3 &&
        countEvents(events, "Error", "Logging", strip(retryMsg)) === 2 &&
        countEvents(events, "Error", "Logging", strip(stopMsg)) === 1 &&
        countEvents(
            events,
            "Error",
            "Logging",
            strip(exhaustedMsg),
          ) === 1 &&
        countEvents(
            events,
            "Normal",
            "Logging",
            "Handler 'eventual_success_with_few_messages' succeeded.",
          ) === 1 &&
        countEvents(
            events,
            "Normal",
            "Logging",
            "Creation is processed: 1 succeeded; 3 failed.",
          ) ===
          1;
    },
    15_000,
    "Events about the failures",
  );

  await stopCleanly(op);
});

// ---------------------------------------------------------------------------------------------
// 04-events
// ---------------------------------------------------------------------------------------------

Deno.test("04-events: explicit Events of all kinds about the object", opts, async () => {
  await using fx = await fixture("ex04");
  const { client, namespace } = fx;
  await using op = await runExample("04-events", namespace);
  const created = await createExampleObject(client, namespace);
  const uid = created.metadata!.uid!;

  await waitFor(op, /Creation is processed: 1 succeeded; 0 failed\./);
  assert.equal(linesWith(op, `${ref(namespace)} Handler 'create_fn' succeeded.`).length, 1);

  const events = await eventually(
    async () => {
      const events = await eventsAbout(client, namespace, uid);
      const done = countEvents(events, "SomeType", "SomeReason", "Some message") === 1 &&
        countEvents(events, "Normal", "SomeReason", "Some message") === 1 &&
        countEvents(events, "Warning", "SomeReason", "Some message") === 1 &&
        countEvents(events, "Error", "SomeReason", /^Some exception:.* Exception text\.$/) === 1;
      return done ? events : undefined;
    },
    15_000,
    "the explicit Events",
  );
  for (const event of events) {
    assert.deepEqual(event.source, { component: "kopf" });
    assert.equal(event.involvedObject.apiVersion, "kopf.dev/v1");
    assert.equal(event.involvedObject.kind, "KopfExample");
    assert.equal(event.involvedObject.name, NAME);
    assert.equal(event.involvedObject.namespace, namespace);
  }

  // The handler returned nothing: no status; the essence is remembered; no finalizer needed.
  const body = await getObject(client, namespace);
  assert.deepEqual(body.status ?? {}, {});
  assert.deepEqual(lastHandled(body)?.spec, created.spec);
  assert.deepEqual(progressKeys(body), []);
  assert.deepEqual(body.metadata?.finalizers ?? [], []);

  // The log messages stay in the log: by default (settings.posting.loggers off, as in Kopf
  // 1.44+) they are not posted; the stop flushes the poster's queue, so none can come later.
  await stopCleanly(op);
  const after = await eventsAbout(client, namespace, uid);
  assert.deepEqual(
    after.filter((e) => e.reason === "Logging").map((e) => e.message),
    [],
    "no Events from log messages by default (K26-01)",
  );
  assert.equal(after.length, 4, JSON.stringify(after.map((e) => [e.type, e.reason, e.message])));
});

Deno.test({
  name: "04-events: exception() words its message as Kopf does",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex04b");
    const { client, namespace } = fx;
    await using op = await runExample("04-events", namespace);
    const created = await createExampleObject(client, namespace);
    const events = await eventually(
      async () => {
        const events = await eventsAbout(client, namespace, created.metadata!.uid!);
        return events.some((e) => e.type === "Error") ? events : undefined;
      },
      15_000,
      "the Error Event",
    );
    assert.equal(
      countEvents(events, "Error", "SomeReason", "Some exception: Exception text."),
      1,
      JSON.stringify(events.filter((e) => e.type === "Error").map((e) => e.message)),
    );
    await stopCleanly(op);
  },
});

// ---------------------------------------------------------------------------------------------
// 05-handlers
// ---------------------------------------------------------------------------------------------

Deno.test("05-handlers: create, update, field, resume and delete handlers", opts, async () => {
  await using fx = await fixture("ex05");
  const { client, namespace } = fx;

  // Creation: both create handlers in order, and the field handler for the new field.
  const op1 = await runExample("05-handlers", namespace);
  await using _op1 = op1;
  const created = await createExampleObject(client, namespace);
  await waitFor(op1, /Creation is processed: 3 succeeded; 0 failed\./);
  assert.equal(linesWith(op1, "CREATED 1st").length, 1);
  assert.equal(linesWith(op1, "CREATED 2nd").length, 1);
  assert.ok(lineIndex(op1, "CREATED 1st") < lineIndex(op1, "CREATED 2nd"));
  assert.deepEqual(linesWith(op1, "FIELD CHANGED:"), ["FIELD CHANGED: undefined -> value"]);
  assert.deepEqual(linesWith(op1, "RESUMED"), []);
  assert.deepEqual(linesWith(op1, "UPDATED"), []);

  // The delete handlers need the finalizer; the essence is remembered.
  let body = await waitIdle(client, namespace);
  assert.deepEqual(body.metadata?.finalizers, [FINALIZER]);
  assert.deepEqual(lastHandled(body)?.spec, created.spec);

  // Update: the update handler with the diff, and the field handler with old and new values.
  await client.api.patch(KOPFEXAMPLES, NAME, { spec: { field: "changed" } }, { namespace });
  await waitFor(op1, /Updating is processed: 2 succeeded; 0 failed\./);
  assert.deepEqual(linesWith(op1, "UPDATED"), [
    'UPDATED: [["change",["spec","field"],"value","changed"]]',
  ]);
  assert.deepEqual(linesWith(op1, "FIELD CHANGED:"), [
    "FIELD CHANGED: undefined -> value",
    "FIELD CHANGED: value -> changed",
  ]);
  body = await eventually(
    async () => {
      const b = await getObject(client, namespace);
      return lastHandled(b)?.spec?.field === "changed" && progressKeys(b).length === 0
        ? b
        : undefined;
    },
    10_000,
    "the update to be stored",
  );
  assert.deepEqual(body.metadata?.finalizers, [FINALIZER]);
  await stopCleanly(op1);
  assert.deepEqual(linesWith(op1, "RESUMED"), []);

  // A restart: the existing object is resumed, not created or updated again.
  await using op2 = await runExample("05-handlers", namespace);
  await waitFor(op2, /Resuming is processed: 2 succeeded; 0 failed\./);
  assert.equal(linesWith(op2, "RESUMED 1st").length, 1);
  assert.equal(linesWith(op2, "RESUMED 2nd").length, 1);
  assert.ok(lineIndex(op2, "RESUMED 1st") < lineIndex(op2, "RESUMED 2nd"));
  await waitIdle(client, namespace);
  assert.deepEqual(linesWith(op2, "CREATED"), []);
  assert.deepEqual(linesWith(op2, "UPDATED"), []);
  assert.deepEqual(linesWith(op2, "FIELD CHANGED"), []);

  // Deletion: both delete handlers, then the finalizer goes and the object with it.
  await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
  await waitFor(op2, /Deletion is processed: 2 succeeded; 0 failed\./);
  assert.ok(lineIndex(op2, "DELETED 1st") >= 0);
  assert.ok(lineIndex(op2, "DELETED 1st") < lineIndex(op2, "DELETED 2nd"));
  await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "deletion");
  await stopCleanly(op2);
  assert.equal(linesWith(op2, "DELETED 1st").length, 1);
  assert.equal(linesWith(op2, "DELETED 2nd").length, 1);
});

Deno.test({
  name: "05-handlers: a deletion requested while a handler runs is not lost",
  ...opts,
  fn: async () => {
    await using fx = await fixture("ex05r");
    const { client, namespace } = fx;
    // 05-handlers plus one create handler slow enough to delete the object while it runs.
    await using dir = await tempDir();
    const file = `${dir.path}/slow.ts`;
    const mod = new URL("../mod.ts", import.meta.url).href;
    const example = new URL("../examples/05-handlers/example.ts", import.meta.url).href;
    await Deno.writeTextFile(
      file,
      `import { on } from "${mod}";\nimport "${example}";\n` +
        `on.create("kopfexamples", async function slow_create() {\n` +
        `  await new Promise((resolve) => setTimeout(resolve, 1500));\n});\n`,
    );
    await using op = await spawnOperator([file, "--verbose", "-n", namespace]);
    try {
      await waitFor(op, /Watching kopfexamples/);
      await createExampleObject(client, namespace);
      await waitFor(op, /Handler 'field_fn\/spec\.field' succeeded\./);
      await sleep(500); // slow_create runs now
      await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
      await waitFor(op, /Creation is processed: 4 succeeded; 0 failed\./);
      await waitFor(op, /Deletion is processed: 2 succeeded; 0 failed\./, 10_000);
      await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "deletion");
      await stopCleanly(op);
    } finally {
      await op.stop();
      await client.api.patch(KOPFEXAMPLES, NAME, { metadata: { finalizers: [] } }, { namespace })
        .catch(() => {});
    }
  },
});

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
