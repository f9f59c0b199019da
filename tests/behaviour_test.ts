/**
 * Subtle behaviours (features.md §32), checked end to end against a real API server the way a
 * user would check them: the object's status, annotations and finalizers, its Events, the
 * operator's log, and the requests the operator made (its own client's counters).
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import { on } from "../core/api/on.ts";
import type { KubeClient } from "../core/client/client.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import type { KubeApi } from "../core/client/api.ts";
import type { Diff } from "../core/structs/diffs.ts";
import type { KubeObject, ObjectMeta } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { PRESENT } from "../core/intents/filters.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  FINALIZER,
  KOPFEXAMPLES,
  LAST_HANDLED,
  PausableTcpProxy,
  PODTEMPLATES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const OTHER_FINALIZER = "example.com/other-controller";

/** For tests of the Events posted from log messages (off by default, as in Kopf 1.44+). */
function postLogMessages(settings: OperatorSettings): void {
  settings.posting.loggers = true;
}

/** Settings for fast tests: quick Events, quick stops. */
function fast(
  tweak: (settings: OperatorSettings) => void = () => {},
): OperatorSettings {
  const settings = createSettings({
    posting: { aggregationWindow: 0.2 },
    process: { gracePeriod: 1 },
    queueing: { exitTimeout: 1 },
  });
  tweak(settings);
  return settings;
}

function example(
  name: string,
  spec: unknown = {},
  metadata: ObjectMeta = {},
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name, ...metadata },
    spec,
  } as KubeObject;
}

async function read(
  client: KubeClient,
  namespace: string,
  name: string,
  resource: Resource = KOPFEXAMPLES,
): Promise<KubeObject> {
  return await client.api.get(resource, name, { namespace });
}

async function exists(
  client: KubeClient,
  namespace: string,
  name: string,
  resource: Resource = KOPFEXAMPLES,
): Promise<boolean> {
  try {
    await read(client, namespace, name, resource);
    return true;
  } catch (error) {
    if ((error as { code?: number }).code === 404) return false;
    throw error;
  }
}

interface StoredProgress {
  started?: string;
  stopped?: string;
  delayed?: string;
  purpose?: string;
  retries?: number;
  success?: boolean;
  failure?: boolean;
  message?: string;
}

/** The progress record of a handler, as stored in its annotation. */
function progressOf(body: KubeObject, id: string): StoredProgress | undefined {
  const raw = body.metadata?.annotations?.[`kopf.zalando.org/${id}`];
  return raw === undefined ? undefined : JSON.parse(raw);
}

function statusOf(body: KubeObject): Record<string, unknown> {
  return ((body as { status?: Record<string, unknown> }).status ?? {}) as Record<string, unknown>;
}

/** The core/v1 Events about an object (as `kubectl describe` shows them). */
async function eventsOf(
  client: KubeClient,
  namespace: string,
  uid: string,
): Promise<Array<{ type: string; reason: string; message: string }>> {
  const { items } = await client.api.list(EVENTS_RESOURCE, {
    namespace,
    fieldSelector: `involvedObject.uid=${uid}`,
  });
  return items.map((e) => {
    const event = e as unknown as { type: string; reason: string; message: string };
    return { type: event.type, reason: event.reason, message: event.message };
  });
}

/** Waits until an object's Events include one whose message matches. */
async function waitForEvent(
  client: KubeClient,
  namespace: string,
  uid: string,
  pattern: RegExp,
): Promise<{ type: string; reason: string; message: string }> {
  return await eventually(
    async () => (await eventsOf(client, namespace, uid)).find((e) => pattern.test(e.message)),
    15_000,
    `an Event ${pattern}`,
  );
}

/** The operator's requests to a resource other than watches, since a snapshot. */
function requestsSince(
  op: InProcessOperator,
  before: ReturnType<InProcessOperator["client"]["counters"]["snapshot"]>,
  resource = "kopfexamples",
) {
  const used = op.client.counters.since(before);
  return {
    writes: used.writes({ resource }),
    reads: used.count({ verb: ["get", "list"], resource }),
    all: JSON.stringify(used.entries()),
  };
}

function logged(op: InProcessOperator, pattern: RegExp): string[] {
  return op.logs.filter((e) => pattern.test(e.message)).map((e) => e.message);
}

