/**
 * Parity rows of handlers, activities, memos and events that had no test of their own, proven
 * against the real control plane: daemon cancellation polling and the absence of implicit
 * timeouts, activity options, kwargs and logger names, admission options that are refused,
 * the framework's Events, the finalizer following the handlers that need it, per-object memos
 * (custom classes via embedding, nothing persisted), and unavailable API groups in discovery.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import { type LogEntry, Logger } from "../core/actions/loggers.ts";
import { start } from "../core/api/embedding.ts";
import { index } from "../core/api/indexing.ts";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { ConnectionInfo } from "../core/client/connection.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import type { HttpClientOptions } from "../core/client/http.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import { ActivityError } from "../core/engines/runners/activities.ts";
import type { ActivityContext, IndexView, Memo } from "../core/intents/contexts.ts";
import { getDefaultRegistry, OperatorRegistry } from "../core/intents/registries.ts";
import { httpOptions, operator } from "../core/reactor/lifetime/running.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import type { Resource } from "../core/structs/resources.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  FINALIZER,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** Waits until an object is gone from the API server. */
async function gone(
  client: KubeClient,
  resource: Resource,
  name: string,
  namespace: string,
  timeoutMs = 15_000,
): Promise<void> {
  await eventually(
    async () => {
      try {
        await client.api.get(resource, name, { namespace });
        return false;
      } catch {
        return true;
      }
    },
    timeoutMs,
    `${name} to be gone`,
  );
}

/** A promise with its resolver, for handlers that wait for the test. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

// ---------------------------------------------------------------------------------------------
// Daemons
// ---------------------------------------------------------------------------------------------

Deno.test(
  "an exiting daemon without a cancellation timeout is re-checked every cancellationPolling seconds: the handler's option, else settings.background.cancellationPolling (HK-DMN-07, CFG-90)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    assert.equal(createSettings().background.cancellationPolling, 60, "Kopf's default: 60 s");
    /** Runs daemons that ignore `stopped` for 1.5 s; returns the "still exiting" warnings by id. */
    const run = async (
      settings: OperatorSettings,
      daemons: Record<string, number | undefined>,
    ): Promise<Record<string, number>> => {
      const namespace = await testNamespace("dmn-polling");
      const started = new Set<string>();
      const cancelled: string[] = [];
      await using op = await startOperator((registry) => {
        for (const [id, cancellationPolling] of Object.entries(daemons)) {
          daemon("kopfexamples", { registry, id, cancellationPolling }, async (ctx) => {
            started.add(id);
            await new Promise((resolve) => ctx.stopped.addEventListener("abort", resolve));
            await sleep(1_500); // not listening: still exiting for a while
            if (ctx.signal.aborted) cancelled.push(id);
          });
        }
      }, { namespaces: [namespace], settings });
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("p1"), { namespace });
      await eventually(() => started.size === Object.keys(daemons).length, 15_000, "daemons");
      await client.api.delete(KOPFEXAMPLES, "p1", { namespace });
      await gone(client, KOPFEXAMPLES, "p1", namespace);
      assert.deepEqual(cancelled, [], "without a cancellation timeout, never cancelled");
      return Object.fromEntries(
        Object.keys(daemons).map((id) => [
          id,
          op.logs.filter((e) =>
            e.message === `daemon '${id}' is still exiting (resource-deleted); waiting for it`
          ).length,
        ]),
      );
    };

    // Default settings (60 s): only the daemon with its own short polling is re-checked.
    const byOption = await run(createSettings({ posting: { enabled: false } }), {
      own: 0.25,
      inherited: undefined,
    });
    assert.ok(byOption.own! >= 2, `re-checked every 0.25 s: ${JSON.stringify(byOption)}`);
    assert.equal(byOption.inherited, 0, "the settings' 60 s: not re-checked within 1.5 s");

    // The settings' value is the default of every daemon; the handler's option overrides it.
    const bySettings = await run(
      createSettings({ posting: { enabled: false }, background: { cancellationPolling: 0.25 } }),
      { inherited: undefined, own: 600 },
    );
    assert.ok(bySettings.inherited! >= 2, `from the settings: ${JSON.stringify(bySettings)}`);
    assert.equal(bySettings.own, 0, "the handler's 600 s wins over the settings' 0.25 s");
  },
);

