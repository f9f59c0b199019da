/**
 * Errors in `on.reconcile` handlers on the real control plane: a `PermanentError` is not retried
 * (logged, and posted as an Event with `settings.posting.loggers`), an arbitrary error is retried
 * with the per-object exponential backoff until it succeeds, and the handler options `retries`,
 * `errors` and `backoff` change that; a failing cleanup under `finalizer: true` is retried and
 * keeps the finalizer until it succeeds.
 */

import assert from "node:assert/strict";
import { PermanentError } from "../core/actions/execution.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { ApiError } from "../core/client/errors.ts";
import { reconcile } from "../core/api/reconciling.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const EVENTS: ResourceRef = { group: "", version: "v1", plural: "events", namespaced: true };

/** Runs per "handler:object", with the time and `ctx.retry` of each. */
class Runs {
  readonly #runs = new Map<string, { at: number; retry: number }[]>();
  add(key: string, retry: number): number {
    const list = this.#runs.get(key) ?? [];
    list.push({ at: performance.now(), retry });
    this.#runs.set(key, list);
    return list.length;
  }
  of(key: string): { at: number; retry: number }[] {
    return this.#runs.get(key) ?? [];
  }
  counts(): Record<string, number> {
    return Object.fromEntries([...this.#runs].map(([k, v]) => [k, v.length]).sort());
  }
}

/**
 * Five handlers, each failing in its own way for its own object (and doing nothing for others):
 * `plain` (defaults) throws a PermanentError for "permanent" and an arbitrary error three times
 * for "flaky"; `limited` (`retries: 3`) always fails for "limited"; `strict`
 * (`errors: "permanent"`) and `lenient` (`errors: "ignored"`) fail once for their objects;
 * `fixed` (`backoff: 0.4`) fails twice for "fixed".
 */
function handlers(runs: Runs): (registry: OperatorRegistry) => void {
  return (registry) => {
    reconcile("kopfexamples", { registry, id: "plain" }, ({ name, retry }) => {
      if (name === "permanent") {
        runs.add(`plain:${name}`, retry);
        throw new PermanentError("no way");
      }
      if (name === "flaky" && runs.add(`plain:${name}`, retry) <= 3) {
        throw new Error(`boom ${retry}`);
      }
    });
    reconcile("kopfexamples", { registry, id: "limited", retries: 3 }, ({ name, retry }) => {
      if (name !== "limited") return;
      runs.add(`limited:${name}`, retry);
      throw new Error("always");
    });
    reconcile("kopfexamples", { registry, id: "strict", errors: "permanent" }, ({ name }) => {
      if (name !== "strict") return;
      runs.add(`strict:${name}`, 0);
      throw new Error("once is enough");
    });
    reconcile("kopfexamples", { registry, id: "lenient", errors: "ignored" }, ({ name }) => {
      if (name !== "lenient") return;
      runs.add(`lenient:${name}`, 0);
      throw new Error("never mind");
    });
    reconcile("kopfexamples", { registry, id: "fixed", backoff: 0.4 }, ({ name, retry }) => {
      if (name === "fixed" && runs.add(`fixed:${name}`, retry) <= 2) throw new Error("later");
    });
  };
}

function messages(logs: readonly LogEntry[], object: string): string[] {
  return logs.filter((e) => e.object?.name === object && e.level === "error").map((e) => e.message);
}

Deno.test(
  "on.reconcile errors: PermanentError is not retried (logged and posted), an arbitrary error is retried with exponential backoff until it succeeds, retries/errors/backoff options apply; the next change tries again (X-REC-15)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-err");
    const runs = new Runs();
    await using op = await startOperator(handlers(runs), {
      namespaces: [namespace],
      settings: createSettings({ posting: { aggregationWindow: 0.2, loggers: true } }),
    });
    await op.ready;
    for (const name of ["permanent", "flaky", "limited", "strict", "lenient", "fixed"]) {
      await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
    }
    await eventually(() => runs.of("plain:flaky").length === 4, 20_000, "flaky: three retries");
    await eventually(() => runs.of("limited:limited").length === 3, 20_000, "limited: 3 attempts");
    await eventually(() => runs.of("fixed:fixed").length === 3, 20_000, "fixed: two retries");
    await sleep(1_500); // further runs, if any, would come now (the backoff is 5 ms doubling)
    assert.deepEqual(runs.counts(), {
      "fixed:fixed": 3,
      "lenient:lenient": 1,
      "limited:limited": 3,
      "plain:flaky": 4,
      "plain:permanent": 1,
      "strict:strict": 1,
    });

    // An arbitrary error: retried with the per-object backoff (5 ms, doubling), retry counted.
    assert.deepEqual(runs.of("plain:flaky").map((r) => r.retry), [0, 1, 2, 3]);
    assert.deepEqual(messages(op.logs, "flaky"), [
      "Reconcile handler 'plain' failed with an exception: boom 0 (retrying in 0.005s)",
      "Reconcile handler 'plain' failed with an exception: boom 1 (retrying in 0.010s)",
      "Reconcile handler 'plain' failed with an exception: boom 2 (retrying in 0.020s)",
    ]);
    assert.deepEqual(messages(op.logs, "permanent"), [
      "Reconcile handler 'plain' failed permanently: no way",
    ]);
    assert.deepEqual(messages(op.logs, "limited").slice(-1), [
      "Reconcile handler 'limited' failed 3 times; giving up until the next change: always",
    ]);
    assert.deepEqual(messages(op.logs, "strict"), [
      "Reconcile handler 'strict' failed permanently: once is enough",
    ]);
    assert.deepEqual(messages(op.logs, "lenient"), [
      "Reconcile handler 'lenient' failed with an exception; ignored: never mind",
    ]);
    // backoff: 0.4 s between the attempts instead of the exponential 5 ms, 10 ms.
    const fixed = runs.of("fixed:fixed").map((r) => r.at);
    for (let i = 1; i < fixed.length; i++) {
      assert.ok(
        fixed[i]! - fixed[i - 1]! >= 380,
        `attempt ${i} after ${fixed[i]! - fixed[i - 1]!} ms`,
      );
    }

    // Reported: the permanent failure is an Event on the object (posting.loggers is on).
    const event = await eventually(
      async () => {
        const { items } = await client.api.list<KubeObject & Record<string, unknown>>(EVENTS, {
          namespace,
        });
        return items.find((e) =>
          (e.involvedObject as { name?: string }).name === "permanent" &&
          String(e.message).includes("failed permanently")
        );
      },
      20_000,
      "the Event of the permanent failure",
    );
    assert.equal(event.type, "Error");
    assert.equal(event.message, "Reconcile handler 'plain' failed permanently: no way");

    // Given up until the next trigger: a change of the object tries again, as often as before.
    await client.api.patch(KOPFEXAMPLES, "permanent", { spec: { poke: 1 } }, { namespace });
    await client.api.patch(KOPFEXAMPLES, "limited", { spec: { poke: 1 } }, { namespace });
    await eventually(() => runs.of("plain:permanent").length === 2, 20_000, "permanent again");
    await eventually(() => runs.of("limited:limited").length === 6, 20_000, "limited again");
    await sleep(1_000);
    assert.equal(runs.of("plain:permanent").length, 2);
    assert.equal(runs.of("limited:limited").length, 6);
    assert.deepEqual(runs.of("limited:limited").map((r) => r.retry), [0, 1, 2, 0, 1, 2]);
  },
);

