/**
 * Level-based reconciliation (`on.reconcile`) on the real control plane, with
 * kube-controller-manager (garbage collection, Deployment status): the handler of
 * examples/20-reconcile keeps a ConfigMap and a Deployment matching each KopfApp.
 */

import assert from "node:assert/strict";
import type { KubeClient } from "../core/client/client.ts";
import { ApiError } from "../core/client/errors.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { reconcile } from "../core/api/reconciling.ts";
import { OPTIONS, reconcileApp } from "../examples/20-reconcile/reconciler.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import { applyCrds, CONFIGMAPS, eventually, sleep, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const KOPFAPPS: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfapps",
  singular: "kopfapp",
  kind: "KopfApp",
  namespaced: true,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: ["status"],
  preferred: true,
};
const DEPLOYMENTS: Resource = {
  ...KOPFAPPS,
  group: "apps",
  plural: "deployments",
  singular: "deployment",
  kind: "Deployment",
};

interface Fixture extends AsyncDisposable {
  readonly client: KubeClient;
  readonly namespace: string;
  readonly op: InProcessOperator;
  /** Reconciles finished so far ("Reconciled <name>." log lines). */
  reconciled(): number;
}

/**
 * Example 20's handler in an operator of its own, for one test.
 * @param wrap Wraps the handler (to observe or hold a reconcile); none by default.
 */
async function fixture(
  wrap: (fn: typeof reconcileApp) => typeof reconcileApp = (fn) => fn,
): Promise<Fixture> {
  const client = await testClient();
  await applyCrds(client, "examples/20-reconcile/crd.yaml");
  const namespace = await testNamespace("rec");
  const op = await startOperator(
    (registry) => reconcile("kopfapps", { ...OPTIONS, registry }, wrap(reconcileApp)),
    { namespaces: [namespace] },
  );
  return {
    client,
    namespace,
    op,
    reconciled: () => op.logs.filter((e) => /^Reconciled /.test(e.message)).length,
    async [Symbol.asyncDispose]() {
      await op.stop();
      await deleteNamespace(await sharedControlPlane(), namespace).catch(() => {});
      client[Symbol.dispose]();
    },
  };
}

async function createApp(f: Fixture, name: string, message: string): Promise<void> {
  await f.client.api.create(KOPFAPPS, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfApp",
    metadata: { name },
    spec: { message, replicas: 0 },
  }, { namespace: f.namespace });
}

async function child(
  f: Fixture,
  resource: Resource,
  name: string,
): Promise<KubeObject | undefined> {
  try {
    return await f.client.api.get(resource, name, { namespace: f.namespace });
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return undefined;
    throw error;
  }
}

function envOf(deployment: KubeObject | undefined): unknown {
  const spec = deployment?.spec as
    | { template: { spec: { containers: Array<{ env?: Array<{ value: string }> }> } } }
    | undefined;
  return spec?.template.spec.containers[0]?.env?.[0]?.value;
}

/** Waits until the operator reconciled at least once more after `before`, then went quiet. */
async function settled(f: Fixture, before: number): Promise<void> {
  await eventually(() => f.reconciled() > before, 30_000, "a reconcile");
  // Deployment status updates by kube-controller-manager trigger more (write-free) reconciles:
  // wait until a second passes without one.
  for (let i = 0; i < 20; i++) {
    const seen = f.reconciled();
    await sleep(1000);
    if (f.reconciled() === seen) return;
  }
}

