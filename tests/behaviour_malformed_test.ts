/**
 * Subtle behaviours (features.md §32) with malformed objects, checked end to end against a real
 * API server: objects of odd shapes (a spec that is a string or a list, a status that is a number,
 * no spec) are handled like any other; corrupt Kopf state (a progress record or diff-base that is
 * not JSON) fails only the cycles of those objects; label filters skip objects without labels;
 * the operator never crashes and keeps handling other objects. The objects are of a CRD of its
 * own that preserves unknown fields (no schema to reject them).
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeObject, ObjectMeta } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { PRESENT } from "../core/intents/filters.ts";
import {
  applyCrdObjects,
  eventually,
  KOPFEXAMPLES,
  LAST_HANDLED,
  testClient,
  testNamespace,
} from "./_support.ts";
import { opts, read, startReady, statusOf } from "./_behaviour.ts";

const FREEFORMS: Resource = {
  ...KOPFEXAMPLES,
  plural: "behaviourfreeforms",
  singular: "behaviourfreeform",
  kind: "BehaviourFreeform",
  shortNames: [],
};

const FREEFORM_CRD: KubeObject = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "behaviourfreeforms.kopf.dev" },
  spec: {
    scope: "Namespaced",
    group: "kopf.dev",
    names: {
      kind: "BehaviourFreeform",
      plural: "behaviourfreeforms",
      singular: "behaviourfreeform",
    },
    versions: [{
      name: "v1",
      served: true,
      storage: true,
      schema: { openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
    }],
  },
} as KubeObject;

Deno.test(
  "SUB-76: malformed objects do not crash the operator; other objects keep being handled",
  opts,
  async () => {
    using client = await testClient();
    await applyCrdObjects(client, [FREEFORM_CRD]);
    await eventually(async () =>
      (await client.discovery.find((r) => r.plural === "behaviourfreeforms")).length > 0
    );
    const namespace = await testNamespace("malformed");
    const freeform = (name: string, extra: Record<string, unknown>, meta: ObjectMeta = {}) =>
      ({
        apiVersion: "kopf.dev/v1",
        kind: "BehaviourFreeform",
        metadata: { name, ...meta },
        ...extra,
      }) as KubeObject;
    const malformed = [
      freeform("string-spec", { spec: "just a string" }),
      freeform("list-spec", { spec: [1, 2, 3] }),
      freeform("number-status", { spec: {}, status: 42 }),
      freeform("no-spec", {}),
      freeform("bad-progress", { spec: {} }, {
        annotations: { "kopf.zalando.org/create_fn": "{not json" },
      }),
      freeform("bad-diffbase", { spec: {} }, {
        annotations: { [LAST_HANDLED]: "not json either" },
      }),
    ];
    for (const body of malformed) await client.api.create(FREEFORMS, body, { namespace });

    const handled: string[] = [];
    const filtered: string[] = [];
    await using op = await startReady(namespace, (registry) => {
      on.create("behaviourfreeforms", { registry, id: "create_fn" }, ({ name }) => {
        handled.push(name!);
        return { ok: true };
      });
      on.update("behaviourfreeforms", { registry, id: "update_fn" }, () => {});
      on.create(
        "behaviourfreeforms",
        { registry, id: "labelled_fn", labels: { tier: "gold", app: PRESENT } },
        ({ name }) => {
          filtered.push(name!);
        },
      );
    });
    await client.api.create(FREEFORMS, freeform("good", { spec: { a: 1 } }), { namespace });
    await client.api.create(
      FREEFORMS,
      freeform("gold", { spec: {} }, { labels: { tier: "gold", app: "x" } }),
      { namespace },
    );
    await eventually(async () =>
      statusOf(await read(client, namespace, "good", FREEFORMS)).create_fn
    );
    await eventually(() => filtered.includes("gold"), 10_000, "the labelled object");
    // The well-formed ones among the odd shapes are handled like any other object.
    for (const name of ["string-spec", "list-spec", "number-status", "no-spec"]) {
      await eventually(
        async () => statusOf(await read(client, namespace, name, FREEFORMS)).create_fn,
        10_000,
        `${name} handled`,
      );
    }
    assert.deepEqual(filtered, ["gold"], "label filters skip objects without labels");
    // Objects created later are still handled: the operator is alive.
    await client.api.create(FREEFORMS, freeform("later", { spec: {} }), { namespace });
    await eventually(async () =>
      statusOf(await read(client, namespace, "later", FREEFORMS)).create_fn
    );
    assert.ok(!op.logs.some((e) => e.level === "critical"), "nothing fatal");
    assert.deepEqual(handled.sort(), [
      "gold",
      "good",
      "later",
      "list-spec",
      "no-spec",
      "number-status",
      "string-spec",
    ]);
    // Unparseable Kopf state (a progress record or diff-base that is not JSON) fails only the
    // cycles of those objects; they are retried with the error backoff, as in Kopf.
    const failing = () =>
      [
        ...new Set(
          op.logs.filter((e) => /^Unexpected error while processing/.test(e.message))
            .map((e) => e.object?.name),
        ),
      ].sort();
    await eventually(() => failing().length === 2, 10_000, "errors of the corrupt-state objects");
    assert.deepEqual(failing(), ["bad-diffbase", "bad-progress"]);
  },
);
