/**
 * What porting a real Kopf operator found (issue 30), checked against the real API server: the
 * progress records a finished cause leaves behind, and Kopf's batch window before an object's
 * first event (the ordering a parent/child operator can depend on).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  LAST_HANDLED,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import { fast } from "./_behaviour.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** Kopf's progress records on an object: its annotations (but the diff-base) and status. */
function progressRecords(body: KubeObject): string[] {
  const annotations = Object.keys(body.metadata?.annotations ?? {})
    .filter((key) => key.startsWith("kopf.zalando.org/") && key !== LAST_HANDLED);
  const status = (body as { status?: { kopf?: { progress?: Record<string, unknown> } } }).status;
  return [...annotations, ...Object.keys(status?.kopf?.progress ?? {}).map((k) => `status:${k}`)];
}

function logged(op: InProcessOperator, pattern: RegExp): string[] {
  return op.logs.filter((e) => pattern.test(e.message)).map((e) => e.message);
}

Deno.test(
  "a finished creation purges the record of a field handler whose own patch made its new= filter stop matching; a later update is not 'superseded' (issue 30)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("purge");
    const calls: string[] = [];
    await using op = await startOperator((registry) => {
      // Registered first: the default lifecycle (asap) runs it in the creation's first cycle,
      // and its patch makes its own `new` filter stop matching for the creation's second one.
      on.field(
        "kopfexamples",
        { registry, id: "prepare", field: "spec.phase", new: "init" },
        ({ patch }) => {
          calls.push("prepare");
          patch.spec.phase = "ready";
        },
      );
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {
        calls.push("create");
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, () => {
        calls.push("update");
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("a", { phase: "init" }), { namespace });
    await op.waitForLog(/Creation is processed/);
    const created = await eventually(
      async () => {
        const body = await client.api.get(KOPFEXAMPLES, "a", { namespace });
        return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
      },
      15_000,
      "the diff-base after the creation",
    );
    assert.deepEqual(calls, ["prepare", "create"]);
    assert.equal((created.spec as { phase?: string }).phase, "ready");
    assert.deepEqual(progressRecords(created), [], "no progress record is left after creation");

    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 1 } }, { namespace });
    await op.waitForLog(/Updating is processed/);
    assert.deepEqual(calls, ["prepare", "create", "update"]);
    assert.deepEqual(logged(op, /superseded/i), [], "the completed creation is not superseded");
  },
);

Deno.test(
  "settings.queueing.kopfBatching delays a new object's first event by the batch window as Kopf 1.3x does: a child's handler writes the parent after the parent's creation did (issue 30)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("kopfbatch");
    const phases: string[] = [];
    await using op = await startOperator((registry) => {
      // The parent's creation makes a child and writes `Pending` when it returns; the child's
      // creation marks the parent `Running`. Kopf's window before the child's first event lets
      // the parent's write land first; without it the child's handler is faster and the
      // parent's `Pending` (written later) wins.
      on.create(
        "kopfexamples",
        { registry, id: "parent", labels: { role: "parent" } },
        async ({ name, patch }) => {
          await client.api.create(
            KOPFEXAMPLES,
            kex(`${name}-child`, { parent: name }, { role: "child" }),
            { namespace },
          );
          await sleep(200); // the parent's handler has more to do after making the child
          phases.push("Pending");
          patch.status.phase = "Pending";
        },
      );
      on.create(
        "kopfexamples",
        { registry, id: "child", labels: { role: "child" } },
        async ({ spec }) => {
          const parent = (spec as { parent: string }).parent;
          await client.api.patch(KOPFEXAMPLES, parent, { status: { phase: "Running" } }, {
            namespace,
          });
          phases.push("Running");
        },
      );
    }, {
      namespaces: [namespace],
      settings: fast((s) => {
        s.queueing.kopfBatching = true;
        s.queueing.batchWindow = 1; // wide, so that the ordering does not depend on load
      }),
    });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("p", {}, { role: "parent" }), { namespace });
    await eventually(() => phases.length === 2, 20_000, "both handlers");
    await eventually(() => logged(op, /Creation is processed/).length === 2, 20_000, "both cycles");
    const parent = await client.api.get(KOPFEXAMPLES, "p", { namespace });
    assert.deepEqual(phases, ["Pending", "Running"]);
    assert.equal((parent as { status?: { phase?: string } }).status?.phase, "Running");
  },
);
