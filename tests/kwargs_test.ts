/**
 * The keyword arguments (context fields) of resource handlers on the real API server: what each
 * one holds, defaults for absent metadata, the patch applied after the handler, and indices
 * taking precedence over framework fields of the same name.
 */
import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { index } from "../core/api/indexing.ts";
import { Index } from "../core/engines/runners/indexing.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "handler kwargs: resource, body, spec/meta/status, namespace/name/uid, labels/annotations (empty when absent), patch applied after the handler; an index named like a kwarg wins (KW-10..15, SUB-77, HK-IDX-15)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("kwargs");
    const seen: Record<string, unknown>[] = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function look(ctx) {
        seen.push({
          resource: ctx.resource.plural,
          kind: ctx.body.kind,
          spec: ctx.spec,
          meta: ctx.meta.name,
          status: ctx.status,
          namespace: ctx.namespace,
          name: ctx.name,
          uid: ctx.uid === ctx.body.metadata?.uid,
          labels: ctx.labels,
          annotations: ctx.annotations instanceof Index ? "the index" : ctx.annotations,
        });
        ctx.patch.status.kwargs = "patched";
        ctx.patch.metadata.labels = { touched: "yes" };
      });
      // An index with a kwarg's name replaces that kwarg in the handlers' contexts (SUB-77).
      index("configmaps", { registry, id: "annotations" }, ({ name }) => ({ [name]: true }));
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(CONFIGMAPS, { metadata: { name: "any" } }, { namespace });
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "k1" },
      spec: { field: "value" },
    }, { namespace });
    await eventually(() => seen.length === 1, 30_000, "the create handler");
    assert.deepEqual(seen[0], {
      resource: "kopfexamples",
      kind: "KopfExample",
      spec: { field: "value" },
      meta: "k1",
      status: {},
      namespace,
      name: "k1",
      uid: true,
      labels: {},
      annotations: "the index",
    });
    const stored = await eventually(
      async () => {
        const body = await client.api.get<KubeObject>(KOPFEXAMPLES, "k1", { namespace });
        return (body.status as Record<string, unknown> | undefined)?.kwargs ? body : undefined;
      },
      30_000,
      "the patch",
    );
    assert.equal((stored.status as Record<string, unknown>).kwargs, "patched");
    assert.equal(stored.metadata?.labels?.touched, "yes");
  },
);