Deno.test(
  "Kopf sets no implicit daemon timeouts: no run timeout, no cancellation, no abandonment; the deletion waits for the daemon (HK-DMN-09)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("dmn-notimeout");
    const running = gate();
    const exiting = gate();
    let ctx:
      | { signal: AbortSignal; stopped: AbortSignal; reasons: ReadonlySet<unknown> }
      | undefined;
    let finished = false;
    let registered: OperatorRegistry | undefined;
    await using op = await startOperator((registry) => {
      registered = registry;
      daemon("kopfexamples", { registry }, async function endless(c) {
        ctx = { signal: c.signal, stopped: c.stopped, reasons: c.stoppingReasons };
        await running.promise; // runs until the test says so: no timeout ends it
        await exiting.promise; // ignores `stopped`: exits only when the test says so
        finished = true;
      });
    }, { namespaces: [namespace], settings: createSettings({ posting: { enabled: false } }) });
    const [handler] = registered!.handlersFor(KOPFEXAMPLES).spawning;
    assert.equal(handler?.timeout, undefined);
    assert.equal(handler?.cancellationBackoff, undefined);
    assert.equal(handler?.cancellationTimeout, undefined);
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("n1"), { namespace });
    await eventually(() => ctx, 15_000, "the daemon to run");
    await sleep(2_500);
    assert.equal(ctx!.signal.aborted, false, "a long run is not timed out");
    assert.equal(ctx!.stopped.aborted, false);
    running.open();

    await client.api.delete(KOPFEXAMPLES, "n1", { namespace });
    await eventually(() => ctx!.stopped.aborted, 15_000, "the stop request");
    await sleep(2_500);
    const held = await client.api.get(KOPFEXAMPLES, "n1", { namespace });
    assert.deepEqual(held.metadata?.finalizers, [FINALIZER], "the deletion waits for the daemon");
    assert.equal(ctx!.signal.aborted, false, "not cancelled");
    assert.deepEqual([...ctx!.reasons], ["resource-deleted"], "neither cancelled nor abandoned");
    assert.equal(op.logs.some((e) => /abandon|timed out/.test(e.message)), false);

    exiting.open();
    await gone(client, KOPFEXAMPLES, "n1", namespace);
    assert.ok(finished);
    assert.deepEqual([...ctx!.reasons], ["resource-deleted", "done"]);
  },
);

// ---------------------------------------------------------------------------------------------
// Activities
// ---------------------------------------------------------------------------------------------

Deno.test(
  "startup activities have no implicit timeout: the operator waits for a slow startup, unless the handler's own timeout limits it (HK-ACT-03)",
  opts,
  async () => {
    const namespace = await testNamespace("act-notimeout");
    const slow = gate();
    let signal: AbortSignal | undefined;
    let attempts = 0;
    let ready = false;
    const registry = new OperatorRegistry();
    on.startup({ registry }, async function warmup(ctx) {
      attempts++;
      signal = ctx.signal;
      if (ctx.retry < 2) throw new TemporaryError("warming up", { delay: 0.5 });
      await slow.promise; // as long as the test wants
    });
    on.event("configmaps", { registry }, () => {});
    const controller = new AbortController();
    const logs: LogEntry[] = [];
    using client = await testClient();
    const running = operator({
      registry,
      client,
      namespaces: [namespace],
      standalone: true,
      settings: createSettings({ process: { gracePeriod: 0.5 }, queueing: { exitTimeout: 0.5 } }),
      signal: controller.signal,
      onReady: () => (ready = true),
      listeners: [(entry) => logs.push(entry)],
    });
    try {
      await eventually(() => attempts === 3, 15_000, "the third attempt");
      await sleep(3_000);
      assert.equal(ready, false, "still starting up");
      assert.equal(signal!.aborted, false, "not timed out");
      slow.open();
      await eventually(() => ready, 15_000, "the operator to be ready after the slow startup");
      assert.ok(logs.some((e) => e.message === "Handler 'warmup' succeeded."));
    } finally {
      controller.abort();
      await running;
    }

    // Only an explicit timeout limits it: the operator then fails to start.
    const limited = new OperatorRegistry();
    on.startup({ registry: limited, timeout: 0.5 }, async function hung({ signal }) {
      await new Promise((resolve) => signal.addEventListener("abort", resolve));
    });
    const error = await operator({ registry: limited, client, standalone: true })
      .then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof ActivityError, String(error));
    assert.match(error.message, /'hung': Handler 'hung' has timed out/);
  },
);