async function removeFinalizer(api: KubeApi, namespace: string, name: string, finalizer: string) {
  const body = await api.get(KOPFEXAMPLES, name, { namespace });
  const index = body.metadata?.finalizers?.indexOf(finalizer) ?? -1;
  if (index < 0) return;
  await api.patch(KOPFEXAMPLES, name, [
    { op: "test", path: `/metadata/finalizers/${index}`, value: finalizer },
    { op: "remove", path: `/metadata/finalizers/${index}` },
  ], { namespace, type: "json" });
}

// ---------------------------------------------------------------------------------------------
// Progress, retries and delays
// ---------------------------------------------------------------------------------------------

Deno.test(
  "SUB-02/SUB-03: a retry survives an operator restart: the stored delay is honoured, then records are purged",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("restart");
    const attempts: Array<{ at: number; retry: number; process: number }> = [];
    let process = 1;
    const setup = (registry: OperatorRegistry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ retry }) => {
        attempts.push({ at: Date.now(), retry, process });
        if (attempts.length === 1) throw new TemporaryError("not yet", { delay: 3 });
        return { message: "done" };
      });
    };

    const first = await startOperator(setup, {
      namespaces: [namespace],
      settings: fast(postLogMessages),
    });
    await first.ready;
    await client.api.create(KOPFEXAMPLES, example("a", { field: "value" }), { namespace });
    const record = await eventually(
      async () => progressOf(await read(client, namespace, "a"), "create_fn"),
      20_000,
      "the progress record of the first attempt",
    );
    await first.stop();
    assert.equal(attempts.length, 1);
    assert.equal(record.retries, 1);
    assert.equal(record.purpose, "create");
    assert.equal(record.success, false);
    assert.equal(record.failure, false);
    assert.equal(record.message, "not yet");
    const delayed = Date.parse(record.delayed!);
    const started = Date.parse(record.started!);
    assert.ok(delayed - started >= 2_900 && delayed - started < 4_000, `${JSON.stringify(record)}`);

    process = 2;
    await using second = await startOperator(setup, {
      namespaces: [namespace],
      settings: fast(postLogMessages),
    });
    await second.ready;
    const startedBeforeDue = Date.now() < delayed;
    const done = await eventually(
      async () => {
        const body = await read(client, namespace, "a");
        return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
      },
      20_000,
      "the diff-base after the retry",
    );

    assert.equal(attempts.length, 2, JSON.stringify(attempts));
    assert.equal(attempts[1]!.process, 2);
    assert.equal(attempts[1]!.retry, 1, "the new process continues the retry count");
    assert.ok(startedBeforeDue, "the second operator started while the delay was pending");
    // The stored `delayed` has millisecond precision; allow for clock rounding only.
    assert.ok(
      attempts[1]!.at >= delayed - 5,
      `retried ${delayed - attempts[1]!.at} ms before the stored delay`,
    );
    assert.equal(progressOf(done, "create_fn"), undefined, "the record is purged");
    assert.equal(done.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"field":"value"}}\n');
    assert.deepEqual(statusOf(done).create_fn, { message: "done" });
    await second.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/);

    const uid = done.metadata!.uid!;
    const failed = await waitForEvent(client, namespace, uid, /create_fn' failed temporarily/);
    assert.equal(failed.message, "Handler 'create_fn' failed temporarily: not yet");
    assert.equal(failed.type, "Error");
    await waitForEvent(client, namespace, uid, /^Handler 'create_fn' succeeded\.$/);
  },
);

Deno.test(
  "SUB-41/SUB-11: retries=2 allows exactly 2 attempts, PermanentError 1; the object is then handled",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("retries");
    const calls = { flaky: 0, doomed: 0, update: 0 };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "flaky", retries: 2, backoff: 1 }, () => {
        calls.flaky++;
        throw new Error("boom");
      });
      on.create("kopfexamples", { registry, id: "doomed" }, () => {
        calls.doomed++;
        throw new PermanentError("no way");
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, () => {
        calls.update++;
      });
    }, { namespaces: [namespace], settings: fast(postLogMessages) });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await op.waitForLog(/^Creation is processed: 0 succeeded; 2 failed\.$/, 20_000);
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 0 });
    assert.equal(
      logged(op, /^Handler 'flaky' failed with an exception and will try again in 1 seconds: boom$/)
        .length,
      1,
    );
    // As Kopf: the second failure ends it at once, as a third attempt would exceed the retries.
    assert.deepEqual(logged(op, /failed permanently|has exceeded|will stop now/), [
      "Handler 'doomed' failed permanently: no way",
      "Handler 'flaky' failed with an exception and will stop now " +
      "(it would exceed 2 retries on the next attempt): boom",
    ]);

    const handled = await eventually(
      async () => {
        const body = await read(client, namespace, "a");
        return body.metadata?.annotations?.[LAST_HANDLED] ? body : undefined;
      },
      10_000,
      "the diff-base",
    );
    assert.equal(progressOf(handled, "flaky"), undefined);
    assert.equal(progressOf(handled, "doomed"), undefined);
    assert.equal(statusOf(handled).flaky, undefined, "failed attempts deliver no result");
    const uid = handled.metadata!.uid!;
    const doomed = await waitForEvent(client, namespace, uid, /doomed' failed permanently/);
    assert.equal(doomed.type, "Error");
    await waitForEvent(client, namespace, uid, /would exceed 2 retries/);

    await sleep(2_000); // past the backoff: nothing is retried any more
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 0 });

    // The next essential change is an update, not a second attempt at creation.
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    await eventually(() => calls.update === 1, 10_000, "the update handler");
    await sleep(500);
    assert.deepEqual(calls, { flaky: 2, doomed: 1, update: 1 });
  },
);

