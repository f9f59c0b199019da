/**
 * `on.reconcile` with peering and leader election, on the real control plane: an operator paused
 * by a higher-priority peer (`kopf freeze`) reconciles nothing and catches up once at the resume;
 * under leader election the standby reconciles nothing while the leader does, and takes over the
 * reconciles (every object once) when the leader goes.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { reconcile } from "../core/api/reconciling.ts";
import { NAMESPACED_PEERINGS } from "../core/engines/coordination/peering.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A reconcile handler counting its runs per object. */
function counting(runs: Map<string, number>): (registry: OperatorRegistry) => void {
  return (registry) =>
    reconcile("kopfexamples", { registry }, ({ name }) => {
      runs.set(name, (runs.get(name) ?? 0) + 1);
    });
}

Deno.test(
  "on.reconcile under peering: paused by a higher-priority peer it reconciles nothing, and at the resume each object changed meanwhile once (X-REC-17)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    await applyCrds(client, "crds/peering.yaml");
    const namespace = await testNamespace("rec-peer");
    await client.api.create(NAMESPACED_PEERINGS, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfPeering",
      metadata: { name: "default" },
    }, { namespace });
    const runs = new Map<string, number>();
    await using op = await startOperator(counting(runs), {
      namespaces: [namespace],
      standalone: false,
      priority: 10,
      identity: "reconciler",
      settings: createSettings({ posting: { enabled: false }, peering: { lifetime: 60 } }),
    });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("a"), { namespace });
    await eventually(() => runs.get("a") === 1, 30_000, "a reconciled");

    const out: string[] = [];
    const scope = ["-n", namespace, "--kubeconfig", await kubeconfigPath(), "--id", "tester"];
    const write = (line: string) => out.push(line);
    assert.equal(await main(["freeze", ...scope, "--lifetime", "60"], { write }), 0, out.join());
    await op.waitForLog(/Pausing operations in favour of tester \(priority 100\)/);
    await client.api.create(KOPFEXAMPLES, kex("b"), { namespace });
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { changed: 1 } }, { namespace });
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { changed: 2 } }, { namespace });
    await sleep(1_500); // a negative check: give a wrongly running reconcile time to happen
    assert.deepEqual(Object.fromEntries(runs), { a: 1 }, "nothing while paused");

    assert.equal(await main(["resume", ...scope], { write }), 0, out.join());
    await op.waitForLog(/Resuming operations after the pause/);
    await eventually(() => runs.get("b") === 1 && runs.get("a") === 2, 30_000, "the catch-up");
    await sleep(1_000);
    assert.deepEqual(Object.fromEntries([...runs].sort()), { a: 2, b: 1 });
  },
);

Deno.test(
  "on.reconcile under leader election: the standby reconciles nothing and sends only Lease requests while the leader reconciles; when the leader goes, it reconciles every object once (X-REC-17)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-lead");
    const settings = (identity: string) => {
      const s = createSettings({
        posting: { enabled: false },
        leadership: {
          enabled: true,
          namespace,
          leaseDuration: 4,
          renewDeadline: 3,
          retryPeriod: 0.5,
        },
      });
      s.leadership.identity = identity;
      return s;
    };
    const leaderRuns = new Map<string, number>();
    const standbyRuns = new Map<string, number>();
    const leader = await startOperator(counting(leaderRuns), {
      namespaces: [namespace],
      settings: settings("replica-a"),
    });
    try {
      await leader.waitForLog(/Leading: acquired Lease/);
      await using standby = await startOperator(counting(standbyRuns), {
        namespaces: [namespace],
        settings: settings("replica-b"),
      });
      await standby.waitForLog(/Standing by: Lease .* is held by replica-a/);
      const before = standby.client.counters.snapshot();
      await leader.ready;
      for (const name of ["x", "y"]) {
        await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
      }
      await client.api.patch(KOPFEXAMPLES, "x", { spec: { changed: 1 } }, { namespace });
      await eventually(() => leaderRuns.get("y") === 1, 30_000, "the leader reconciles y");
      await eventually(() => leaderRuns.get("x") === 2, 30_000, "the leader reconciles x twice");
      await sleep(1_000); // a few standby rounds
      assert.deepEqual(Object.fromEntries(standbyRuns), {}, "the standby reconciles nothing");
      const requests = standby.client.counters.since(before);
      assert.ok(requests.count({ resource: "leases" }) > 0, "the standby keeps trying");
      assert.equal(requests.count(), requests.count({ resource: "leases" }), "only Leases");

      await leader.stop();
      await standby.waitForLog(/Leading: acquired Lease/);
      await eventually(
        () => standbyRuns.get("x") === 1 && standbyRuns.get("y") === 1,
        30_000,
        "the new leader reconciles every object",
      );
      await sleep(1_000);
      assert.deepEqual(Object.fromEntries([...standbyRuns].sort()), { x: 1, y: 1 });
      assert.deepEqual(Object.fromEntries([...leaderRuns].sort()), { x: 2, y: 1 });
    } finally {
      await leader.stop();
    }
  },
);
