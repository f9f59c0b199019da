/**
 * State compatibility with the real Python Kopf (a pinned release from PyPI, see
 * tools/python-kopf.sh): an object handled by one operator is taken over by the other without
 * handling it again, and a retry in progress continues where the other left it.
 *
 * Python Kopf runs `tests/compat/python/handlers.py` (handler ids `create_fn`, `update_fn`,
 * `resume_fn`, `delete_fn`; each prints `COMPAT <id> <name> retry=<n>` when called). Our operator
 * registers the same ids. If Python Kopf cannot be installed or run here, these tests are
 * skipped (ignored) with the reason printed once.
 */

import assert from "node:assert/strict";
import { TemporaryError } from "../core/actions/execution.ts";
import { on } from "../core/api/on.ts";
import type { ChangingContext } from "../core/intents/contexts.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import type { KubeClient } from "../core/client/client.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  KOPFEXAMPLES,
  LAST_HANDLED,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";
import { COMPAT_FIELD_HANDLERS, PYTHON_KOPF, runPythonKopf } from "./_kopf.ts";

const opts = {
  sanitizeOps: false,
  sanitizeResources: false,
  ignore: !PYTHON_KOPF.available,
};

const PROGRESS = "kopf.zalando.org/create_fn";

function fast() {
  return createSettings({
    posting: { aggregationWindow: 0.2 },
    process: { gracePeriod: 1 },
    queueing: { exitTimeout: 1 },
  });
}

async function read(client: KubeClient, namespace: string, name: string): Promise<KubeObject> {
  return await client.api.get(KOPFEXAMPLES, name, { namespace });
}

async function exists(client: KubeClient, namespace: string, name: string): Promise<boolean> {
  try {
    await read(client, namespace, name);
    return true;
  } catch (error) {
    if ((error as { code?: number }).code === 404) return false;
    throw error;
  }
}

function statusOf(body: KubeObject): Record<string, unknown> {
  return ((body as { status?: Record<string, unknown> }).status ?? {}) as Record<string, unknown>;
}

/** Our handlers, with the same ids as in handlers.py; every call is recorded. */
function ourHandlers(calls: Array<{ id: string; name: string; retry: number; at: number }>) {
  return (registry: OperatorRegistry) => {
    const record = (id: string) => ({ name, retry, spec }: ChangingContext) => {
      calls.push({ id, name: name!, retry, at: Date.now() });
      if (id !== "create_fn") return undefined;
      if (spec.mode === "ours-fail") throw new TemporaryError("deno says: not yet", { delay: 5 });
      return { message: "hello from deno" };
    };
    on.create("kopfexamples", { registry, id: "create_fn" }, record("create_fn"));
    on.update("kopfexamples", { registry, id: "update_fn" }, record("update_fn"));
    on.resume("kopfexamples", { registry, id: "resume_fn" }, record("resume_fn"));
    on.delete("kopfexamples", { registry, id: "delete_fn" }, record("delete_fn"));
  };
}

const SAMPLE: KubeObject = {
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  metadata: {
    name: "sample",
    labels: { app: "compat", tier: "test" },
    annotations: { "example.com/note": "kept in the essence" },
  },
  spec: { field: "value", nested: { number: 1, list: [1, "two", { three: 3 }] }, empty: {} },
} as KubeObject;