Deno.test(
  "activity handler options: id, param, errors, timeout, retries, backoff, registry (HK-ACT-07)",
  opts,
  async (t) => {
    using client = await testClient();
    /** Runs an operator whose startup is expected to fail; returns the error. */
    const failing = async (setup: (registry: OperatorRegistry) => void): Promise<ActivityError> => {
      const registry = new OperatorRegistry();
      setup(registry);
      const error = await operator({ registry, client, standalone: true })
        .then(() => undefined, (e: unknown) => e);
      assert.ok(error instanceof ActivityError, String(error));
      return error;
    };

    await t.step("id, param, errors=ignored, backoff, registry: a started operator", async () => {
      const namespace = await testNamespace("act-options");
      const port = freePort();
      const calls: Record<string, number[]> = {};
      const params: unknown[] = [];
      const record = (id: string, retry: number) => (calls[id] ??= []).push(retry);
      const defaults = getDefaultRegistry().activities("startup").length;
      await using op = await startOperator((registry) => {
        on.startup({ registry, id: "named-startup", param: { p: 1 } }, function fn(ctx) {
          record("named-startup", ctx.retry);
          params.push(ctx.param);
        });
        on.startup({ registry, backoff: 0.2 }, function flaky({ retry }) {
          record("flaky", retry);
          if (retry < 2) throw new Error("not yet"); // arbitrary: retried after `backoff`
        });
        on.startup({ registry, errors: "ignored" }, function careless({ retry }) {
          record("careless", retry);
          throw new Error("never mind");
        });
        on.probe({ registry, id: "custom-probe", param: "P" }, ({ param }) => `probed ${param}`);
        on.event("configmaps", { registry }, () => {});
      }, { namespaces: [namespace], liveness: `http://127.0.0.1:${port}/healthz` });
      let ready = false;
      void op.ready.then(() => (ready = true));
      await eventually(() => ready, 15_000, "the startup to finish (after short backoffs)");
      assert.equal(getDefaultRegistry().activities("startup").length, defaults, "registry=");
      assert.deepEqual(calls, { "named-startup": [0], flaky: [0, 1, 2], careless: [0] });
      assert.deepEqual(params, [{ p: 1 }]);
      const messages = op.logs.map((e) => e.message);
      assert.ok(messages.includes("Handler 'named-startup' succeeded."), "the id in the logs");
      assert.ok(
        messages.some((m) =>
          m.startsWith("Handler 'flaky' failed with an exception and will try again in 0.2 seconds")
        ),
      );
      assert.ok(
        messages.includes(
          "Handler 'careless' failed with an exception and will ignore it: never mind",
        ),
      );
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.deepEqual(await response.json(), { "custom-probe": "probed P" }, "results by id");
    });

    await t.step("errors=permanent: an arbitrary error fails at once", async () => {
      let attempts = 0;
      const error = await failing((registry) =>
        on.startup({ registry, errors: "permanent" }, function strict() {
          attempts++;
          throw new Error("bad");
        })
      );
      assert.equal(attempts, 1);
      assert.match(error.message, /'strict': bad/);
    });

    await t.step("retries: the attempts are limited", async () => {
      let attempts = 0;
      const error = await failing((registry) =>
        on.startup({ registry, retries: 3, backoff: 0.1 }, function limited() {
          attempts++;
          throw new Error("bad");
        })
      );
      assert.equal(attempts, 3);
      assert.match(error.message, /'limited': Handler 'limited' .*3 retries/);
    });

    await t.step("timeout: the retries are limited in time", async () => {
      let attempts = 0;
      const error = await failing((registry) =>
        on.startup({ registry, timeout: 1 }, function patient() {
          attempts++;
          throw new TemporaryError("later", { delay: 0.3 });
        })
      );
      assert.ok(attempts >= 2, `retried until the timeout: ${attempts}`);
      assert.match(error.message, /'patient': Handler 'patient' .*time/);
    });

    await t.step("registry: handlers of another registry do not run", async () => {
      const other = new OperatorRegistry();
      let ran = false;
      on.startup({ registry: other }, () => {
        ran = true;
      });
      const error = await failing((registry) =>
        on.startup({ registry }, function own() {
          throw new PermanentError("stop here");
        })
      );
      assert.match(error.message, /'own': stop here/);
      assert.equal(ran, false);
    });
  },
);