Deno.test(
  "SUB-05 (differs from Kopf): a delayed handler waits in memory: no touch-patches, no reads",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("inmemory");
    const attempts: number[] = [];
    const delay: {
      before?: ReturnType<InProcessOperator["client"]["counters"]["snapshot"]>;
      window?: ReturnType<typeof requestsSince>;
    } = {};
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {
        attempts.push(Date.now());
        if (attempts.length === 1) throw new TemporaryError("wait", { delay: 3 });
        if (delay.before) delay.window = requestsSince(op, delay.before);
        return { ok: true };
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const delayedBody = await eventually(
      async () => {
        const body = await read(client, namespace, "a");
        return progressOf(body, "create_fn") ? body : undefined;
      },
      20_000,
      "the progress record",
    );
    await eventually(() => op.client.counters.writes({ resource: "kopfexamples" }) >= 1);
    delay.before = op.client.counters.snapshot();

    // Watch the object during the delay: its resourceVersion must not move.
    const versions = new Set<string>();
    while (attempts.length < 2) {
      const body = await read(client, namespace, "a");
      if (attempts.length < 2) versions.add(body.metadata!.resourceVersion!);
      assert.equal(
        Object.keys(body.metadata?.annotations ?? {}).filter((k) => k.includes("dummy")).length,
        0,
        "no touch-dummy annotations",
      );
      await sleep(200);
    }
    assert.deepEqual([...versions], [delayedBody.metadata!.resourceVersion!]);
    const window = delay.window;
    assert.ok(window, "the retry ran after the snapshot");
    assert.equal(window.writes, 0, `writes during the delay: ${window.all}`);
    assert.equal(window.reads, 0, `reads during the delay: ${window.all}`);
    assert.ok(
      attempts[1]! - attempts[0]! >= 2_900,
      `retried after ${attempts[1]! - attempts[0]!} ms`,
    );
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
  },
);

// ---------------------------------------------------------------------------------------------
// Deletion and finalizers
// ---------------------------------------------------------------------------------------------

Deno.test(
  "SUB-04: deletion during creation retries: the delete handler runs, creation is superseded",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("supersede");
    const calls = { create: 0, delete: 0 };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {
        calls.create++;
        throw new TemporaryError("not yet", { delay: 2 });
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.delete++;
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    // Another controller's finalizer keeps the object visible after ours is gone.
    await client.api.create(
      KOPFEXAMPLES,
      example("a", {}, { finalizers: [OTHER_FINALIZER] }),
      { namespace },
    );
    await eventually(async () => progressOf(await read(client, namespace, "a"), "create_fn"));
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    const released = await eventually(
      async () => {
        const body = await read(client, namespace, "a");
        return body.metadata?.finalizers?.includes(FINALIZER) ? undefined : body;
      },
      15_000,
      "our finalizer to be removed",
    );
    const creates = calls.create;
    assert.equal(calls.delete, 1);
    assert.deepEqual(released.metadata?.finalizers, [OTHER_FINALIZER]);
    assert.equal(progressOf(released, "delete_fn"), undefined, "deletion records are purged");
    assert.equal(
      progressOf(released, "create_fn"),
      undefined,
      "the creation record is superseded and purged",
    );
    assert.ok(logged(op, /superseded/i).length >= 1, "the superseding is logged");
    await sleep(2_500); // past the creation's retry delay
    assert.equal(calls.create, creates, "creation is not retried during deletion");
    await removeFinalizer(client.api, namespace, "a", OTHER_FINALIZER);
    await eventually(async () => !(await exists(client, namespace, "a")));
  },
);

