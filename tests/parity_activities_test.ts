/**
 * Activity handlers, as docs/parity.md lists them against Kopf's documentation: their options
 * (HK-ACT-07) and kwargs, with the loggers they log under (HK-ACT-08, HK-ACT-09), the options of
 * login handlers (AUTH-09), and the liveness endpoint that serves the probes (PROBE-05). Against
 * the real control plane.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import { index } from "../core/api/indexing.ts";
import { on } from "../core/api/on.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { ConnectionInfo } from "../core/client/connection.ts";
import { ActivityError } from "../core/engines/runners/activities.ts";
import type { ActivityContext, IndexView, Memo } from "../core/intents/contexts.ts";
import { getDefaultRegistry, OperatorRegistry } from "../core/intents/registries.ts";
import { operator } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { startOperator } from "./_operator.ts";
import { runOperator, within } from "./_parity.ts";
import {
  CONFIGMAPS,
  eventually,
  kubeconfigPath,
  PausableTcpProxy,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

// ---------------------------------------------------------------------------------------------
// HK-ACT-07, HK-ACT-08, HK-ACT-09: activity options and kwargs.

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
// AUTH-09: login handler options.

Deno.test(
  "login handlers take retries and timeout; without them they are retried until they succeed (AUTH-09)",
  opts,
  async () => {
    const namespace = await testNamespace("auth09");
    const kubeconfig = await kubeconfigPath();

    // retries=3: three attempts, then the operator fails.
    let calls = 0;
    const limited = new OperatorRegistry();
    on.login({ registry: limited, retries: 3, backoff: 0.05 }, function counted() {
      calls++;
      throw new Error("no credentials yet");
    });
    const failed = await within(
      runOperator(limited, { namespaces: [namespace], kubeconfig }).done,
      30_000,
      "the operator to fail after the retries",
    );
    assert.ok(failed instanceof ActivityError, String(failed));
    assert.match(failed.message, /'counted'/);
    assert.equal(calls, 3);

    // timeout=1: attempts until a second has passed, then the operator fails.
    let timed = 0;
    const bounded = new OperatorRegistry();
    on.login({ registry: bounded, timeout: 1, backoff: 0.2 }, function slow() {
      timed++;
      throw new Error("no credentials yet");
    });
    const timedOut = await within(
      runOperator(bounded, { namespaces: [namespace], kubeconfig }).done,
      30_000,
      "the operator to fail after the timeout",
    );
    assert.ok(timedOut instanceof ActivityError, String(timedOut));
    assert.match(timedOut.message, /'slow'.*would time out in 1 seconds/);
    assert.ok(timed >= 2 && timed <= 6, `attempts within the timeout: ${timed}`);

    // No options: retried until it succeeds (here after 7 failures).
    const connection = await loadKubeconfig({ paths: [kubeconfig] });
    let attempts = 0;
    const unlimited = new OperatorRegistry();
    on.login({ registry: unlimited }, function patient() {
      if (++attempts <= 7) throw new TemporaryError("not yet", { delay: 0.05 });
      return connection;
    });
    on.event("configmaps", { registry: unlimited }, () => {});
    const op = runOperator(unlimited, { namespaces: [namespace] });
    try {
      await within(op.ready, 30_000, "the operator to start after the login succeeded");
      assert.equal(attempts, 8);
    } finally {
      await op.stop();
    }
  },
);

// ---------------------------------------------------------------------------------------------
// PROBE-05: the liveness endpoint.

Deno.test(
  "the liveness endpoint answers while the operator runs, also for quiet but healthy streams; it answers 503 while a watch stream is stuck, 200 again after, and nothing once stopped (PROBE-05)",
  opts,
  async () => {
    using direct = await testClient();
    const namespace = await testNamespace("probe05");
    await using proxy = PausableTcpProxy.inFrontOf(direct);
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    const op = await startOperator((registry) => {
      on.probe({ registry }, function reporter() {
        return "running";
      });
      on.event("configmaps", { registry }, () => {});
    }, {
      namespaces: [namespace],
      client: proxy.client(direct),
      // A stream silent for 2 s is reopened; silent for 4 s (twice that) without being
      // reopened, it counts as stuck.
      settings: createSettings({ watching: { inactivityTimeout: 2 }, posting: { enabled: false } }),
      liveness: url,
    });
    const health = async () => {
      const response = await fetch(url);
      return { status: response.status, body: await response.text() };
    };
    try {
      await op.ready;
      await direct.api.create(CONFIGMAPS, { metadata: { name: "seen" } }, { namespace });
      await op.waitForLog(/silent for 2000 ms/); // the stream was quiet, and reopened
      // Quiet, but healthy: reopened every 2 s. Sampled over 6 s, past the stale limit.
      for (let i = 0; i < 12; i++) {
        const answer = await health();
        assert.equal(answer.status, 200, `a quiet, healthy stream: ${answer.body}`);
        assert.deepEqual(JSON.parse(answer.body), { reporter: "running" });
        await sleep(500);
      }
      proxy.pause(); // the stream and its reconnections hang
      const stuck = await eventually(
        async () => {
          const answer = await health();
          return answer.status === 503 ? answer : undefined;
        },
        20_000,
        "503 while the stream is stuck",
      );
      assert.match(stuck.body, /Watch streams silent for over 4s/);
      proxy.resume();
      await eventually(
        async () => (await health()).status === 200,
        20_000,
        "200 once the stream works again",
      );
    } finally {
      await op.stop();
    }
    await assert.rejects(fetch(url), "nothing answers once the operator stopped");
  },
);
