/**
 * Patching, against the real API server: the consistency check after patching (a CRD whose
 * schema prunes unknown status fields makes the operator warn, with a hint at the schema), and
 * `patch.fns`, the transformation functions run on the live body (K26-06).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { timer } from "../core/api/spawning.ts";
import { applyPatch } from "../core/actions/application.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { JsonObject } from "../core/structs/dicts.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { Patch } from "../core/structs/patches.ts";
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

/** Appends an item to a list at a path of the body unless it is there (safe to re-run). */
function appendOnce(section: "spec" | "status", list: string, item: string) {
  return (body: JsonObject) => {
    const holder = (body[section] ??= {}) as Record<string, string[] | undefined>;
    const items = holder[list] ??= [];
    if (!items.includes(item)) items.push(item);
  };
}

Deno.test(
  "patch.fns: transformation functions of handlers and timers change lists on the live body, status via /status (K26-06)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, STATUS_CRD);
    const namespace = await testNamespace("k26fns");
    const settings = createSettings({ process: { gracePeriod: 1 }, queueing: { exitTimeout: 1 } });
    await using op = await startOperator((registry) => {
      on.create("kopfstatusexamples", { registry, id: "create_fn" }, ({ patch }) => {
        patch.status.merged = true;
        patch.fns.push(appendOnce("spec", "items", "from-create"));
        patch.fns.push(appendOnce("status", "items", "from-create"));
      });
      timer("kopfstatusexamples", { registry, id: "tick", interval: 0.3 }, ({ patch, spec }) => {
        const ticks = (spec.ticks ?? []) as string[];
        if (ticks.length >= 3) return;
        // Each tick appends the next number: the function sees the live body, ticks included.
        patch.fns.push((body) => {
          const list = ((body.spec as JsonObject).ticks ??= []) as string[];
          list.push(`t${list.length}`);
        });
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await client.api.create(STATUS_EXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfStatusExample",
      metadata: { name: "a" },
      spec: { items: ["mine"] },
    } as KubeObject, { namespace });

    const done = await eventually(
      async () => {
        const body = await client.api.get(STATUS_EXAMPLES, "a", { namespace });
        const spec = body.spec as { ticks?: string[]; items?: string[] };
        return spec.ticks?.length === 3 && spec.items?.length === 2 ? body : undefined;
      },
      30_000,
      "three ticks and the created item",
    );
    const { spec, status } = done as KubeObject & { spec: JsonObject; status: JsonObject };
    assert.deepEqual(spec.items, ["mine", "from-create"], "appended, not replaced");
    assert.deepEqual(spec.ticks, ["t0", "t1", "t2"], "each tick saw the previous ones");
    assert.deepEqual(status.items, ["from-create"], "status changed through /status");
    assert.equal(status.merged, true, "the merge patch of the same cycle");
  },
);

Deno.test(
  "applyPatch() re-applies patch.fns to the re-read object when the body they ran on is stale (K26-06)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, STATUS_CRD);
    const namespace = await testNamespace("k26fnsconflict");
    const stale = await client.api.create(STATUS_EXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfStatusExample",
      metadata: { name: "a" },
      spec: { items: ["one"] },
    } as KubeObject, { namespace });
    // Someone else appends meanwhile: the stale body's resourceVersion no longer matches.
    await client.api.patch(STATUS_EXAMPLES, "a", { spec: { items: ["one", "other"] } }, {
      namespace,
    });
    const seen: unknown[] = [];
    const patch = new Patch();
    patch.fns.push((body) => {
      const spec = body.spec as { items: string[] };
      seen.push([...spec.items]);
      spec.items.push("mine");
    });
    const applied = await applyPatch(client.api, STATUS_EXAMPLES, stale, patch);
    assert.equal(applied.state, "applied");
    assert.deepEqual(
      seen,
      [["one"], ["one", "other"]],
      "run on the stale body, then the fresh one",
    );
    const stored = await client.api.get(STATUS_EXAMPLES, "a", { namespace });
    assert.deepEqual((stored.spec as JsonObject).items, ["one", "other", "mine"]);
  },
);