Deno.test(
  "SUB-04: deletion during creation retries: the delete handler runs and the object goes",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("delcreate");
    const calls = { create: 0, delete: 0 };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {
        calls.create++;
        throw new TemporaryError("not yet", { delay: 2 });
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.delete++;
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    await eventually(async () => progressOf(await read(client, namespace, "a"), "create_fn"));
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
    const creates = calls.create;
    assert.equal(calls.delete, 1);
    assert.ok(creates >= 1);
    await op.waitForLog(/^Deletion is processed: 1 succeeded; 0 failed\.$/);
    await sleep(2_500); // past the creation's retry delay: nothing runs for the gone object
    assert.deepEqual(calls, { create: creates, delete: 1 });
  },
);

Deno.test(
  "SUB-20: with a delete handler, the finalizer is added in a cycle of its own before any handler",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("finadd");
    const seen: Array<string[] | undefined> = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ meta }) => {
        seen.push(meta.finalizers ? [...meta.finalizers] : undefined);
        return { done: true };
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {});
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await eventually(async () => {
      const body = await read(client, namespace, "a");
      return statusOf(body).create_fn ? body : undefined;
    });
    await sleep(1_000);
    assert.deepEqual(seen, [[FINALIZER]], "the handler ran once, with the finalizer in place");
    assert.deepEqual(handled.metadata?.finalizers, [FINALIZER]);
    const used = requestsSince(op, before);
    assert.equal(used.writes, 2, `one write for the finalizer, one for the handler: ${used.all}`);
    assert.equal(used.reads, 0, used.all);
    const order = op.logs.map((e) => e.message).filter((m) =>
      /Adding the finalizer|Handler 'create_fn' succeeded/.test(m)
    );
    assert.deepEqual(order, [
      "Adding the finalizer, thus preventing the actual deletion.",
      "Handler 'create_fn' succeeded.",
    ]);
  },
);

Deno.test(
  "SUB-22: an optional delete handler adds no finalizer; deletion is not blocked",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("finopt");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ done: true }));
      on.delete("kopfexamples", { registry, id: "delete_fn", optional: true }, () => {});
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    const before = op.client.counters.snapshot();
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await eventually(async () => {
      const body = await read(client, namespace, "a");
      return statusOf(body).create_fn ? body : undefined;
    });
    assert.equal(handled.metadata?.finalizers, undefined);
    assert.equal(requestsSince(op, before).writes, 1);
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    assert.equal(await exists(client, namespace, "a"), false, "deleted at once");
  },
);

Deno.test(
  "SUB-21: another controller's finalizer added concurrently is kept; deletion waits for it",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("finother");
    const calls = { delete: 0 };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, async ({ name }) => {
        // Another controller adds its finalizer in front of ours while our cycle runs (after
        // the operator read the object, before it writes its outcome).
        await client.api.patch(KOPFEXAMPLES, name!, [
          { op: "add", path: "/metadata/finalizers/0", value: OTHER_FINALIZER },
        ], { namespace, type: "json" });
        return { done: true };
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.delete++;
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const handled = await eventually(async () => {
      const body = await read(client, namespace, "a");
      return statusOf(body).create_fn ? body : undefined;
    });
    assert.deepEqual(handled.metadata?.finalizers, [OTHER_FINALIZER, FINALIZER]);

    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    const released = await eventually(
      async () => {
        const body = await read(client, namespace, "a");
        return body.metadata?.finalizers?.includes(FINALIZER) ? undefined : body;
      },
      15_000,
      "our finalizer to be removed",
    );
    assert.equal(calls.delete, 1);
    assert.deepEqual(released.metadata?.finalizers, [OTHER_FINALIZER], "only ours is removed");
    assert.ok(released.metadata?.deletionTimestamp);
    await sleep(1_000);
    assert.ok(await exists(client, namespace, "a"), "the object waits for the other finalizer");
    assert.equal(calls.delete, 1, "the delete handler is not repeated while waiting");
    await removeFinalizer(client.api, namespace, "a", OTHER_FINALIZER);
    await eventually(async () => !(await exists(client, namespace, "a")));
  },
);

/**
 * Another controller (first in the finalizers list) releases the object while our delete handler
 * runs. Returns how many times our delete handler ran.
 */
