/**
 * Timeouts, as docs/parity.md lists them against Kopf's documentation: those Kopf does not set
 * (no implicit daemon timeouts, HK-DMN-09; none for startup activities, HK-ACT-03), the polling
 * of a daemon that exits without a cancellation timeout (HK-DMN-07, CFG-90), and the timeout of
 * atomic requests that leaves the watch streams alone (CFG-100). Against the real control plane;
 * the request timeout is proven through a proxy that holds one request (tests/_parity.ts).
 */

import assert from "node:assert/strict";
import { TemporaryError } from "../core/actions/execution.ts";
import { type LogEntry, Logger } from "../core/actions/loggers.ts";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import { ActivityError } from "../core/engines/runners/activities.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { httpOptions, operator } from "../core/reactor/lifetime/running.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import { apiStatus, FaultProxy, gate, gone, runOperator, statusOf } from "./_parity.ts";
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
// HK-DMN-07, CFG-90, HK-DMN-09: daemons exiting and running without timeouts.

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
// HK-ACT-03: startup activities without timeouts.

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

// ---------------------------------------------------------------------------------------------
// CFG-100: settings.networking.requestTimeout.

Deno.test(
  "settings.networking.requestTimeout (300 s by default) bounds each atomic request, not the watch streams: a patch held past it is abandoned and retried while the watch stays open (CFG-100)",
  opts,
  async () => {
    assert.equal(createSettings().networking.requestTimeout, 300);
    assert.equal(httpOptions(createSettings(), new Logger(["test"])).timeoutMs, 300_000);

    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("cfg100");
    await using proxy = await FaultProxy.start();
    let patches = 0;
    let holding = false;
    let retriedWhileHeld = false;
    const release = Promise.withResolvers<void>();
    proxy.rules.push(async (request, url) => {
      if (request.method !== "PATCH" || !url.pathname.endsWith("/kopfexamples/slow")) return;
      if (patches++ > 0) {
        retriedWhileHeld ||= holding;
        return; // forwarded
      }
      // The first one is held far longer than the timeout, until the test ends.
      holding = true;
      await Promise.race([release.promise, sleep(30_000)]);
      holding = false;
      return apiStatus(504, "held too long");
    });
    const runs: string[] = [];
    const registry = new OperatorRegistry();
    on.startup({ registry }, function timeouts({ settings }) {
      settings.networking.requestTimeout = 2; // read when the client is made, after startup
    });
    on.create("kopfexamples", { registry }, function mark({ name }) {
      runs.push(name);
      return "done";
    });
    const op = runOperator(registry, { namespaces: [namespace], kubeconfig: proxy.kubeconfig });
    try {
      await op.ready;
      const watch = await eventually(
        () => proxy.watches.find((w) => w.path.endsWith(`/${namespace}/kopfexamples`)),
        10_000,
        "the watch stream",
      );
      await client.api.create(KOPFEXAMPLES, kex("slow"), { namespace });
      await eventually(
        async () => (await statusOf(client, "slow", namespace)).mark === "done",
        30_000,
        "the handler's result stored by the retried patch",
      );
      assert.ok(retriedWhileHeld, "the held patch was abandoned by the client and sent again");
      assert.equal(patches, 2);
      assert.deepEqual(runs, ["slow"], "the handler ran once: only its request was retried");
      // The watch opened before the object outlived the 2-second request timeout many times.
      assert.ok(watch.open, "the watch stream was not cut by the request timeout");
      assert.equal(
        proxy.watches.filter((w) => w.path.endsWith(`/${namespace}/kopfexamples`)).length,
        1,
        "and was never reopened",
      );
    } finally {
      release.resolve();
      await op.stop();
    }
  },
);