Deno.test(
  "compat: an object handled by Python Kopf is taken over without re-handling and without writes",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-take");
    await client.api.create(KOPFEXAMPLES, SAMPLE, { namespace });

    const kopf = await runPythonKopf(namespace);
    try {
      await kopf.waitForLine(/Creation is processed: 1 succeeded; 0 failed\./, 60_000);
      await eventually(async () =>
        (await read(client, namespace, "sample")).metadata?.annotations?.[LAST_HANDLED]
      );
    } finally {
      await kopf.stop();
    }
    assert.equal(kopf.matching(/^COMPAT create_fn sample /).length, 1, kopf.lines.join("\n"));
    const handled = await read(client, namespace, "sample");
    assert.deepEqual(statusOf(handled).create_fn, { message: "hello from python" });
    assert.deepEqual(handled.metadata?.finalizers, [FINALIZER]);

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    await using op = await startOperator(ourHandlers(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    await op.ready;
    await eventually(() => calls.some((c) => c.id === "resume_fn"), 10_000, "our resume handler");
    await sleep(1_500);
    assert.deepEqual(calls.map((c) => c.id), ["resume_fn"], "only resume handlers run, once");
    assert.equal(
      op.client.counters.writes({ resource: "kopfexamples" }),
      0,
      `no writes to the object: ${JSON.stringify(op.client.counters.entries())}`,
    );
    const after = await read(client, namespace, "sample");
    assert.equal(after.metadata?.resourceVersion, handled.metadata?.resourceVersion);

    // Kopf's finalizer is ours: deleting the object runs our delete handler and releases it.
    await client.api.delete(KOPFEXAMPLES, "sample", { namespace });
    await eventually(async () => !(await exists(client, namespace, "sample")), 15_000, "deletion");
    assert.deepEqual(calls.map((c) => c.id), ["resume_fn", "delete_fn"]);
  },
);

Deno.test(
  "compat: a retry in progress under Python Kopf continues under our operator after its delay",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-retry");
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "slow" },
      spec: { mode: "retry", delay: 6 },
    } as KubeObject, { namespace });

    const kopf = await runPythonKopf(namespace);
    let record: Record<string, unknown>;
    try {
      record = await eventually(
        async () => {
          const raw = (await read(client, namespace, "slow")).metadata?.annotations?.[PROGRESS];
          return raw ? JSON.parse(raw) : undefined;
        },
        60_000,
        "Python Kopf's progress record",
      );
    } finally {
      await kopf.stop();
    }
    assert.equal(kopf.matching(/^COMPAT create_fn slow retry=0 /).length, 1, kopf.lines.join("\n"));
    assert.equal(record.retries, 1);
    assert.equal(record.purpose, "create");
    assert.equal(record.message, "python says: not yet");
    const delayed = Date.parse(String(record.delayed));

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    await using op = await startOperator(ourHandlers(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    await op.ready;
    const startedBeforeDue = Date.now() < delayed;
    await op.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/, 20_000);
    assert.deepEqual(calls.map((c) => [c.id, c.retry]), [["create_fn", 1]], "Kopf's retry count");
    assert.ok(startedBeforeDue, "our operator started while Kopf's delay was still pending");
    assert.ok(
      calls[0]!.at >= delayed - 5,
      `our retry came ${delayed - calls[0]!.at} ms before Kopf's stored delay`,
    );
    const done = await eventually(async () => {
      const body = await read(client, namespace, "slow");
      return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
    });
    assert.equal(done.metadata?.annotations?.[PROGRESS], undefined, "Kopf's record is purged");
    assert.deepEqual(statusOf(done).create_fn, { message: "hello from deno" });
  },
);

Deno.test(
  "compat: an object handled by our operator is not re-created by Python Kopf",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-back");
    await client.api.create(KOPFEXAMPLES, SAMPLE, { namespace });

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    const op = await startOperator(ourHandlers(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    try {
      await op.ready;
      await op.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/, 20_000);
    } finally {
      await op.stop();
    }
    const handled = await eventually(async () => {
      const body = await read(client, namespace, "sample");
      return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
    });
    assert.deepEqual(statusOf(handled).create_fn, { message: "hello from deno" });

    const kopf = await runPythonKopf(namespace);
    try {
      await kopf.waitForLine(/^COMPAT resume_fn sample retry=0 /, 60_000);
      await sleep(2_000);
    } finally {
      await kopf.stop();
    }
    const output = kopf.lines.join("\n");
    assert.deepEqual(
      kopf.matching(/^COMPAT /).map((l) => l.replace(/ at=\d+$/, "")),
      ["COMPAT resume_fn sample retry=0"],
      output,
    );
    assert.equal(kopf.matching(/Handler 'create_fn'/).length, 0, output);
    const after = await read(client, namespace, "sample");
    assert.equal(
      after.metadata?.resourceVersion,
      handled.metadata?.resourceVersion,
      "Python Kopf made no writes to the object",
    );
  },
);

Deno.test(
  "compat: a retry in progress under our operator continues under Python Kopf after its delay",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-retry-back");
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "slow" },
      spec: { mode: "ours-fail" },
    } as KubeObject, { namespace });

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    const op = await startOperator(ourHandlers(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    let record: Record<string, unknown>;
    try {
      await op.ready;
      record = await eventually(
        async () => {
          const raw = (await read(client, namespace, "slow")).metadata?.annotations?.[PROGRESS];
          return raw ? JSON.parse(raw) : undefined;
        },
        20_000,
        "our progress record",
      );
    } finally {
      await op.stop();
    }
    assert.deepEqual(calls.map((c) => [c.id, c.retry]), [["create_fn", 0]]);
    assert.equal(record.retries, 1);
    const delayed = Date.parse(String(record.delayed));

    const kopf = await runPythonKopf(namespace);
    const startedAt = Date.now();
    try {
      await kopf.waitForLine(/Creation is processed: 1 succeeded; 0 failed\./, 30_000);
    } finally {
      await kopf.stop();
    }
    const output = kopf.lines.join("\n");
    const markers = kopf.matching(/^COMPAT /);
    assert.equal(markers.length, 1, output);
    const [, retry, at] = /^COMPAT create_fn slow retry=(\d+) at=(\d+)$/.exec(markers[0]!) ?? [];
    assert.equal(retry, "1", `Kopf continues our retry count: ${output}`);
    assert.ok(startedAt < delayed, "Python Kopf started while our delay was still pending");
    assert.ok(Number(at) >= delayed - 5, `Kopf retried ${delayed - Number(at)} ms early`);
    const done = await eventually(async () => {
      const body = await read(client, namespace, "slow");
      return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
    });
    assert.equal(done.metadata?.annotations?.[PROGRESS], undefined, "our record is purged");
    assert.deepEqual(statusOf(done).create_fn, { message: "hello from python" });
  },
);