async function releaseRace(): Promise<number> {
  using client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace("finrace");
  const calls = { delete: 0 };
  await using op = await startOperator((registry) => {
    on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ done: true }));
    on.delete("kopfexamples", { registry, id: "delete_fn" }, async ({ name }) => {
      calls.delete++;
      if (calls.delete === 1) await removeFinalizer(client.api, namespace, name!, OTHER_FINALIZER);
    });
  }, { namespaces: [namespace], settings: fast() });
  await op.ready;
  await client.api.create(
    KOPFEXAMPLES,
    example("a", {}, { finalizers: [OTHER_FINALIZER] }),
    { namespace },
  );
  await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
  assert.deepEqual((await read(client, namespace, "a")).metadata?.finalizers, [
    OTHER_FINALIZER,
    FINALIZER,
  ]);
  await client.api.delete(KOPFEXAMPLES, "a", { namespace });
  // Gone: our finalizer was removed, and the other one was not put back.
  await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
  await op.waitForLog(/^Deletion is processed: 1 succeeded; 0 failed\.$/);
  return calls.delete;
}

Deno.test(
  "SUB-21: another controller releasing its finalizer during our deletion is not undone",
  opts,
  async () => {
    const runs = await releaseRace();
    assert.ok(runs >= 1 && runs <= 2, `the delete handler ran ${runs} times`);
  },
);

Deno.test(
  "SUB-21: a succeeded delete handler is not re-run when its finalizer removal conflicts",
  opts,
  async () => {
    assert.equal(await releaseRace(), 1);
  },
);

// ---------------------------------------------------------------------------------------------
// Resuming, re-listing
// ---------------------------------------------------------------------------------------------

interface RelistOutcome {
  /** Names the resume handler ran for, in order. */
  readonly resumed: string[];
  /** Names the create handler ran for, in order. */
  readonly created: string[];
  /** How many times the event handler saw each object in a listing (type null). */
  readonly listed: (name: string) => number;
  /** The operator, still running (disposed by the caller). */
  readonly op: InProcessOperator;
}

/**
 * Two podtemplates are handled by a first operator; a third appears while no operator runs; a
 * second operator (through a pausable proxy) resumes; then it is cut off while one object changes
 * and another is born, and etcd is compacted, so that its watch gets 410 Gone and relists.
 * Podtemplates are served from etcd in the test plane (no watch cache), hence the 410.
 */
async function relistScenario(): Promise<RelistOutcome & AsyncDisposable> {
  const plane = await sharedControlPlane();
  using direct = await testClient();
  const namespace = await testNamespace("resume");
  const template = (name: string): KubeObject => ({
    metadata: { name },
    template: { spec: { containers: [{ name: "c", image: "busybox" }] } },
  } as KubeObject);
  const diffbase = async (name: string) =>
    (await read(direct, namespace, name, PODTEMPLATES)).metadata?.annotations?.[LAST_HANDLED];

  // A first operator handles two objects (they get a diff-base), then stops.
  for (const name of ["old-1", "old-2"]) {
    await direct.api.create(PODTEMPLATES, template(name), { namespace });
  }
  const first = await startOperator((registry) => {
    on.create("podtemplates", { registry, id: "create_fn" }, () => {});
  }, { namespaces: [namespace], settings: fast() });
  await first.ready;
  for (const name of ["old-1", "old-2"]) await eventually(() => diffbase(name));
  await first.stop();
  // One more object appears while no operator runs: it is new, not resumed.
  await direct.api.create(PODTEMPLATES, template("fresh"), { namespace });

  // The second operator talks to the API server through a proxy that can cut it off.
  const proxy = PausableTcpProxy.inFrontOf(direct);
  const proxied = proxy.client(direct);
  const resumed: string[] = [];
  const created: string[] = [];
  const events: Array<[string, string | null]> = [];
  const op = await startOperator((registry) => {
    on.resume("podtemplates", { registry, id: "resume_fn" }, ({ name }) => {
      resumed.push(name!);
    });
    on.create("podtemplates", { registry, id: "create_fn" }, ({ name }) => {
      created.push(name!);
    });
    on.event("podtemplates", { registry, id: "event_fn" }, ({ name, type }) => {
      events.push([name!, type]);
    });
  }, {
    namespaces: [namespace],
    client: proxied,
    settings: fast((s) => (s.watching.inactivityTimeout = 1)),
  });
  const dispose = async () => {
    await op.stop();
    await proxy[Symbol.asyncDispose]();
  };
  try {
    await op.ready;
    await eventually(() => resumed.length === 2 && created.length === 1, 15_000, "resume+create");
    const lists = op.client.counters.count({ verb: "list", resource: "podtemplates" });

    // Cut the operator off, change things behind its back, compact the history away: its watch
    // must get 410 Gone and relist.
    proxy.pause();
    await direct.api.patch(PODTEMPLATES, "old-1", { metadata: { labels: { changed: "yes" } } }, {
      namespace,
    });
    await direct.api.create(PODTEMPLATES, template("born"), { namespace });
    await sleep(1_500); // the silent stream is given up; the reconnect waits in the proxy
    await plane.compact();
    proxy.resume();
    await eventually(
      () => op.client.counters.count({ verb: "list", resource: "podtemplates" }) > lists,
      20_000,
      "a relist",
    );
    await eventually(() => created.includes("born"), 15_000, "the object born during the cut");
    await eventually(async () => (await diffbase("old-1"))?.includes("changed"), 15_000, "update");
    await sleep(1_000);
  } catch (error) {
    await dispose();
    throw error;
  }
  const listed = (name: string) => events.filter(([n, type]) => n === name && type === null).length;
  return { resumed, created, listed, op, [Symbol.asyncDispose]: dispose };
}