Deno.test(
  "activity kwargs: settings, the operator's own memo, logger, param, retry/started/runtime, activity, indices; loggers named kopf.activities.<activity> (HK-ACT-08, HK-ACT-09)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const good = await loadKubeconfig({ paths: [plane.kubeconfigPath] });
    const namespace = await testNamespace("act-kwargs");
    using client = await testClient();
    // Labelled: a cluster with a controller-manager adds kube-root-ca.crt to every namespace.
    const labels = { "act-kwargs": "indexed" };
    await client.api.create(CONFIGMAPS, { metadata: { name: "early", labels } }, { namespace });
    const port = freePort();
    const settings = createSettings({ posting: { enabled: false } });
    const memo: Memo = { shared: "operator-level" };
    const seen: Record<string, Array<ActivityContext & Record<string, unknown>>> = {};
    const keep = (ctx: ActivityContext) =>
      (seen[ctx.activity] ??= []).push({ ...ctx } as ActivityContext & Record<string, unknown>);
    const objectMemos: Memo[] = [];
    const registry = new OperatorRegistry();
    index("configmaps", { registry, labels }, function byName({ name }) {
      return { [name]: true };
    });
    let startupSize: number | undefined;
    on.startup({ registry, param: "s" }, function prepare(ctx) {
      keep(ctx);
      startupSize = (ctx as unknown as { byName?: IndexView }).byName?.size;
      ctx.logger.info("startup says hello");
      ctx.memo.fromStartup = true;
      if (ctx.retry === 0) throw new TemporaryError("once more", { delay: 0.2 });
    });
    on.login({ registry, param: "l" }, function credentials(ctx): ConnectionInfo {
      keep(ctx);
      ctx.logger.info("login says hello");
      return {
        server: good.server,
        caPem: good.caPem,
        source: "test login handler",
        credentials: {
          headers: () => Promise.resolve({ Authorization: `Bearer ${plane.adminToken}` }),
          invalidate: () => Promise.resolve(false),
        },
      } as ConnectionInfo;
    });
    on.probe({ registry, param: "p" }, function health(ctx) {
      keep(ctx);
      ctx.logger.info("probe says hello");
      return (ctx.indices.byName as IndexView | undefined)?.size;
    });
    on.cleanup({ registry, param: "c" }, function tidy(ctx) {
      keep(ctx);
      ctx.logger.info("cleanup says hello");
    });
    on.event("configmaps", { registry }, function spy({ memo }) {
      objectMemos.push(memo);
    });
    const logs: LogEntry[] = [];
    const controller = new AbortController();
    let ready = false;
    const running = operator({
      registry,
      namespaces: [namespace],
      standalone: true,
      settings,
      memo,
      liveness: `http://127.0.0.1:${port}/healthz`,
      signal: controller.signal,
      onReady: () => (ready = true),
      listeners: [(entry) => logs.push(entry)],
    });
    try {
      await eventually(() => ready, 15_000, "the operator to be ready");
      await eventually(() => objectMemos.length, 15_000, "an object's memo");
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      assert.deepEqual(await response.json(), { health: 1 }, "the probe sees the index");
    } finally {
      controller.abort();
      await running;
    }

    assert.deepEqual(Object.keys(seen).sort(), ["cleanup", "login", "probe", "startup"]);
    for (const [activity, contexts] of Object.entries(seen)) {
      for (const ctx of contexts) {
        assert.equal(ctx.activity, activity);
        assert.equal(ctx.settings, settings, `${activity}: the operator's settings`);
        assert.equal(ctx.memo, memo, `${activity}: the operator's memo itself, not a copy`);
        assert.equal(ctx.param, activity[0], `${activity}: its param`);
        assert.ok(ctx.signal instanceof AbortSignal);
        assert.ok(ctx.started instanceof Date && typeof ctx.runtime === "number");
        assert.ok(ctx.runtime >= 0);
      }
      // Each activity logs under its own logger name (Kopf: `authentication` for login).
      const hello = logs.find((e) => e.message === `${activity} says hello`);
      assert.equal(hello?.category.join("."), `kopf.activities.${activity}`);
    }
    // retry/started/runtime across attempts of one handler.
    const [first, second] = seen.startup!;
    assert.deepEqual([first!.retry, second!.retry], [0, 1]);
    assert.equal(second!.started.getTime(), first!.started.getTime());
    assert.ok(second!.runtime >= 0.2 - 0.05, `runtime ${second!.runtime}`);
    assert.equal(
      logs.find((e) => e.message === "Handler 'prepare' succeeded.")?.category.join("."),
      "kopf.activities.startup",
    );
    // Indices: every activity gets every declared index, by name too (as in Kopf). Startup and
    // login run before anything is listed: empty then, but live, so a kept one fills up later.
    for (const activity of ["startup", "login", "probe", "cleanup"]) {
      const ctx = seen[activity]![0]!;
      assert.deepEqual(Object.keys(ctx.indices), ["byName"], activity);
      assert.equal(ctx.byName, ctx.indices.byName, activity);
    }
    assert.equal(startupSize, 0, "empty at startup");
    assert.equal((seen.startup![0]!.byName as IndexView).size, 1, "the same index, filled later");
    assert.equal((seen.probe![0]!.byName as IndexView).size, 1);
    assert.ok((seen.cleanup![0]!.byName as IndexView).has("early"), "possibly partial, not empty");
    // Objects get a shallow copy of the operator's memo, with what startup put there.
    assert.notEqual(objectMemos[0], memo);
    assert.deepEqual(objectMemos[0], { shared: "operator-level", fromStartup: true });
  },
);

