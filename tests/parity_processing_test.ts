/**
 * How objects are processed, as docs/parity.md lists it against Kopf's documentation: the
 * settings sections and the worker limit under Kopf's name (CFG-02), the `spec` and `status`
 * that handlers and daemons get (API-03), the framework's own Events (ERR-13), and the finalizer
 * that follows the handlers needing it (PST-54). Against the real control plane.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import { gone } from "./_parity.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

// ---------------------------------------------------------------------------------------------
// CFG-02: the settings sections.

Deno.test(
  "settings have Kopf's sections; batching is the queueing section under Kopf's name: a startup handler's settings.batching.workerLimit = 1 serialises the objects of a stream (CFG-02)",
  opts,
  async () => {
    const settings = createSettings();
    const sections = [
      "process",
      "posting",
      "peering",
      "watching",
      "batching",
      "scanning",
      "admission",
      "execution",
      "background",
      "networking",
      "persistence",
    ] as const;
    for (const section of sections) {
      assert.equal(typeof settings[section], "object", `settings.${section}`);
    }
    assert.equal(settings.batching, settings.queueing, "batching is queueing, not a copy");
    assert.equal(createSettings({ batching: { workerLimit: 3 } }).queueing.workerLimit, 3);

    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cfg02");
    let running = 0;
    let most = 0;
    const handled: string[] = [];
    const op = await startOperator((registry) => {
      on.startup({ registry }, function limit({ settings }) {
        settings.batching.workerLimit = 1;
      });
      on.create("kopfexamples", { registry }, async function slow({ name }) {
        running++;
        most = Math.max(most, running);
        await sleep(300);
        running--;
        handled.push(name);
      });
    }, { namespaces: [namespace] });
    try {
      await op.ready;
      await Promise.all(
        ["a", "b", "c"].map((name) => client.api.create(KOPFEXAMPLES, kex(name), { namespace })),
      );
      await eventually(() => handled.length === 3, 30_000, "all three objects handled");
      assert.equal(most, 1, "one object at a time with settings.batching.workerLimit = 1");
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// API-03: spec and status.

Deno.test(
  "spec and status: the body's own objects in handlers (empty objects when absent); in daemons, read-only live mapping views (API-03)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("api03");
    const seen: Array<{ name: string; own: boolean; spec: unknown; status: unknown }> = [];
    const views: Array<{ value: unknown; phase: unknown; keys: string[]; writable: boolean }> = [];
    const op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function plain({ name, body, spec, status }) {
        seen.push({
          name,
          own: spec === (body.spec ?? spec) && status === (body.status ?? status),
          spec: structuredClone(spec),
          status: structuredClone(status),
        });
      });
      on.daemon(
        "kopfexamples",
        { registry, labels: { daemon: "yes" } },
        async function live({ spec, status, stopped }) {
          while (!stopped.aborted) {
            let writable = true;
            try {
              (spec as Record<string, unknown>).value = 99;
            } catch {
              writable = false;
            }
            views.push({
              value: spec.value,
              phase: status.phase,
              keys: Object.keys(spec),
              writable,
            });
            await sleep(100);
          }
        },
      );
    }, { namespaces: [namespace] });
    try {
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("bare"), { namespace });
      await client.api.create(KOPFEXAMPLES, {
        ...kex("full", { value: 1 }, { daemon: "yes" }),
        status: { phase: "new" },
      }, { namespace });
      await eventually(() => seen.length === 2, 30_000, "both objects handled");
      const bare = seen.find((s) => s.name === "bare")!;
      const full = seen.find((s) => s.name === "full")!;
      assert.deepEqual(bare.spec, {});
      assert.deepEqual(bare.status, {});
      assert.ok(full.own, "spec and status are the body's own objects");
      assert.deepEqual(full.spec, { value: 1 });
      assert.deepEqual(full.status, { phase: "new" });

      await eventually(() => views.length > 0, 30_000, "the daemon");
      assert.deepEqual(views[0], { value: 1, phase: "new", keys: ["value"], writable: false });
      await client.api.patch(
        KOPFEXAMPLES,
        "full",
        { spec: { value: 2, extra: true }, status: { phase: "changed" } },
        { namespace },
      );
      const changed = await eventually(
        () => views.find((v) => v.value === 2 && v.phase === "changed"),
        30_000,
        "the same spec and status views showing the change",
      );
      assert.deepEqual(changed.keys.toSorted(), ["extra", "value"]);
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// ERR-13: the framework's Events.

Deno.test(
  "the framework's own Events: Normal/Logging 'Handler 'create_fn' succeeded.' and 'Creation is processed: 1 succeeded; 0 failed.' from kopf, with settings.posting.loggers (ERR-13)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("err-events");
    interface EventBody {
      type: string;
      reason: string;
      message: string;
      source?: { component?: string };
      reportingComponent?: string;
    }
    const eventsOf = async (uid: string) =>
      (await client.api.list(EVENTS_RESOURCE, {
        namespace,
        fieldSelector: `involvedObject.uid=${uid}`,
      })).items as unknown as EventBody[];
    const run = async (loggers: boolean, name: string) => {
      const settings = createSettings({ posting: { aggregationWindow: 0.2, loggers } });
      await using op = await startOperator((registry) => {
        on.create("kopfexamples", { registry }, function create_fn() {});
      }, { namespaces: [namespace], settings });
      await op.ready;
      const created = await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
      await op.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/);
      return created.metadata!.uid!;
    };

    const uid = await run(true, "posted");
    const expected = [
      "Handler 'create_fn' succeeded.",
      "Creation is processed: 1 succeeded; 0 failed.",
    ];
    const events = await eventually(
      async () => {
        const all = await eventsOf(uid);
        return expected.every((m) => all.some((e) => e.message === m)) ? all : undefined;
      },
      15_000,
      "the framework's Events",
    );
    for (const message of expected) {
      const event = events.find((e) => e.message === message)!;
      assert.equal(event.type, "Normal");
      assert.equal(event.reason, "Logging", "current Kopf: reason Logging, not Success/Finished");
      assert.equal(event.source?.component, "kopf");
      assert.equal(event.reportingComponent, "kopf");
    }

    // Off by default (as in Kopf 1.44+): the same lines are only logged.
    const quiet = await run(false, "quiet");
    await sleep(1_000); // several aggregation windows
    assert.deepEqual((await eventsOf(quiet)).map((e) => e.message), []);
  },
);

// ---------------------------------------------------------------------------------------------
// PST-54: the finalizer.

Deno.test(
  "the finalizer follows the handlers that need it: a new operator version without delete handlers removes it, one with them adds it back (PST-54)",
  opts,
  async (t) => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("pst-finalizer");
    await client.api.create(KOPFEXAMPLES, kex("f1", { v: 1 }), { namespace });
    const finalizers = async () =>
      (await client.api.get(KOPFEXAMPLES, "f1", { namespace })).metadata?.finalizers ?? [];
    /** Runs one "version" of the operator until the object's finalizers are as expected. */
    const version = async (
      setup: (registry: OperatorRegistry) => void,
      expected: string[],
      log: RegExp,
    ) => {
      await using op = await startOperator(setup, {
        namespaces: [namespace],
        settings: createSettings({ posting: { enabled: false } }),
      });
      await op.ready;
      await op.waitForLog(log);
      await eventually(
        async () => JSON.stringify(await finalizers()) === JSON.stringify(expected),
        15_000,
        `finalizers ${JSON.stringify(expected)}`,
      );
    };
    const added = /^Adding the finalizer, thus preventing the actual deletion\.$/;
    const removed = /^Removing the finalizer, as there are no handlers requiring it\.$/;

    await t.step("v1 with a delete handler adds it", async () => {
      await version(
        (registry) => {
          on.create("kopfexamples", { registry }, function create_fn() {});
          on.delete("kopfexamples", { registry }, function delete_fn() {});
        },
        [FINALIZER],
        added,
      );
    });
    await t.step("v2 without (only an optional one) removes it", async () => {
      await version(
        (registry) => {
          on.create("kopfexamples", { registry }, function create_fn() {});
          on.update("kopfexamples", { registry }, function update_fn() {});
          on.delete("kopfexamples", { registry, optional: true }, function delete_fn() {});
        },
        [],
        removed,
      );
    });
    await t.step("v3 with a delete handler again adds it back", async () => {
      await version(
        (registry) => {
          on.delete("kopfexamples", { registry }, function delete_fn() {});
        },
        [FINALIZER],
        added,
      );
    });
    await t.step("v4 with only event-watching handlers removes it", async () => {
      await version(
        (registry) => {
          on.event("kopfexamples", { registry }, function watch() {});
        },
        [],
        removed,
      );
    });
    await client.api.delete(KOPFEXAMPLES, "f1", { namespace });
    await gone(client, KOPFEXAMPLES, "f1", namespace);
  },
);
