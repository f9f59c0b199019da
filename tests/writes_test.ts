/**
 * API-friendliness, measured: the writes the operator makes for common cases, counted by its own
 * client against the real API server, on both CRD variants — without a status subresource
 * (crds/example.yaml: status is written with the object) and with one
 * (crds/example-status.yaml: status goes through `/status`) — and with the state kept in
 * annotations (Kopf's default) or in status (`StatusFirst*` storages).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  StatusFirstDiffBaseStorage,
  StatusFirstProgressStorage,
} from "../core/settings/status_first.ts";
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

/** The resource of crds/example-status.yaml (with a status subresource). */
const KOPFSTATUSEXAMPLES: Resource = {
  ...KOPFEXAMPLES,
  plural: "kopfstatusexamples",
  singular: "kopfstatusexample",
  kind: "KopfStatusExample",
  shortNames: ["kopfsex"],
  subresources: ["status"],
};

interface Case {
  readonly crd: string;
  readonly resource: Resource;
  readonly inStatus: boolean;
}

/** Creates one object, waits until handled, changes its spec, waits again; counts writes. */
async function countWrites({ crd, resource, inStatus }: Case) {
  using client = await testClient();
  await applyCrds(client, crd);
  const namespace = await testNamespace("writes");
  const settings = createSettings({ posting: { enabled: false } });
  if (inStatus) {
    settings.persistence.progressStorage = new StatusFirstProgressStorage();
    settings.persistence.diffbaseStorage = new StatusFirstDiffBaseStorage();
  }
  await using op = await startOperator((registry) => {
    on.create(resource.plural, { registry }, function create_fn() {
      return { message: "hello" };
    });
    on.update(resource.plural, { registry }, function update_fn({ spec }) {
      return { value: spec["value"] ?? null };
    });
  }, { namespaces: [namespace], settings });
  await op.ready;
  const status = (obj: KubeObject) => (obj.status ?? {}) as Record<string, unknown>;
  const quiet = async () => await sleep(1500); // let any extra cycle (there should be none) happen

  const before = op.client.counters.snapshot();
  await client.api.create(resource, {
    apiVersion: "kopf.dev/v1",
    kind: resource.kind,
    metadata: { name: "a" },
    spec: { value: 0 },
  }, { namespace });
  const created = await eventually(async () => {
    const obj = await client.api.get(resource, "a", { namespace });
    return status(obj)["create_fn"] ? obj : undefined;
  });
  await quiet();
  const onCreate = op.client.counters.since(before);

  const middle = op.client.counters.snapshot();
  await client.api.patch(resource, "a", { spec: { value: 1 } }, { namespace });
  const updated = await eventually(async () => {
    const obj = await client.api.get(resource, "a", { namespace });
    return status(obj)["update_fn"] ? obj : undefined;
  });
  await quiet();
  const onUpdate = op.client.counters.since(middle);
  return { created, updated, onCreate, onUpdate, status };
}

Deno.test(
  "a create handler with a result costs exactly one write (no status subresource)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("onewrite");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function create_fn() {
        return { message: "hello" };
      });
    }, { namespaces: [namespace] });
    await op.ready;
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "a" },
      spec: {},
    }, {
      namespace,
    });
    const done = await eventually(async () => {
      const obj = await client.api.get(KOPFEXAMPLES, "a", { namespace });
      return (obj.status as { create_fn?: unknown } | undefined)?.create_fn ? obj : undefined;
    });
    assert.deepEqual(done.status, { create_fn: { message: "hello" } });
    await sleep(1500); // let any extra cycle (there should be none) happen
    const used = op.client.counters.since(before);
    assert.equal(used.writes({ resource: "kopfexamples" }), 1, JSON.stringify(used.entries()));
    assert.equal(
      used.count({ verb: ["get", "list"], resource: "kopfexamples" }),
      0,
      "no extra reads",
    );
    assert.equal(
      used.count({ verb: "create", resource: "events" }),
      0,
      "no Events from log messages by default (settings.posting.loggers, as in Kopf 1.44+)",
    );
  },
);

Deno.test(
  "with a status subresource, Kopf's default state in annotations costs two writes per create and per update (as Kopf)",
  opts,
  async () => {
    const { created, onCreate, onUpdate } = await countWrites({
      crd: "crds/example-status.yaml",
      resource: KOPFSTATUSEXAMPLES,
      inStatus: false,
    });
    const annotations = created.metadata?.annotations ?? {};
    assert.ok(annotations["kopf.zalando.org/last-handled-configuration"], "diff-base annotated");
    for (const used of [onCreate, onUpdate]) {
      const detail = JSON.stringify(used.entries());
      assert.equal(used.writes({ resource: "kopfstatusexamples" }), 1, detail);
      assert.equal(used.writes({ resource: "kopfstatusexamples/status" }), 1, detail);
    }
  },
);

Deno.test(
  "with a status subresource and the state in status, a handled create and an update cost one /status write each",
  opts,
  async () => {
    const { created, updated, onCreate, onUpdate, status } = await countWrites({
      crd: "crds/example-status.yaml",
      resource: KOPFSTATUSEXAMPLES,
      inStatus: true,
    });
    assert.deepEqual(Object.keys(created.metadata?.annotations ?? {}), [], "no annotations");
    const kopf = status(updated)["kopf"] as Record<string, string>;
    assert.deepEqual(JSON.parse(kopf["last-handled-configuration"]!), { spec: { value: 1 } });
    for (const used of [onCreate, onUpdate]) {
      const detail = JSON.stringify(used.entries());
      assert.equal(used.writes({ resource: "kopfstatusexamples" }), 0, detail);
      assert.equal(used.writes({ resource: "kopfstatusexamples/status" }), 1, detail);
    }
  },
);

Deno.test(
  "without a status subresource, the state in status still costs one write per create and per update",
  opts,
  async () => {
    const { onCreate, onUpdate } = await countWrites({
      crd: "crds/example.yaml",
      resource: KOPFEXAMPLES,
      inStatus: true,
    });
    for (const used of [onCreate, onUpdate]) {
      assert.equal(used.writes({}), 1, JSON.stringify(used.entries()));
    }
  },
);