// ---------------------------------------------------------------------------------------------
// Admission
// ---------------------------------------------------------------------------------------------

Deno.test(
  "admission handlers refuse errors/timeout/retries/backoff with a TypeError at registration (HK-ADM-06)",
  () => {
    const registry = new OperatorRegistry();
    const refused = { errors: "permanent", timeout: 1, retries: 1, backoff: 1 } as const;
    for (const [key, value] of Object.entries(refused)) {
      for (const kind of ["validate", "mutate"] as const) {
        assert.throws(
          () => on[kind]("kopfexamples", { registry, [key]: value } as never, () => {}),
          (error: unknown) =>
            error instanceof TypeError &&
            error.message === `Admission handlers are never retried: '${key}' is not accepted`,
          `${kind} with ${key}`,
        );
      }
    }
    assert.deepEqual(registry.webhooks(), [], "nothing was registered");
    // Nor are they in the option types (a type error if they were accepted).
    // @ts-expect-error: `retries` is not an admission option.
    assert.throws(() => on.validate("kopfexamples", { registry, retries: 1 }, () => {}));
    // @ts-expect-error: `backoff` is not an admission option.
    assert.throws(() => on.mutate("kopfexamples", { registry, backoff: 1 }, () => {}));
    on.validate("kopfexamples", { registry, id: "fine" }, () => {});
    assert.deepEqual(registry.webhooks().map((r) => r.handler.id), ["fine"]);
  },
);

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

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
// Finalizers
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Memos
// ---------------------------------------------------------------------------------------------

