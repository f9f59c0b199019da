/**
 * The consistency check after patching, against the real API server: a CRD whose schema prunes
 * unknown status fields makes the operator warn, with a hint at the schema.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { Resource } from "../core/structs/resources.ts";
import { applyCrdObjects, eventually, sleep, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const PRUNERS: Resource = {
  group: "patching.tests.kopf.dev",
  version: "v1",
  plural: "pruners",
  singular: "pruner",
  kind: "Pruner",
  namespaced: true,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

/** Status has one declared field (`declared`); everything else under status is pruned. */
const PRUNING_CRD = {
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "pruners.patching.tests.kopf.dev" },
  spec: {
    group: "patching.tests.kopf.dev",
    scope: "Namespaced",
    names: { plural: "pruners", singular: "pruner", kind: "Pruner" },
    versions: [{
      name: "v1",
      served: true,
      storage: true,
      schema: {
        openAPIV3Schema: {
          type: "object",
          properties: {
            spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            status: {
              type: "object",
              properties: {
                declared: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              },
            },
          },
        },
      },
    }],
  },
};

Deno.test(
  "a status field pruned by the CRD schema is reported as an inconsistency with a schema hint (RES-07, SUB-06)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrdObjects(client, [PRUNING_CRD]);
    const namespace = await testNamespace("pruning");
    await using op = await startOperator((registry) => {
      on.create("pruners.patching.tests.kopf.dev", { registry }, function declared() {
        return { kept: true };
      });
      on.create("pruners.patching.tests.kopf.dev", { registry }, function undeclared() {
        return { lost: true };
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(PRUNERS, {
      apiVersion: "patching.tests.kopf.dev/v1",
      kind: "Pruner",
      metadata: { name: "p" },
      spec: {},
    }, { namespace });

    const warning = await op.waitForLog(/Patching failed with inconsistencies.*status\.undeclared/);
    assert.equal(warning.level, "warning");
    assert.equal(warning.object?.name, "p");
    assert.match(warning.message, /status\.undeclared \(sent \{"lost":true\}, stored absent\)/);
    assert.match(warning.message, /x-kubernetes-preserve-unknown-fields: true/);

    // The declared field is stored and was never reported; nor were the annotations.
    await eventually(async () => {
      const obj = await client.api.get(PRUNERS, "p", { namespace });
      return (obj.status as { declared?: unknown } | undefined)?.declared !== undefined;
    });
    await sleep(500);
    const reports = op.logs.filter((e) => /inconsistencies/.test(e.message));
    assert.ok(reports.length >= 1);
    for (const report of reports) {
      assert.doesNotMatch(report.message, /status\.declared|metadata\./, report.message);
    }
  },
);
