/**
 * Which objects `on.reconcile` reconciles, on the real control plane: the handler filters
 * (labels, annotations, `when`, `field`/`value`) keep non-matching objects out until they start
 * matching; `statusChanges` opts in to status-only changes (on the `/status` subresource); at
 * operator start every existing object is reconciled exactly once.
 */

import assert from "node:assert/strict";
import { reconcile } from "../core/api/reconciling.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  sleep,
  STATUS_CRD,
  STATUS_EXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** Reconciles per "handler:object". */
function tally() {
  const runs = new Map<string, number>();
  return {
    add: (key: string) => void runs.set(key, (runs.get(key) ?? 0) + 1),
    of: (key: string) => runs.get(key) ?? 0,
    all: () => Object.fromEntries([...runs].sort()),
  };
}

function withMeta(object: KubeObject, meta: Record<string, unknown>): KubeObject {
  return { ...object, metadata: { ...object.metadata, ...meta } };
}

Deno.test(
  "on.reconcile filters: labels, annotations, when and field/value keep a non-matching object out, even when it changes, until it starts matching (X-REC-16)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-filt");
    const runs = tally();
    await using op = await startOperator((registry) => {
      const record = (tag: string) => ({ name }: { name: string }) => runs.add(`${tag}:${name}`);
      reconcile("kopfexamples", { registry, id: "labels", labels: { app: "yes" } }, record("L"));
      reconcile(
        "kopfexamples",
        { registry, id: "annotations", annotations: { tier: "gold" } },
        record("A"),
      );
      reconcile(
        "kopfexamples",
        { registry, id: "when", when: ({ spec }) => spec.enabled === true },
        record("W"),
      );
      reconcile(
        "kopfexamples",
        { registry, id: "field", field: "spec.mode", value: "on" },
        record("F"),
      );
    }, { namespaces: [namespace] });
    await op.ready;
    const objects = [
      kex("l-in", {}, { app: "yes" }),
      kex("l-out", {}, { app: "no" }),
      withMeta(kex("a-in"), { annotations: { tier: "gold" } }),
      withMeta(kex("a-out"), { annotations: { tier: "silver" } }),
      kex("w-in", { enabled: true }),
      kex("w-out", { enabled: false }),
      kex("f-in", { mode: "on" }),
      kex("f-out", { mode: "off" }),
    ];
    for (const object of objects) await client.api.create(KOPFEXAMPLES, object, { namespace });
    const matching = { "A:a-in": 1, "F:f-in": 1, "L:l-in": 1, "W:w-in": 1 };
    await eventually(() => Object.keys(runs.all()).length === 4, 20_000, "the matching four");
    await sleep(1_000); // reconciles of non-matching objects, if any, would come now
    assert.deepEqual(runs.all(), matching);

    // Changed, still not matching: still nothing.
    for (const name of ["l-out", "a-out", "w-out", "f-out"]) {
      await client.api.patch(KOPFEXAMPLES, name, { spec: { other: 1 } }, { namespace });
    }
    await sleep(1_000);
    assert.deepEqual(runs.all(), matching);

    // Now matching: each reconciled once, by its handler only.
    await client.api.patch(KOPFEXAMPLES, "l-out", { metadata: { labels: { app: "yes" } } }, {
      namespace,
    });
    await client.api.patch(
      KOPFEXAMPLES,
      "a-out",
      { metadata: { annotations: { tier: "gold" } } },
      { namespace },
    );
    await client.api.patch(KOPFEXAMPLES, "w-out", { spec: { enabled: true } }, { namespace });
    await client.api.patch(KOPFEXAMPLES, "f-out", { spec: { mode: "on" } }, { namespace });
    await eventually(() => Object.keys(runs.all()).length === 8, 20_000, "all eight");
    await sleep(1_000);
    assert.deepEqual(runs.all(), {
      ...matching,
      "A:a-out": 1,
      "F:f-out": 1,
      "L:l-out": 1,
      "W:w-out": 1,
    });
  },
);

Deno.test(
  "on.reconcile statusChanges: a change of the /status subresource alone reconciles with statusChanges: true and not without it (X-REC-08)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, STATUS_CRD);
    const namespace = await testNamespace("rec-status");
    const runs = tally();
    await using op = await startOperator((registry) => {
      reconcile("kopfstatusexamples", { registry, id: "with", statusChanges: true }, ({ name }) => {
        runs.add(`with:${name}`);
      });
      reconcile("kopfstatusexamples", { registry, id: "without" }, ({ name }) => {
        runs.add(`without:${name}`);
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(STATUS_EXAMPLES, {
      ...kex("s1"),
      kind: STATUS_EXAMPLES.kind,
    }, { namespace });
    await eventually(() => runs.of("with:s1") && runs.of("without:s1"), 20_000, "both once");
    for (const phase of ["one", "two"]) {
      await client.api.patch(STATUS_EXAMPLES, "s1", { status: { phase } }, {
        namespace,
        subresource: "status",
      });
      await eventually(() => runs.of("with:s1") === (phase === "one" ? 2 : 3), 20_000, phase);
    }
    await sleep(1_000); // a reconcile of "without", if any, would come now
    assert.deepEqual(runs.all(), { "with:s1": 3, "without:s1": 1 });
    // A spec change reconciles both.
    await client.api.patch(STATUS_EXAMPLES, "s1", { spec: { x: 1 } }, { namespace });
    await eventually(() => runs.of("without:s1") === 2, 20_000, "the spec change");
    await sleep(500);
    assert.deepEqual(runs.all(), { "with:s1": 4, "without:s1": 2 });
  },
);

Deno.test(
  "on.reconcile at operator start: every existing object is reconciled exactly once, no more (X-REC-08)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("rec-start");
    const names = Array.from({ length: 7 }, (_, i) => `pre-${i}`);
    for (const name of names) await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
    const runs = tally();
    await using op = await startOperator(
      (registry) =>
        reconcile("kopfexamples", { registry }, ({ name }) => {
          runs.add(name);
        }),
      { namespaces: [namespace] },
    );
    await op.ready;
    await eventually(() => names.every((n) => runs.of(n) > 0), 20_000, "every object");
    await sleep(2_000); // a second round, if any, would come now
    assert.deepEqual(runs.all(), Object.fromEntries(names.map((n) => [n, 1])));
  },
);