Deno.test(
  "one memo per object, shared by all its handlers and daemons; a deleted and re-created object gets a new one (MEMO-02)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-object");
    /** The memos each handler saw, by object uid. */
    const memos = new Map<string, Map<string, Set<Memo>>>();
    const saw = (handler: string, uid: string, memo: Memo) => {
      const byHandler = memos.get(uid) ?? new Map<string, Set<Memo>>();
      memos.set(uid, byHandler);
      byHandler.set(handler, (byHandler.get(handler) ?? new Set()).add(memo));
    };
    const counts: Array<{ name: string; uid: string; count: unknown }> = [];
    await using op = await startOperator((registry) => {
      on.event("kopfexamples", { registry }, function pinged({ memo, uid, name, type }) {
        if (type === "DELETED") return;
        saw("event", uid, memo);
        memo.counter = ((memo.counter as number | undefined) ?? 0) + 1;
        counts.push({ name, uid, count: memo.counter });
      });
      on.create("kopfexamples", { registry }, function created({ memo, uid }) {
        saw("create", uid, memo);
        memo.createdHere = uid;
      });
      on.update("kopfexamples", { registry }, function updated({ memo, uid }) {
        saw("update", uid, memo);
      });
      on.delete("kopfexamples", { registry }, function deleted({ memo, uid }) {
        saw("delete", uid, memo);
      });
      daemon("kopfexamples", { registry }, async function watcher({ memo, uid, stopped }) {
        saw("daemon", uid, memo);
        await new Promise((resolve) => stopped.addEventListener("abort", resolve));
        saw("daemon", uid, memo);
      });
    }, { namespaces: [namespace], memo: { base: true } });
    await op.ready;
    const handled = (uid: string, handlers: string[]) =>
      eventually(
        () => handlers.every((h) => memos.get(uid)?.has(h)),
        15_000,
        `${handlers.join(", ")} of ${uid}`,
      );

    const a1 = (await client.api.create(KOPFEXAMPLES, kex("a", { v: 1 }), { namespace }))
      .metadata!.uid!;
    const b = (await client.api.create(KOPFEXAMPLES, kex("b"), { namespace })).metadata!.uid!;
    await handled(a1, ["event", "create", "daemon"]);
    await handled(b, ["event", "create", "daemon"]);
    await client.api.patch(KOPFEXAMPLES, "a", { spec: { v: 2 } }, { namespace });
    await handled(a1, ["update"]);
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await gone(client, KOPFEXAMPLES, "a", namespace);
    await handled(a1, ["delete"]);

    // Every handler and the daemon of "a" saw the very same memo (the daemon before and after
    // its stop, the delete handler at the end); "b" has its own.
    const all = (uid: string) => new Set([...memos.get(uid)!.values()].flatMap((s) => [...s]));
    assert.equal(all(a1).size, 1, "one memo for all handlers of a");
    assert.deepEqual([...memos.get(a1)!.keys()].sort(), [
      "create",
      "daemon",
      "delete",
      "event",
      "update",
    ]);
    const memoA1 = [...all(a1)][0]!;
    const memoB = [...all(b)][0]!;
    assert.equal(all(b).size, 1);
    assert.notEqual(memoA1, memoB, "another object: another memo");
    assert.equal(memoA1.createdHere, a1);
    assert.equal(memoB.createdHere, b);
    assert.equal(memoA1.base, true, "from the operator's memo");

    // Re-created with the same name: a new object, a new memo (the counter starts again).
    const a2 = (await client.api.create(KOPFEXAMPLES, kex("a"), { namespace })).metadata!.uid!;
    await handled(a2, ["event", "create", "daemon"]);
    assert.notEqual(a2, a1);
    const memoA2 = [...all(a2)][0]!;
    assert.equal(all(a2).size, 1);
    assert.notEqual(memoA2, memoA1);
    assert.equal(memoA2.createdHere, a2);
    assert.deepEqual(counts.find((c) => c.uid === a2)?.count, 1, "nothing carried over");
    assert.ok((memoA1.counter as number) > 1, "the first one counted its own events");
    await client.api.delete(KOPFEXAMPLES, "a", { namespace });
    await client.api.delete(KOPFEXAMPLES, "b", { namespace });
    await gone(client, KOPFEXAMPLES, "a", namespace);
    await gone(client, KOPFEXAMPLES, "b", namespace);
  },
);

