/**
 * Migrating to the state in status (`StatusFirst*` storages): objects handled with Kopf's
 * default (annotations) are not handled again, and their annotation moves to status on their
 * next change.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  StatusFirstDiffBaseStorage,
  StatusFirstProgressStorage,
} from "../core/settings/status_first.ts";
import type { Resource } from "../core/structs/resources.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const LHC = "kopf.zalando.org/last-handled-configuration";
const RESOURCE: Resource = {
  ...KOPFEXAMPLES,
  plural: "kopfstatusexamples",
  singular: "kopfstatusexample",
  kind: "KopfStatusExample",
  shortNames: ["kopfsex"],
  subresources: ["status"],
};

Deno.test(
  "StatusFirst storages take over objects handled with Kopf's annotations: no handler re-runs, the diff-base moves to status on the next change",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example-status.yaml");
    const namespace = await testNamespace("statusfirst");
    const runs: string[] = [];
    const setup = (registry: Parameters<Parameters<typeof startOperator>[0]>[0]) => {
      on.create(RESOURCE.plural, { registry }, function create_fn() {
        runs.push("create");
        return { message: "hello" };
      });
      on.update(RESOURCE.plural, { registry }, function update_fn() {
        runs.push("update");
      });
    };
    const quiet = createSettings({ posting: { enabled: false } });
    {
      await using op = await startOperator(setup, { namespaces: [namespace], settings: quiet });
      await op.ready;
      await client.api.create(RESOURCE, {
        apiVersion: "kopf.dev/v1",
        kind: RESOURCE.kind,
        metadata: { name: "a" },
        spec: { value: 0 },
      }, { namespace });
      await eventually(async () => {
        const obj = await client.api.get(RESOURCE, "a", { namespace });
        return obj.metadata?.annotations?.[LHC];
      });
    }
    assert.deepEqual(runs, ["create"]);

    const settings = createSettings({ posting: { enabled: false } });
    settings.persistence.progressStorage = new StatusFirstProgressStorage();
    settings.persistence.diffbaseStorage = new StatusFirstDiffBaseStorage();
    await using op = await startOperator(setup, { namespaces: [namespace], settings });
    await op.ready;
    await sleep(1500);
    assert.deepEqual(runs, ["create"], "the annotated object is known as handled");
    const before = op.client.counters.snapshot();
    await client.api.patch(RESOURCE, "a", { spec: { value: 1 } }, { namespace });
    const moved = await eventually(async () => {
      const obj = await client.api.get(RESOURCE, "a", { namespace });
      const kopf = (obj.status as { kopf?: Record<string, string> } | undefined)?.kopf;
      return kopf?.["last-handled-configuration"] && !obj.metadata?.annotations?.[LHC]
        ? obj
        : undefined;
    });
    assert.deepEqual(runs, ["create", "update"]);
    assert.deepEqual(
      JSON.parse(
        (moved.status as { kopf: Record<string, string> }).kopf["last-handled-configuration"]!,
      ),
      { spec: { value: 1 } },
    );
    await sleep(1500);
    const used = op.client.counters.since(before);
    // The one-time migration: the annotation's removal and the status, then nothing more.
    assert.equal(used.writes({ resource: RESOURCE.plural }), 1, JSON.stringify(used.entries()));
    assert.equal(used.writes({ resource: `${RESOURCE.plural}/status` }), 1);
    assert.deepEqual(runs, ["create", "update"]);
  },
);