Deno.test(
  "SUB-12/SUB-16/SUB-30: resume handlers run once per process; a 410 relist repeats neither resume nor create",
  opts,
  async () => {
    await using outcome = await relistScenario();
    assert.deepEqual(outcome.resumed.sort(), ["old-1", "old-2"], "once per object");
    assert.deepEqual(
      outcome.created.sort(),
      ["born", "fresh"],
      "create is never mixed with resume",
    );
    assert.ok(outcome.listed("fresh") >= 1, "listed objects come to event handlers with type null");
  },
);

Deno.test(
  "SUB-35: event handlers see every re-listing (type null) after a 410",
  opts,
  async () => {
    await using outcome = await relistScenario();
    assert.ok(outcome.listed("old-2") >= 2, "the unchanged object is listed again");
  },
);

Deno.test(
  "SUB-16: resume handlers skip objects being deleted, unless deleted=true",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("resumedel");
    const first = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {});
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {});
    }, { namespaces: [namespace], settings: fast() });
    await first.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    await eventually(async () =>
      (await read(client, namespace, "a")).metadata?.annotations?.[LAST_HANDLED]
    );
    await first.stop();
    await client.api.delete(KOPFEXAMPLES, "a", { namespace }); // held by our finalizer

    const calls: string[] = [];
    await using op = await startOperator((registry) => {
      on.resume("kopfexamples", { registry, id: "resume_plain" }, () => {
        calls.push("resume_plain");
      });
      on.resume("kopfexamples", { registry, id: "resume_deleted", deleted: true }, () => {
        calls.push("resume_deleted");
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.push("delete_fn");
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
    assert.deepEqual(calls.sort(), ["delete_fn", "resume_deleted"]);
  },
);

// ---------------------------------------------------------------------------------------------
// Updates and diffs; event handlers
// ---------------------------------------------------------------------------------------------

Deno.test(
  "SUB-10/SUB-13/SUB-15: update and field handlers get old/new/diff; status-only changes are ignored",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("diffs");
    const updates: Array<{ old: unknown; new: unknown; diff: Diff }> = [];
    const fields: Array<{ reason: string; old: unknown; new: unknown; diff: Diff }> = [];
    const growing: unknown[] = [];
    await using op = await startOperator((registry) => {
      on.update("kopfexamples", { registry, id: "update_fn" }, (c) => {
        updates.push({ old: c.old, new: c.new, diff: c.diff });
      });
      on.field("kopfexamples", { registry, id: "field_fn", field: "spec.field" }, (c) => {
        fields.push({ reason: c.reason, old: c.old, new: c.new, diff: c.diff });
      });
      on.field(
        "kopfexamples",
        { registry, id: "growing_fn", field: "spec.size", new: (v) => Number(v) > 1 },
        (c) => {
          growing.push(c.new);
        },
      );
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a", { field: "a", size: 1 }), { namespace });
    await eventually(() => fields.length === 1, 10_000, "the field handler at creation");
    assert.deepEqual(fields[0], {
      reason: "create",
      old: undefined,
      new: "a",
      diff: [["add", [], null, "a"]],
    });
    await eventually(async () =>
      (await read(client, namespace, "a")).metadata?.annotations?.[LAST_HANDLED]
    );
    assert.equal(updates.length, 0, "no update handler at creation");

    await client.api.patch(KOPFEXAMPLES, "a", { spec: { field: "b" } }, { namespace });
    await eventually(() => updates.length === 1 && fields.length === 2, 10_000, "the update");
    assert.deepEqual(updates[0], {
      old: { spec: { field: "a", size: 1 } },
      new: { spec: { field: "b", size: 1 } },
      diff: [["change", ["spec", "field"], "a", "b"]],
    });
    assert.deepEqual(fields[1], {
      reason: "update",
      old: "a",
      new: "b",
      diff: [["change", [], "a", "b"]],
    });

    // A status-only change is not essential: nothing runs, nothing is written.
    const before = op.client.counters.snapshot();
    await client.api.patch(KOPFEXAMPLES, "a", { status: { external: "x" } }, { namespace });
    await sleep(1_500);
    assert.equal(updates.length, 1);
    assert.equal(fields.length, 2);
    assert.equal(requestsSince(op, before).writes, 0);

    // Another field changes: the update handler runs, the field handler does not; the value
    // filter of the other field handler passes only for the new value.
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    await eventually(() => updates.length === 2 && growing.length === 1, 10_000, "2nd update");
    assert.deepEqual(updates[1]!.diff, [["change", ["spec", "size"], 1, 2]]);
    assert.deepEqual(growing, [2]);
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 1 } }, { namespace });
    await eventually(() => updates.length === 3, 10_000, "3rd update");
    await sleep(500);
    assert.equal(fields.length, 2, "the field handler only runs when its field changes");
    assert.deepEqual(growing, [2], "the new= filter rejects the shrinking change");
  },
);