Deno.test(
  "memos are not persisted: a restarted operator starts with fresh memos, and nothing of them is stored on the object (MEMO-06)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-restart");
    const marker = `in-memory-${crypto.randomUUID()}`;
    const firstSight: unknown[] = [];
    const resumed: unknown[] = [];
    const setup = (registry: OperatorRegistry) => {
      on.event("kopfexamples", { registry }, function remember({ memo }) {
        if (!("seen" in memo)) firstSight.push({ ...memo });
        memo.seen = marker;
      });
      on.create("kopfexamples", { registry }, function created({ memo }) {
        memo.created = marker;
      });
      on.resume("kopfexamples", { registry }, function continued({ memo }) {
        resumed.push({ ...memo });
      });
    };
    {
      await using op = await startOperator(setup, { namespaces: [namespace] });
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("m1"), { namespace });
      await op.waitForLog(/^Creation is processed: 1 succeeded; 0 failed\.$/);
    }
    assert.deepEqual(firstSight, [{}]);
    const stored = await client.api.get(KOPFEXAMPLES, "m1", { namespace });
    assert.equal(JSON.stringify(stored).includes(marker), false, "no memo value on the object");

    {
      await using op = await startOperator(setup, { namespaces: [namespace] });
      await op.ready;
      await op.waitForLog(/^Resuming is processed: 1 succeeded; 0 failed\.$/);
    }
    // The second process knows nothing of the first one's memo: not the raw-event handler's
    // value, not the create handler's.
    assert.equal(firstSight.length, 2);
    assert.deepEqual(firstSight[1], {}, "the event handler starts with an empty memo");
    assert.deepEqual(resumed, [{ seen: marker }], "only what this process put there");
  },
);

Deno.test(
  "custom memo classes via embedding: each object's memo is a shallow copy that keeps the class and its methods; mutable values stay shared (MEMO-05, EMB-11)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("memo-custom");
    class CustomContext {
      constructor(
        public createTpl: string,
        public deleteTpl: string,
        public readonly greeted: string[] = [],
      ) {}
      render(template: string, name: string): string {
        return template.replace("{name}", name);
      }
    }
    const operatorMemo = new CustomContext("Hello, {name}!", "Good bye, {name}!");
    const seen: Array<{ handler: string; memo: CustomContext; line: string }> = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, function prepare({ memo }) {
      seen.push({ handler: "startup", memo: memo as unknown as CustomContext, line: "" });
    });
    on.create("kopfexamples", { registry }, function create_fn({ memo, name }) {
      const custom = memo as unknown as CustomContext;
      const line = custom.render(custom.createTpl, name);
      custom.greeted.push(line); // a shared mutable value
      custom.createTpl = "Changed for {name} only"; // a per-object field
      seen.push({ handler: "create", memo: custom, line });
    });
    on.delete("kopfexamples", { registry }, function delete_fn({ memo, name }) {
      const custom = memo as unknown as CustomContext;
      seen.push({ handler: "delete", memo: custom, line: custom.render(custom.deleteTpl, name) });
    });
    const plane = await sharedControlPlane();
    using own = new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
    await using op = start({
      registry,
      namespaces: [namespace],
      client: own,
      standalone: true,
      settings: createSettings({ posting: { enabled: false } }),
      memo: operatorMemo as unknown as Memo,
    });
    await op.ready;
    for (const name of ["x", "y"]) {
      await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
    }
    await eventually(() => seen.filter((s) => s.handler === "create").length === 2, 15_000);
    for (const name of ["x", "y"]) await client.api.delete(KOPFEXAMPLES, name, { namespace });
    await eventually(() => seen.filter((s) => s.handler === "delete").length === 2, 15_000);

    // Activities get the operator's memo itself.
    assert.equal(seen.find((s) => s.handler === "startup")?.memo, operatorMemo);
    const creates = seen.filter((s) => s.handler === "create");
    const deletes = seen.filter((s) => s.handler === "delete");
    assert.deepEqual(creates.map((s) => s.line).sort(), ["Hello, x!", "Hello, y!"]);
    assert.deepEqual(deletes.map((s) => s.line).sort(), ["Good bye, x!", "Good bye, y!"]);
    for (const { memo } of [...creates, ...deletes]) {
      assert.ok(memo instanceof CustomContext, "the class is kept, with its methods");
      assert.notEqual(memo, operatorMemo, "a per-object copy (no __copy__ hook to opt out)");
      assert.equal(memo.greeted, operatorMemo.greeted, "shallow: the same array");
      assert.equal(memo.createTpl, "Changed for {name} only", "per-object fields stay per object");
    }
    assert.notEqual(creates[0]!.memo, creates[1]!.memo, "each object its own copy");
    assert.equal(operatorMemo.createTpl, "Hello, {name}!", "the operator's memo is untouched");
    assert.deepEqual(operatorMemo.greeted.toSorted(), ["Hello, x!", "Hello, y!"]);
    await gone(client, KOPFEXAMPLES, "x", namespace);
    await gone(client, KOPFEXAMPLES, "y", namespace);
  },
);

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