// Field handlers: Kopf appends the field to the handler id even when the id is explicit, so
// `on.field(…, { id: "field_fn", field: "spec.field" })` is `field_fn/spec.field` on both sides.
const FIELD_ID = "field_fn/spec.field";
const FIELD_PROGRESS = "kopf.zalando.org/field_fn.spec.field";

function ourFieldHandler(calls: Array<{ id: string; name: string; retry: number; at: number }>) {
  return (registry: OperatorRegistry) => {
    on.field(
      "kopfexamples",
      { registry, id: "field_fn", field: "spec.field" },
      ({ name, retry, spec }: ChangingContext) => {
        calls.push({ id: "field_fn", name: name!, retry, at: Date.now() });
        if (spec.mode === "ours-fail") throw new TemporaryError("deno says: not yet", { delay: 5 });
        return { message: "field from deno" };
      },
    );
  };
}

async function progressRecord(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<Record<string, unknown> | undefined> {
  const raw = (await read(client, namespace, name)).metadata?.annotations?.[FIELD_PROGRESS];
  return raw ? JSON.parse(raw) : undefined;
}

Deno.test(
  "compat: a field handler with an explicit id retrying under Python Kopf continues under ours as field_fn/spec.field",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-field");
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "f" },
      spec: { field: "value", mode: "retry", delay: 6 },
    } as KubeObject, { namespace });

    const kopf = await runPythonKopf(namespace, { handlers: COMPAT_FIELD_HANDLERS });
    let record: Record<string, unknown>;
    try {
      record = await eventually(
        () => progressRecord(client, namespace, "f"),
        60_000,
        "Python Kopf's progress record",
      );
      await kopf.waitForLine(new RegExp(`Handler '${FIELD_ID}' failed temporarily`), 10_000);
    } finally {
      await kopf.stop();
    }
    assert.equal(record.retries, 1, JSON.stringify(record));
    const delayed = Date.parse(String(record.delayed));

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    await using op = await startOperator(ourFieldHandler(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    await op.ready;
    await op.waitForLog(new RegExp(`^Handler '${FIELD_ID}' succeeded\\.$`), 20_000);
    assert.deepEqual(calls.map((c) => c.retry), [1], "Kopf's retry count is continued");
    assert.ok(calls[0]!.at >= delayed - 5, "and its delay is kept");
    const done = await eventually(async () => {
      const body = await read(client, namespace, "f");
      return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
    });
    assert.equal(
      done.metadata?.annotations?.[FIELD_PROGRESS],
      undefined,
      "Kopf's record is purged",
    );
    assert.deepEqual(statusOf(done)[FIELD_ID], { message: "field from deno" });
    assert.equal(statusOf(done).field_fn, undefined);
  },
);

Deno.test(
  "compat: a field handler with an explicit id retrying under our operator continues under Python Kopf",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("compat-field-back");
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "f" },
      spec: { field: "value", mode: "ours-fail" },
    } as KubeObject, { namespace });

    const calls: Array<{ id: string; name: string; retry: number; at: number }> = [];
    const op = await startOperator(ourFieldHandler(calls), {
      namespaces: [namespace],
      settings: fast(),
    });
    let record: Record<string, unknown>;
    try {
      await op.ready;
      record = await eventually(
        () => progressRecord(client, namespace, "f"),
        20_000,
        "our progress record",
      );
      await op.waitForLog(new RegExp(`^Handler '${FIELD_ID}' failed temporarily`), 10_000);
    } finally {
      await op.stop();
    }
    assert.deepEqual(calls.map((c) => c.retry), [0]);
    assert.equal(record.retries, 1);
    const delayed = Date.parse(String(record.delayed));

    const kopf = await runPythonKopf(namespace, { handlers: COMPAT_FIELD_HANDLERS });
    try {
      await kopf.waitForLine(new RegExp(`Handler '${FIELD_ID}' succeeded\\.`), 30_000);
    } finally {
      await kopf.stop();
    }
    const output = kopf.lines.join("\n");
    const markers = kopf.matching(/^COMPAT /);
    assert.equal(markers.length, 1, output);
    const [, retry, at] = /^COMPAT field_fn f retry=(\d+) at=(\d+)$/.exec(markers[0]!) ?? [];
    assert.equal(retry, "1", `Kopf continues our retry count: ${output}`);
    assert.ok(Number(at) >= delayed - 5, `Kopf retried ${delayed - Number(at)} ms early`);
    const done = await eventually(async () => {
      const body = await read(client, namespace, "f");
      return body.metadata?.annotations?.[FIELD_PROGRESS] === undefined &&
          statusOf(body)[FIELD_ID] !== undefined
        ? body
        : undefined;
    });
    assert.deepEqual(statusOf(done)[FIELD_ID], { message: "field from python" });
  },
);
