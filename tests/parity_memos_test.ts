/**
 * Memos, as docs/parity.md lists them against Kopf's documentation: one memo per object, shared
 * by its handlers and daemons, a new one for a re-created object (MEMO-02), custom memo classes
 * via embedding (MEMO-05, EMB-11), and nothing persisted across restarts (MEMO-06). Against the
 * real control plane.
 */

import assert from "node:assert/strict";
import { start } from "../core/api/embedding.ts";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { Memo } from "../core/intents/contexts.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { startOperator } from "./_operator.ts";
import { gone } from "./_parity.ts";
import { applyCrds, eventually, kex, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "one memo per object, shared by all its handlers and daemons; a deleted and re-created object gets a new one (MEMO-02)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-object");
    /** The memos each handler saw, by object uid. */
    const memos = new Map<string, Map<string, Set<Memo>>>();
    const saw = (handler: string, uid: string, memo: Memo) => {
      const byHandler = memos.get(uid) ?? new Map<string, Set<Memo>>();
      memos.set(uid, byHandler);
      byHandler.set(handler, (byHandler.get(handler) ?? new Set()).add(memo));
    };
    const counts: Array<{ name: string; uid: string; count: unknown }> = [];
    await using op = await startOperator((registry) => {
      on.event("kopfexamples", { registry }, function pinged({ memo, uid, name, type }) {
        if (type === "DELETED") return;
        saw("event", uid, memo);
        memo.counter = ((memo.counter as number | undefined) ?? 0) + 1;
        counts.push({ name, uid, count: memo.counter });
      });
      on.create("kopfexamples", { registry }, function created({ memo, uid }) {
        saw("create", uid, memo);
        memo.createdHere = uid;
      });
      on.update("kopfexamples", { registry }, function updated({ memo, uid }) {
        saw("update", uid, memo);
      });
      on.delete("kopfexamples", { registry }, function deleted({ memo, uid }) {
        saw("delete", uid, memo);
      });
      daemon("kopfexamples", { registry }, async function watcher({ memo, uid, stopped }) {
        saw("daemon", uid, memo);
        await new Promise((resolve) => stopped.addEventListener("abort", resolve));
        saw("daemon", uid, memo);
      });
    }, { namespaces: [namespace], memo: { base: true } });
    await op.ready;
    const handled = (uid: string, handlers: string[]) =>
      eventually(
        () => handlers.every((h) => memos.get(uid)?.has(h)),
        15_000,
        `${handlers.join(", ")} of ${uid}`,
      );

    const a1 = (await client.api.create(KOPFEXAMPLES, kex("a", { v: 1 }), { namespace }))
      .metadata!.uid!;
    const b = (await client.api.create(KOPFEXAMPLES, kex("b"), { namespace })).metadata!.uid!;
    await handled(a1, ["event", "create", "daemon"]);
    await handled(b, ["event", "create", "daemon"]);
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { v: 2 } }, { namespace });
    await handled(a1, ["update"]);
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await gone(client, KOPFEXAMPLES, "a", namespace);
    await handled(a1, ["delete"]);

    // Every handler and the daemon of "a" saw the very same memo (the daemon before and after
    // its stop, the delete handler at the end); "b" has its own.
    const all = (uid: string) => new Set([...memos.get(uid)!.values()].flatMap((s) => [...s]));
    assert.equal(all(a1).size, 1, "one memo for all handlers of a");
    assert.deepEqual([...memos.get(a1)!.keys()].sort(), [
      "create",
      "daemon",
      "delete",
      "event",
      "update",
    ]);
    const memoA1 = [...all(a1)][0]!;
    const memoB = [...all(b)][0]!;
    assert.equal(all(b).size, 1);
    assert.notEqual(memoA1, memoB, "another object: another memo");
    assert.equal(memoA1.createdHere, a1);
    assert.equal(memoB.createdHere, b);
    assert.equal(memoA1.base, true, "from the operator's memo");

    // Re-created with the same name: a new object, a new memo (the counter starts again).
    const a2 = (await client.api.create(KOPFEXAMPLES, kex("a"), { namespace })).metadata!.uid!;
    await handled(a2, ["event", "create", "daemon"]);
    assert.notEqual(a2, a1);
    const memoA2 = [...all(a2)][0]!;
    assert.equal(all(a2).size, 1);
    assert.notEqual(memoA2, memoA1);
    assert.equal(memoA2.createdHere, a2);
    assert.deepEqual(counts.find((c) => c.uid === a2)?.count, 1, "nothing carried over");
    assert.ok((memoA1.counter as number) > 1, "the first one counted its own events");
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await client.api.delete(KOPFEXAMPLES, "b", { namespace });
    await gone(client, KOPFEXAMPLES, "a", namespace);
    await gone(client, KOPFEXAMPLES, "b", namespace);
  },
);

