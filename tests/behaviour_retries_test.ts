/**
 * Subtle behaviours (features.md §32) of progress, retries and delays, checked end to end against
 * a real API server the way a user would check them: a handler's progress record (its annotation)
 * across an operator restart, the limits of `retries` and `PermanentError`, and a delay that waits
 * in memory (no touch-patches, no reads); the object's status, diff-base and Events, the
 * operator's log, and the requests the operator made (its own client's counters).
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import { on } from "../core/api/on.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { eventually, KOPFEXAMPLES, LAST_HANDLED, sleep, testClient } from "./_support.ts";
import {
  type CountersSnapshot,
  example,
  exampleNamespace,
  fast,
  logged,
  opts,
  postLogMessages,
  progressOf,
  read,
  readWhen,
  requestsSince,
  startReady,
  statusOf,
  waitForEvent,
} from "./_behaviour.ts";

Deno.test(
  "SUB-02/SUB-03: a retry survives an operator restart: the stored delay is honoured, then records are purged",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "restart");
    const attempts: Array<{ at: number; retry: number; process: number }> = [];
    let process = 1;
    const setup = (registry: OperatorRegistry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ retry }) => {
        attempts.push({ at: Date.now(), retry, process });
        if (attempts.length === 1) throw new TemporaryError("not yet", { delay: 3 });
        return { message: "done" };
      });
    };

    const first = await startReady(namespace, setup, fast(postLogMessages));
    await client.api.create(KOPFEXAMPLES, example("a", { field: "value" }), { namespace });
    const record = await eventually(
      async () => progressOf(await read(client, namespace, "a"), "create_fn"),
      20_000,
      "the progress record of the first attempt",
    );
    await first.stop();
    assert.equal(attempts.length, 1);
    assert.equal(record.retries, 1);
    assert.equal(record.purpose, "create");
    assert.equal(record.success, false);
    assert.equal(record.failure, false);
    assert.equal(record.message, "not yet");
    const delayed = Date.parse(record.delayed!);
    const started = Date.parse(record.started!);
    assert.ok(delayed - started >= 2_900 && delayed - started < 4_000, `${JSON.stringify(record)}`);

    process = 2;
    await using second = await startReady(namespace, setup, fast(postLogMessages));
    const startedBeforeDue = Date.now() < delayed;
    const done = await readWhen(
      client,
      namespace,
      "a",
      (body) => body.metadata?.annotations?.[LAST_HANDLED],
      20_000,
      "the diff-base after the retry",
    );

    assert.equal(attempts.length, 2, JSON.stringify(attempts));
    assert.equal(attempts[1]!.process, 2);
    assert.equal(attempts[1]!.retry, 1, "the new process continues the retry count");
    assert.ok(startedBeforeDue, "the second operator started while the delay was pending");
    // The stored `delayed` has millisecond precision; allow for clock rounding only.
    assert.ok(
      attempts[1]!.at >= delayed - 5,
      `retried ${delayed - attempts[1]!.at} ms before the stored delay`,
    );
    assert.equal(progressOf(done, "create_fn"), undefined, "the record is purged");
    assert.equal(done.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"field":"value"}}\n');
    assert.deepEqual(statusOf(done).create_fn, { message: "done" });
    await second.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/);

    const uid = done.metadata!.uid!;
    const failed = await waitForEvent(client, namespace, uid, /create_fn' failed temporarily/);
    assert.equal(failed.message, "Handler 'create_fn' failed temporarily: not yet");
    assert.equal(failed.type, "Error");
    await waitForEvent(client, namespace, uid, /^Handler 'create_fn' succeeded\.$/);
  },
);

Deno.test(
  "SUB-41/SUB-11: retries=2 allows exactly 2 attempts, PermanentError 1; the object is then handled",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "retries");
    const calls = { flaky: 0, doomed: 0, update: 0 };
    await using op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "flaky", retries: 2, backoff: 1 }, () => {
        calls.flaky++;
        throw new Error("boom");
      });
      on.create("kopfexamples", { registry, id: "doomed" }, () => {
        calls.doomed++;
        throw new PermanentError("no way");
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, () => {
        calls.update++;
      });
    }, fast(postLogMessages));
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await op.waitForLog(/^Creation is processed: 0 succeeded; 2 failed\.$/, 20_000);
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 0 });
    assert.equal(
      logged(op, /^Handler 'flaky' failed with an exception and will try again in 1 seconds: boom$/)
        .length,
      1,
    );
    // As Kopf: the second failure ends it at once, as a third attempt would exceed the retries.
    assert.deepEqual(logged(op, /failed permanently|has exceeded|will stop now/), [
      "Handler 'doomed' failed permanently: no way",
      "Handler 'flaky' failed with an exception and will stop now " +
      "(it would exceed 2 retries on the next attempt): boom",
    ]);

    const handled = await readWhen(
      client,
      namespace,
      "a",
      (body) => body.metadata?.annotations?.[LAST_HANDLED],
      10_000,
      "the diff-base",
    );
    assert.equal(progressOf(handled, "flaky"), undefined);
    assert.equal(progressOf(handled, "doomed"), undefined);
    assert.equal(statusOf(handled).flaky, undefined, "failed attempts deliver no result");
    const uid = handled.metadata!.uid!;
    const doomed = await waitForEvent(client, namespace, uid, /doomed' failed permanently/);
    assert.equal(doomed.type, "Error");
    await waitForEvent(client, namespace, uid, /would exceed 2 retries/);

    await sleep(2_000); // past the backoff: nothing is retried any more
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 0 });

    // The next essential change is an update, not a second attempt at creation.
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    await eventually(() => calls.update === 1, 10_000, "the update handler");
    await sleep(500);
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 1 });
  },
);

Deno.test(
  "SUB-05 (differs from Kopf): a delayed handler waits in memory: no touch-patches, no reads",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "inmemory");
    const attempts: number[] = [];
    const delay: {
      before?: CountersSnapshot;
      window?: ReturnType<typeof requestsSince>;
    } = {};
    await using op = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {
        attempts.push(Date.now());
        if (attempts.length === 1) throw new TemporaryError("wait", { delay: 3 });
        if (delay.before) delay.window = requestsSince(op, delay.before);
        return { ok: true };
      });
    });
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const delayedBody = await readWhen(
      client,
      namespace,
      "a",
      (body) => progressOf(body, "create_fn"),
      20_000,
      "the progress record",
    );
    await eventually(() => op.client.counters.writes({ resource: "kopfexamples" }) >= 1);
    delay.before = op.client.counters.snapshot();

    // Watch the object during the delay: its resourceVersion must not move.
    const versions = new Set<string>();
    while (attempts.length < 2) {
      const body = await read(client, namespace, "a");
      if (attempts.length < 2) versions.add(body.metadata!.resourceVersion!);
      assert.equal(
        Object.keys(body.metadata?.annotations ?? {}).filter((k) => k.includes("dummy")).length,
        0,
        "no touch-dummy annotations",
      );
      await sleep(200);
    }
    assert.deepEqual([...versions], [delayedBody.metadata!.resourceVersion!]);
    const window = delay.window;
    assert.ok(window, "the retry ran after the snapshot");
    assert.equal(window.writes, 0, `writes during the delay: ${window.all}`);
    assert.equal(window.reads, 0, `reads during the delay: ${window.all}`);
    assert.ok(
      attempts[1]! - attempts[0]! >= 2_900,
      `retried after ${attempts[1]! - attempts[0]!} ms`,
    );
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
  },
);
