/**
 * The consistency check after patching, against the real API server: a CRD whose schema prunes
 * unknown status fields makes the operator warn, with a hint at the schema.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { Resource } from "../core/structs/resources.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  sleep,
  STATUS_CRD,
  STATUS_EXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";
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

    const warning = await op.waitForLog(
      /Merge-patching finished with inconsistencies.*status\.undeclared/,
    );
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

Deno.test(
  "the debug lines 'Merge-patching the resource/status with:' show each request body as sent, the status one apart with a status subresource (K26-17)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, STATUS_CRD);
    const namespace = await testNamespace("patchlog");
    await using op = await startOperator((registry) => {
      on.create("kopfstatusexamples", { registry }, function create_fn() {
        return { message: "hello" };
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(STATUS_EXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfStatusExample",
      metadata: { name: "s" },
      spec: { field: "value" },
    }, { namespace });
    await eventually(async () => {
      const obj = await client.api.get(STATUS_EXAMPLES, "s", { namespace });
      return (obj.status as { create_fn?: unknown } | undefined)?.create_fn !== undefined;
    });
    const lines = op.logs.filter((e) => e.level === "debug" && /-patching /.test(e.message))
      .map((e) => e.message);
    const main = lines.find((l) => l.startsWith("Merge-patching the resource with: "));
    const status = lines.find((l) => l.startsWith("Merge-patching the status with: "));
    assert.ok(main && status, lines.join("\n"));
    // The bodies are the merge patches as sent: no internal structure around them.
    const mainBody = JSON.parse(main.slice("Merge-patching the resource with: ".length));
    assert.equal(mainBody.merge, undefined, main);
    assert.equal(mainBody.status, undefined, "status goes to /status, not the main endpoint");
    assert.ok(mainBody.metadata?.annotations?.["kopf.zalando.org/last-handled-configuration"]);
    const statusBody = JSON.parse(status.slice("Merge-patching the status with: ".length));
    assert.deepEqual(statusBody, { status: { create_fn: { message: "hello" } } });
  },
);
