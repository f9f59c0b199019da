/**
 * Subtle behaviours (features.md §32) of event handlers, checked end to end against a real API
 * server the way a user would check them: they see the initial listing (type null) and every raw
 * watch-event, their errors are logged and ignored (never retried, no Events posted), and their
 * results go to the object's status without rewriting the same result in a loop.
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { eventually, KOPFEXAMPLES, sleep, testClient } from "./_support.ts";
import {
  eventsOf,
  example,
  exampleNamespace,
  logged,
  opts,
  read,
  readWhen,
  startReady,
  statusOf,
} from "./_behaviour.ts";

Deno.test(
  "SUB-35/SUB-40: event handlers see the listing (type null) and raw events; errors are ignored",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "events");
    await client.api.create(KOPFEXAMPLES, example("pre"), { namespace });
    const seen: Array<[string, string | null]> = [];
    let broken = 0;
    await using op = await startReady(namespace, (registry) => {
      on.event("kopfexamples", { registry, id: "event_fn" }, ({ name, type }) => {
        seen.push([name!, type]);
      });
      on.event("kopfexamples", { registry, id: "broken_fn" }, () => {
        broken++;
        throw new Error("event handler bug");
      });
    });
    await eventually(() => seen.some(([n]) => n === "pre"), 10_000, "the listing");
    assert.deepEqual(seen, [["pre", null]], "a listed object comes with type null");

    await client.api.create(KOPFEXAMPLES, example("b"), { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "ADDED"));
    await client.api.patch(KOPFEXAMPLES, "b", { spec: { x: 1 } }, { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "MODIFIED"));
    const uid = (await read(client, namespace, "b")).metadata!.uid!;
    await client.api.delete(KOPFEXAMPLES, "b", { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "DELETED"));
    await sleep(500);
    assert.deepEqual(seen, [["pre", null], ["b", "ADDED"], ["b", "MODIFIED"], ["b", "DELETED"]]);
    assert.equal(broken, 4, "the failing handler ran once per event, never retried");
    assert.equal(
      logged(op, /^Handler 'broken_fn' failed with an exception and will ignore it: /).length,
      4,
    );
    assert.equal(op.client.counters.writes({ resource: "kopfexamples" }), 0, "nothing to write");
    // Their messages stay in the log: event handlers do not post Events.
    const posted = await eventsOf(client, namespace, uid);
    assert.equal(posted.filter((e) => /broken_fn/.test(e.message)).length, 0, `${posted}`);
    assert.ok(!op.logs.some((e) => e.level === "critical"));
  },
);

Deno.test(
  "SUB-35/SUB-78: an event handler's result goes to status; the same result is not rewritten in a loop",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "evresult");
    const seen: Array<[string, string | null]> = [];
    await using op = await startReady(namespace, (registry) => {
      on.event("kopfexamples", { registry, id: "event_fn" }, ({ name, type }) => {
        seen.push([name!, type]);
        return { seen: true };
      });
    });
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const body = await readWhen(client, namespace, "a", (body) => statusOf(body).event_fn);
    assert.deepEqual(statusOf(body).event_fn, { seen: true });
    await sleep(1_000);
    const settled = { calls: seen.length, writes: op.client.counters.writes() };
    await sleep(1_000);
    assert.deepEqual(
      { calls: seen.length, writes: op.client.counters.writes() },
      settled,
      `no feedback loop: ${seen.length} calls so far`,
    );
    assert.ok(seen.length <= 3, `the handler ran ${seen.length} times for 2 events`);
  },
);