Deno.test(
  "on.reconcile with finalizer: a failing cleanup is retried and the object stays with its finalizer until the cleanup succeeds (X-REC-15)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-cleanup");
    let allowed = false;
    const cleanups: boolean[] = []; // one entry per deleting reconcile: whether it succeeded
    await using op = await startOperator(
      (registry) =>
        reconcile("kopfexamples", { registry, id: "cleaner", finalizer: true }, ({ deleting }) => {
          if (!deleting) return;
          cleanups.push(allowed);
          if (!allowed) throw new Error("the external resource is busy");
        }),
      { namespaces: [namespace] },
    );
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("stubborn"), { namespace });
    const finalizer = "reconcile.kopf.dev/cleaner";
    await eventually(
      async () =>
        (await client.api.get(KOPFEXAMPLES, "stubborn", { namespace })).metadata?.finalizers
          ?.includes(finalizer),
      20_000,
      "the finalizer",
    );
    await client.api.delete(KOPFEXAMPLES, "stubborn", { namespace });
    await eventually(() => cleanups.length >= 3, 20_000, "the cleanup retried");
    const held = await client.api.get(KOPFEXAMPLES, "stubborn", { namespace });
    assert.ok(held.metadata?.deletionTimestamp, "being deleted");
    assert.deepEqual(held.metadata?.finalizers, [finalizer], "held by the finalizer");
    assert.ok(cleanups.every((ok) => !ok));

    allowed = true;
    await eventually(
      () =>
        client.api.get(KOPFEXAMPLES, "stubborn", { namespace }).then(
          () => false,
          (e) => e instanceof ApiError && e.code === 404,
        ),
      20_000,
      "the object gone after the successful cleanup",
    );
    await sleep(500);
    assert.equal(cleanups.filter((ok) => ok).length, 1, "one successful cleanup, then no more");
    assert.equal(cleanups.at(-1), true);
    assert.ok(
      op.logs.some((e) =>
        e.object?.name === "stubborn" &&
        e.message === "Reconciled the deletion; the finalizer is removed."
      ),
    );
  },
);