Deno.test(
  "on.reconcile: children are created, a deleted child is recreated, an edited child is reverted (X-REC-01, X-REC-02)",
  opts,
  async () => {
    await using f = await fixture();
    await createApp(f, "a1", "hello");
    const cm = await eventually(() => child(f, CONFIGMAPS, "a1-config"), 30_000, "the ConfigMap");
    assert.deepEqual(cm.data, { message: "hello" });
    assert.equal(cm.metadata?.ownerReferences?.[0]?.kind, "KopfApp");
    assert.equal(cm.metadata?.ownerReferences?.[0]?.controller, true);
    const deployment = await eventually(
      () => child(f, DEPLOYMENTS, "a1-app"),
      30_000,
      "Deployment",
    );
    assert.equal(envOf(deployment), "hello");
    const app = await eventually(
      async () => {
        const live = await f.client.api.get(KOPFAPPS, "a1", { namespace: f.namespace });
        const conditions = (live.status as { conditions?: Array<{ type: string; status: string }> })
          ?.conditions;
        return conditions?.find((c) => c.type === "Ready" && c.status === "True")
          ? live
          : undefined;
      },
      30_000,
      "the Ready condition",
    );
    assert.ok(app.metadata?.finalizers?.some((x) => x.startsWith("reconcile.kopf.dev/")));

    await f.client.api.delete(CONFIGMAPS, "a1-config", { namespace: f.namespace });
    const recreated = await eventually(
      async () => {
        const now = await child(f, CONFIGMAPS, "a1-config");
        return now && now.metadata?.uid !== cm.metadata?.uid ? now : undefined;
      },
      30_000,
      "the ConfigMap recreated",
    );
    assert.deepEqual(recreated.data, { message: "hello" });

    await f.client.api.patch(CONFIGMAPS, "a1-config", { data: { message: "tampered" } }, {
      namespace: f.namespace,
    });
    await eventually(
      async () => {
        const now = await child(f, CONFIGMAPS, "a1-config");
        return (now?.data as { message?: string } | undefined)?.message === "hello";
      },
      30_000,
      "the edit reverted",
    );
  },
);

Deno.test(
  "on.reconcile: a spec change updates each child once; a reconcile that changes nothing sends no write and no GET (X-REC-03, X-REC-05)",
  opts,
  async () => {
    await using f = await fixture();
    await createApp(f, "a2", "one");
    await eventually(() => child(f, DEPLOYMENTS, "a2-app"), 30_000, "the Deployment");
    await settled(f, 0);

    // Nothing to change: an annotation on the parent triggers a reconcile that finds all in place.
    const counters = f.op.client.counters;
    const writes = counters.writes();
    const gets = counters.count({ verb: "get" });
    const before = f.reconciled();
    await f.client.api.patch(KOPFAPPS, "a2", { metadata: { annotations: { poke: "1" } } }, {
      namespace: f.namespace,
    });
    await settled(f, before);
    assert.equal(
      counters.writes() - writes,
      0,
      JSON.stringify(f.op.logs.filter((e) => /Applying/.test(e.message)).map((e) => e.message)),
    );
    assert.equal(counters.count({ verb: "get" }) - gets, 0, "every read comes from the cache");

    // A spec change: one write per child.
    const cmWrites = counters.writes({ resource: "configmaps" });
    const deploymentWrites = counters.writes({ resource: "deployments" });
    const before2 = f.reconciled();
    await f.client.api.patch(KOPFAPPS, "a2", { spec: { message: "two" } }, {
      namespace: f.namespace,
    });
    await eventually(async () => envOf(await child(f, DEPLOYMENTS, "a2-app")) === "two", 30_000);
    assert.deepEqual((await child(f, CONFIGMAPS, "a2-config"))?.data, { message: "two" });
    await settled(f, before2);
    assert.equal(counters.writes({ resource: "configmaps" }) - cmWrites, 1);
    assert.equal(counters.writes({ resource: "deployments" }) - deploymentWrites, 1);
  },
);

