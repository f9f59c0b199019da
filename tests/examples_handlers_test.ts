/**
 * End-to-end tests of the handler examples — errors and retries (03), Events (04), the handler
 * kinds (05). Each runs `examples/NN-name/example.ts` with the real CLI
 * (`cli.ts run … --verbose -n <namespace>`) as a subprocess against the shared control plane,
 * does what a user would do with kubectl, and checks what a user would look at: the object's
 * status, annotations and finalizers, its Events, and the operator's log lines. The examples of
 * sub-handlers, raw events, built-in resources and filters: tests/examples_kinds_test.ts.
 */

import assert from "node:assert/strict";
import { spawnOperator } from "./_operator.ts";
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
  progressKeys,
  waitIdle,
} from "./_example_checks.ts";
import { eventually, KOPFEXAMPLES, sleep, tempDir } from "./_support.ts";

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