/**
 * A plain-HTTP proxy to the real API server that forces the legacy discovery (one request per
 * group version: aggregated discovery never answers 503 for a group) and adds an aggregated API
 * group whose service is down: listed in `/apis`, answering 503 Service Unavailable, as the
 * API server does for an unavailable APIService (e.g. metrics.k8s.io without metrics-server).
 */
async function unavailableGroupProxy(group: string) {
  const plane = await sharedControlPlane();
  const tls = Deno.createHttpClient({ caCerts: [plane.caPem] });
  const unavailable: string[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const url = new URL(request.url);
      if (url.pathname.startsWith(`/apis/${group}/`) || url.pathname === `/apis/${group}`) {
        unavailable.push(url.pathname);
        return Response.json({
          kind: "Status",
          apiVersion: "v1",
          status: "Failure",
          message: "service unavailable",
          reason: "ServiceUnavailable",
          code: 503,
        }, { status: 503 });
      }
      const headers = new Headers(request.headers);
      headers.set("authorization", `Bearer ${plane.adminToken}`);
      const discovery = url.pathname === "/api" || url.pathname === "/apis";
      if (discovery) headers.set("accept", "application/json"); // no aggregated discovery
      const upstream = await fetch(`${plane.server}${url.pathname}${url.search}`, {
        method: request.method,
        headers,
        body: request.body,
        client: tls,
      });
      if (url.pathname !== "/apis" || !upstream.ok) {
        return new Response(upstream.body, { status: upstream.status, headers: upstream.headers });
      }
      const list = await upstream.json() as { groups: unknown[] };
      const version = { groupVersion: `${group}/v1beta1`, version: "v1beta1" };
      list.groups.push({ name: group, versions: [version], preferredVersion: version });
      return Response.json(list);
    },
  );
  return {
    unavailable,
    client: (options: HttpClientOptions) =>
      new KubeClient({
        server: `http://127.0.0.1:${server.addr.port}`,
        credentials: NO_CREDENTIALS,
        source: "test proxy",
      }, options),
    async [Symbol.asyncDispose]() {
      await server.shutdown();
      tls.close();
    },
  };
}

Deno.test(
  "an unavailable aggregated API group (HTTP 503) does not block the scanning for group-less selectors: it is skipped (RSPEC-14)",
  opts,
  async () => {
    const namespace = await testNamespace("rspec-503");
    await using proxy = await unavailableGroupProxy("metrics.parity.kopf.dev");
    // As the operator makes its client; 5xx are retried (networking.errorBackoffs) before the
    // group is skipped: short delays here, ~54 s by default.
    const settings = createSettings({
      posting: { enabled: false },
      networking: { errorBackoffs: [0.1, 0.2] },
    });
    using viaProxy = proxy.client(httpOptions(settings, new Logger(["test"])));
    const seen: string[] = [];
    await using op = await startOperator((registry) => {
      on.event("configmaps", { registry }, function spy({ name, type }) {
        if (type === "ADDED") seen.push(name);
      });
    }, {
      namespaces: [namespace],
      client: viaProxy,
      settings,
    });
    await op.ready;
    assert.ok(proxy.unavailable.length >= 1, "the unavailable group was scanned (and got 503)");
    using client = await testClient();
    await client.api.create(CONFIGMAPS, { metadata: { name: "served" } }, { namespace });
    await eventually(() => seen.includes("served"), 15_000, "the group-less selector served");
    assert.equal(op.logs.some((e) => e.level === "error"), false, JSON.stringify(op.logs));
  },
);