Deno.test(
  "memos are not persisted: a restarted operator starts with fresh memos, and nothing of them is stored on the object (MEMO-06)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-restart");
    const marker = `in-memory-${crypto.randomUUID()}`;
    const firstSight: unknown[] = [];
    const resumed: unknown[] = [];
    const setup = (registry: OperatorRegistry) => {
      on.event("kopfexamples", { registry }, function remember({ memo }) {
        if (!("seen" in memo)) firstSight.push({ ...memo });
        memo.seen = marker;
      });
      on.create("kopfexamples", { registry }, function created({ memo }) {
        memo.created = marker;
      });
      on.resume("kopfexamples", { registry }, function continued({ memo }) {
        resumed.push({ ...memo });
      });
    };
    {
      await using op = await startOperator(setup, { namespaces: [namespace] });
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("m1"), { namespace });
      await op.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/);
    }
    assert.deepEqual(firstSight, [{}]);
    const stored = await client.api.get(KOPFEXAMPLES, "m1", { namespace });
    assert.equal(JSON.stringify(stored).includes(marker), false, "no memo value on the object");

    {
      await using op = await startOperator(setup, { namespaces: [namespace] });
      await op.ready;
      await op.waitForLog(/^Resuming is processed: 1 succeeded; 0 failed\.$/);
    }
    // The second process knows nothing of the first one's memo: not the raw-event handler's
    // value, not the create handler's.
    assert.equal(firstSight.length, 2);
    assert.deepEqual(firstSight[1], {}, "the event handler starts with an empty memo");
    assert.deepEqual(resumed, [{ seen: marker }], "only what this process put there");
  },
);

Deno.test(
  "custom memo classes via embedding: each object's memo is a shallow copy that keeps the class and its methods; mutable values stay shared (MEMO-05, EMB-11)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-custom");
    class CustomContext {
      constructor(
        public createTpl: string,
        public deleteTpl: string,
        public readonly greeted: string[] = [],
      ) {}
      render(template: string, name: string): string {
        return template.replace("{name}", name);
      }
    }
    const operatorMemo = new CustomContext("Hello, {name}!", "Good bye, {name}!");
    const seen: Array<{ handler: string; memo: CustomContext; line: string }> = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, function prepare({ memo }) {
      seen.push({ handler: "startup", memo: memo as unknown as CustomContext, line: "" });
    });
    on.create("kopfexamples", { registry }, function create_fn({ memo, name }) {
      const custom = memo as unknown as CustomContext;
      const line = custom.render(custom.createTpl, name);
      custom.greeted.push(line); // a shared mutable value
      custom.createTpl = "Changed for {name} only"; // a per-object field
      seen.push({ handler: "create", memo: custom, line });
    });
    on.delete("kopfexamples", { registry }, function delete_fn({ memo, name }) {
      const custom = memo as unknown as CustomContext;
      seen.push({ handler: "delete", memo: custom, line: custom.render(custom.deleteTpl, name) });
    });
    const plane = await sharedControlPlane();
    using own = new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
    await using op = start({
      registry,
      namespaces: [namespace],
      client: own,
      standalone: true,
      settings: createSettings({ posting: { enabled: false } }),
      memo: operatorMemo as unknown as Memo,
    });
    await op.ready;
    for (const name of ["x", "y"]) {
      await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
    }
    await eventually(() => seen.filter((s) => s.handler === "create").length === 2, 15_000);
    for (const name of ["x", "y"]) await client.api.delete(KOPFEXAMPLES, name, { namespace });
    await eventually(() => seen.filter((s) => s.handler === "delete").length === 2, 15_000);

    // Activities get the operator's memo itself.
    assert.equal(seen.find((s) => s.handler === "startup")?.memo, operatorMemo);
    const creates = seen.filter((s) => s.handler === "create");
    const deletes = seen.filter((s) => s.handler === "delete");
    assert.deepEqual(creates.map((s) => s.line).sort(), ["Hello, x!", "Hello, y!"]);
    assert.deepEqual(deletes.map((s) => s.line).sort(), ["Good bye, x!", "Good bye, y!"]);
    for (const { memo } of [...creates, ...deletes]) {
      assert.ok(memo instanceof CustomContext, "the class is kept, with its methods");
      assert.notEqual(memo, operatorMemo, "a per-object copy (no __copy__ hook to opt out)");
      assert.equal(memo.greeted, operatorMemo.greeted, "shallow: the same array");
      assert.equal(memo.createTpl, "Changed for {name} only", "per-object fields stay per object");
    }
    assert.notEqual(creates[0]!.memo, creates[1]!.memo, "each object its own copy");
    assert.equal(operatorMemo.createTpl, "Hello, {name}!", "the operator's memo is untouched");
    assert.deepEqual(operatorMemo.greeted.toSorted(), ["Hello, x!", "Hello, y!"]);
    await gone(client, KOPFEXAMPLES, "x", namespace);
    await gone(client, KOPFEXAMPLES, "y", namespace);
  },
);