Deno.test(
  "SUB-35/SUB-40: event handlers see the listing (type null) and raw events; errors are ignored",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("events");
    await client.api.create(KOPFEXAMPLES, example("pre"), { namespace });
    const seen: Array<[string, string | null]> = [];
    let broken = 0;
    await using op = await startOperator((registry) => {
      on.event("kopfexamples", { registry, id: "event_fn" }, ({ name, type }) => {
        seen.push([name!, type]);
      });
      on.event("kopfexamples", { registry, id: "broken_fn" }, () => {
        broken++;
        throw new Error("event handler bug");
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await eventually(() => seen.some(([n]) => n === "pre"), 10_000, "the listing");
    assert.deepEqual(seen, [["pre", null]], "a listed object comes with type null");

    await client.api.create(KOPFEXAMPLES, example("b"), { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "ADDED"));
    await client.api.patch(KOPFEXAMPLES, "b", { spec: { x: 1 } }, { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "MODIFIED"));
    const uid = (await read(client, namespace, "b")).metadata!.uid!;
    await client.api.delete(KOPFEXAMPLES, "b", { namespace });
    await eventually(() => seen.some(([n, t]) => n === "b" && t === "DELETED"));
    await sleep(500);
    assert.deepEqual(seen, [["pre", null], ["b", "ADDED"], ["b", "MODIFIED"], ["b", "DELETED"]]);
    assert.equal(broken, 4, "the failing handler ran once per event, never retried");
    assert.equal(
      logged(op, /^Handler 'broken_fn' failed with an exception and will ignore it: /).length,
      4,
    );
    assert.equal(op.client.counters.writes({ resource: "kopfexamples" }), 0, "nothing to write");
    // Their messages stay in the log: event handlers do not post Events.
    const posted = await eventsOf(client, namespace, uid);
    assert.equal(posted.filter((e) => /broken_fn/.test(e.message)).length, 0, `${posted}`);
    assert.ok(!op.logs.some((e) => e.level === "critical"));
  },
);

Deno.test(
  "SUB-35/SUB-78: an event handler's result goes to status; the same result is not rewritten in a loop",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("evresult");
    const seen: Array<[string, string | null]> = [];
    await using op = await startOperator((registry) => {
      on.event("kopfexamples", { registry, id: "event_fn" }, ({ name, type }) => {
        seen.push([name!, type]);
        return { seen: true };
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    const body = await eventually(async () => {
      const body = await read(client, namespace, "a");
      return statusOf(body).event_fn ? body : undefined;
    });
    assert.deepEqual(statusOf(body).event_fn, { seen: true });
    await sleep(1_000);
    const settled = { calls: seen.length, writes: op.client.counters.writes() };
    await sleep(1_000);
    assert.deepEqual(
      { calls: seen.length, writes: op.client.counters.writes() },
      settled,
      `no feedback loop: ${seen.length} calls so far`,
    );
    assert.ok(seen.length <= 3, `the handler ran ${seen.length} times for 2 events`);
  },
);

// ---------------------------------------------------------------------------------------------
// Robustness; request counts
// ---------------------------------------------------------------------------------------------

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
    await using op = await startOperator((registry) => {
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
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
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

Deno.test(
  "SUB-06: an update handler on a change costs exactly one write",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("updwrite");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => ({ created: true }));
      on.update("kopfexamples", { registry, id: "update_fn" }, ({ spec }) => ({ size: spec.size }));
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
    await sleep(500);
    const before = op.client.counters.snapshot();
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { size: 2 } }, { namespace });
    const updated = await eventually(async () => {
      const body = await read(client, namespace, "a");
      return statusOf(body).update_fn ? body : undefined;
    });
    await sleep(1_000);
    const used = requestsSince(op, before);
    assert.equal(used.writes, 1, used.all);
    assert.equal(used.reads, 0, used.all);
    assert.deepEqual(statusOf(updated).update_fn, { size: 2 });
    assert.equal(updated.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"size":2}}\n');
    assert.equal(progressOf(updated, "update_fn"), undefined);
  },
);

Deno.test(
  "SUB-31: a change made while a handler runs is handled afterwards (not lost behind our write)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("racing");
    const updates: Diff[] = [];
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, async ({ name }) => {
        // A user changes the spec while the handler runs (after the operator read the object).
        await client.api.patch(KOPFEXAMPLES, name!, { spec: { size: 2 } }, { namespace });
        return { created: true };
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, ({ diff }) => {
        updates.push(diff);
      });
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, example("a", { size: 1 }), { namespace });
    await eventually(async () => statusOf(await read(client, namespace, "a")).create_fn);
    await eventually(() => updates.length > 0, 10_000, "the update handler for the racing change");
    assert.deepEqual(updates, [[["change", ["spec", "size"], 1, 2]]]);
    const body = await read(client, namespace, "a");
    assert.equal(body.metadata?.annotations?.[LAST_HANDLED], '{"spec":{"size":2}}\n');
  },
);

Deno.test(
  "FLT-17/SUB-14: an object matching no handler costs zero writes; when it starts matching, it is created",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("stealth");
    const created: string[] = [];
    const updated: string[] = [];
    await using op = await startOperator((registry) => {
      on.create(
        "kopfexamples",
        { registry, id: "create_fn", labels: { mine: "yes" } },
        ({ name }) => {
          created.push(name!);
        },
      );
      on.update(
        "kopfexamples",
        { registry, id: "update_fn", labels: { mine: "yes" } },
        ({ name }) => {
          updated.push(name!);
        },
      );
      on.delete("kopfexamples", { registry, id: "delete_fn", labels: { mine: "yes" } }, () => {});
    }, { namespaces: [namespace], settings: fast() });
    await op.ready;
    const before = op.client.counters.snapshot();
    const stranger = await client.api.create(KOPFEXAMPLES, example("stranger"), { namespace });
    await client.api.create(KOPFEXAMPLES, example("mine", {}, { labels: { mine: "yes" } }), {
      namespace,
    });
    await eventually(async () =>
      (await read(client, namespace, "mine")).metadata?.annotations?.[LAST_HANDLED]
    );
    await sleep(1_000);
    const after = await read(client, namespace, "stranger");
    assert.equal(
      after.metadata?.resourceVersion,
      stranger.metadata?.resourceVersion,
      `the stranger was written to: ${JSON.stringify(after.metadata?.annotations)}`,
    );
    assert.equal(after.metadata?.annotations, undefined, "no state on the stranger");
    assert.equal(after.metadata?.finalizers, undefined, "no finalizer on the stranger");
    const used = requestsSince(op, before);
    assert.equal(used.writes, 2, `finalizer + diff-base of 'mine' only: ${used.all}`);
    assert.equal(logged(op, /stranger/).length, 0);
    assert.ok(!op.logs.some((e) => e.object?.name === "stranger"), "no logs about the stranger");

    // It starts matching: that is a creation, not an update.
    await client.api.patch(KOPFEXAMPLES, "stranger", { metadata: { labels: { mine: "yes" } } }, {
      namespace,
    });
    await eventually(() => created.includes("stranger"), 10_000, "the creation");
    await sleep(500);
    assert.deepEqual(created.sort(), ["mine", "stranger"]);
    assert.deepEqual(updated, []);
  },
);
