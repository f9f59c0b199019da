/**
 * The triggers of `on.reconcile` besides the object and its owned children, on the real control
 * plane: `watches` with a map from a related object to the reconciled ones, `requeueAfter`, a
 * `TemporaryError` with a delay, a status-only change (no reconcile unless `statusChanges`), and
 * the periodic `resync`.
 */

import assert from "node:assert/strict";
import { reconcile } from "../core/api/reconciling.ts";
import { TemporaryError } from "../core/actions/execution.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function example(name: string): KubeObject {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: {} };
}

function counter() {
  const runs = new Map<string, number>();
  return {
    runs,
    add: (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1).get(name)!,
    of: (name: string) => runs.get(name) ?? 0,
  };
}

Deno.test(
  "on.reconcile triggers: a watched object reconciles what its map names; requeueAfter comes back; a TemporaryError retries after its delay; a status-only change reconciles nothing (X-REC-08)",
  opts,
  async () => {
    const client = await testClient();
    using _ = client;
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-trig");
    const runs = counter();
    const op = await startOperator((registry) =>
      reconcile("kopfexamples", {
        registry,
        watches: [{
          resource: "configmaps",
          map: (cm) => {
            const target = cm.metadata?.labels?.target;
            return target ? { name: target, namespace: cm.metadata?.namespace } : null;
          },
        }],
      }, ({ name }) => {
        const run = runs.add(name);
        if (name === "requeued" && run < 3) return { requeueAfter: 0.3 };
        if (name === "temporary" && run === 1) throw new TemporaryError("not yet", { delay: 0.3 });
      }), { namespaces: [namespace] });
    try {
      for (const name of ["plain", "requeued", "temporary"]) {
        await client.api.create(KOPFEXAMPLES, example(name), { namespace });
      }
      await eventually(() => runs.of("requeued") === 3, 20_000, "requeued: three reconciles");
      await eventually(() => runs.of("temporary") === 2, 20_000, "temporary: a retry");
      await sleep(1_000); // more runs, if any, would come now
      assert.deepEqual(Object.fromEntries(runs.runs), { plain: 1, requeued: 3, temporary: 2 });

      // A status-only change: nothing. A watched ConfigMap naming "plain": "plain" once more.
      await client.api.patch(KOPFEXAMPLES, "plain", { status: { seen: true } }, { namespace });
      await sleep(1_000);
      assert.equal(runs.of("plain"), 1, "a status-only change reconciles nothing");
      await client.api.create(CONFIGMAPS, {
        metadata: { name: "pointer", labels: { target: "plain" } },
      }, { namespace });
      await eventually(() => runs.of("plain") === 2, 20_000, "the watched object's reconcile");
      await client.api.patch(CONFIGMAPS, "pointer", { data: { x: "1" } }, { namespace });
      await eventually(() => runs.of("plain") === 3, 20_000, "its change reconciles again");
      assert.equal(runs.of("requeued"), 3);
      assert.equal(runs.of("temporary"), 2);
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "on.reconcile resync: an unchanged object is reconciled again every resync seconds (X-REC-09)",
  opts,
  async () => {
    const client = await testClient();
    using _ = client;
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-resync");
    const runs = counter();
    await client.api.create(KOPFEXAMPLES, example("steady"), { namespace });
    const op = await startOperator(
      (registry) =>
        reconcile("kopfexamples", { registry, resync: 0.5 }, ({ name }) => {
          runs.add(name);
        }),
      { namespaces: [namespace] },
    );
    try {
      await eventually(() => runs.of("steady") >= 3, 20_000, "two resyncs after the first");
    } finally {
      await op.stop();
    }
  },
);