Deno.test(
  "on.reconcile: a burst of 50 changes to one object while it is being reconciled coalesces into one more reconcile, one write per child (X-REC-04)",
  opts,
  async () => {
    // Reconciles of "a3" (the generation each saw); the first of the burst is held until the
    // operator's cache shows the burst's last change, so that the whole burst certainly arrives
    // while a reconcile runs: what the queue makes of it is the point. (Deployment status updates
    // by kube-controller-manager reconcile too, with no new generation: not counted.)
    const generations: number[] = [];
    const hold: { generation?: number; held?: boolean; lastVersion?: string } = {};
    await using f = await fixture((fn) => async (ctx) => {
      if (ctx.name !== "a3") return await fn(ctx);
      const generation = ctx.meta.generation as number;
      generations.push(generation);
      if (generation === hold.generation && !hold.held) {
        hold.held = true;
        await eventually(
          () =>
            hold.lastVersion !== undefined &&
            ctx.cache.get("kopfapps", "a3")?.metadata?.resourceVersion === hold.lastVersion,
          30_000,
          "the burst in the operator's cache",
        );
      }
      return await fn(ctx);
    });
    await createApp(f, "a3", "start");
    await eventually(() => child(f, CONFIGMAPS, "a3-config"), 30_000, "the ConfigMap");
    await settled(f, 0);
    const start = (await f.client.api.get(KOPFAPPS, "a3", { namespace: f.namespace })).metadata!
      .generation as number;
    const from = generations.length;
    const counters = f.op.client.counters;
    const cmWrites = counters.writes({ resource: "configmaps" });
    const deploymentWrites = counters.writes({ resource: "deployments" });
    hold.generation = start + 1;
    const change = (i: number) =>
      f.client.api.patch(KOPFAPPS, "a3", { spec: { message: `m${i}` } }, {
        namespace: f.namespace,
      });
    await change(0);
    await eventually(() => hold.held, 30_000, "the first reconcile of the burst");
    await Promise.all(Array.from({ length: 49 }, (_, i) => change(i + 1)));
    const last = await f.client.api.get(KOPFAPPS, "a3", { namespace: f.namespace });
    assert.equal(last.metadata?.generation, start + 50, "50 changes, 50 generations");
    hold.lastVersion = last.metadata?.resourceVersion;
    const message = (last.spec as { message: string }).message;
    await eventually(
      async () =>
        ((await child(f, CONFIGMAPS, "a3-config"))?.data as { message?: string } | undefined)
          ?.message === message,
      30_000,
      "the last change applied",
    );
    await settled(f, 0);
    // Reconciles that saw a new generation: the held one, and one for the other 49 changes.
    const runs = generations.slice(from);
    const fresh = runs.filter((g, i) => i === 0 || g !== runs[i - 1]);
    assert.deepEqual(fresh, [start + 1, start + 50], `generations seen: ${runs.join(", ")}`);
    assert.equal(counters.writes({ resource: "configmaps" }) - cmWrites, 2, "m0, then the last");
    assert.equal(counters.writes({ resource: "deployments" }) - deploymentWrites, 2);
  },
);

Deno.test(
  "on.reconcile with finalizer: deleting the parent runs the cleanup, then garbage collection removes the children (X-REC-06)",
  opts,
  async () => {
    await using f = await fixture();
    await createApp(f, "a4", "bye");
    await eventually(() => child(f, DEPLOYMENTS, "a4-app"), 30_000, "the Deployment");
    await eventually(() => child(f, CONFIGMAPS, "a4-config"), 30_000, "the ConfigMap");
    await eventually(async () =>
      (await f.client.api.get(KOPFAPPS, "a4", { namespace: f.namespace })).metadata?.finalizers
        ?.length
    );
    await f.client.api.delete(KOPFAPPS, "a4", { namespace: f.namespace });
    await f.op.waitForLog(/^Cleaning up after a4\.$/);
    await eventually(async () => !(await child(f, KOPFAPPS, "a4")), 30_000, "the KopfApp gone");
    await eventually(
      async () => !(await child(f, CONFIGMAPS, "a4-config")),
      60_000,
      "GC of the CM",
    );
    await eventually(async () => !(await child(f, DEPLOYMENTS, "a4-app")), 60_000, "GC of the app");
  },
);
