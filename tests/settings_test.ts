/**
 * Settings that change what the operator does, on the real control plane: the default backoff of
 * retried errors, server-side label and field selectors of the watches, streaming lists, chunked
 * lists, the backoffs of Event posts. Most are Kopf's after the seed documentation (1.45.x and
 * its 2026 main branch): docs/parity.md, rows K26-xx.
 * @module
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { operator } from "../core/reactor/lifetime/running.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import { EventPoster } from "../core/engines/observability/posting.ts";
import { watcher, type WatcherEvent, watchingOptions } from "../core/client/watching.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

interface StoredProgress {
  started?: string;
  delayed?: string;
  retries?: number;
}

Deno.test(
  "settings.execution.defaultBackoff delays the retry of arbitrary errors of handlers and daemons; a handler's own backoff wins (K26-02)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("k26backoff");
    const calls = { plain: 0, own: 0, daemon: 0 };
    const settings = createSettings({
      process: { gracePeriod: 1 },
      queueing: { exitTimeout: 1 },
      execution: { defaultBackoff: 4 },
    });
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "plain" }, () => {
        if (++calls.plain === 1) throw new Error("not yet");
      });
      on.create("kopfexamples", { registry, id: "own", backoff: 600 }, () => {
        calls.own++;
        throw new Error("never");
      });
      daemon("kopfexamples", { registry, id: "dmn" }, () => {
        if (++calls.daemon === 1) throw new Error("crash once");
        return "done";
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "a" },
      spec: {},
    } as KubeObject, { namespace });

    // The stored delays: the operator-wide 4 s for 'plain' (a window wide enough to see both
    // records), the handler's own 600 s for 'own'.
    const first = await eventually(
      async () => {
        const body = await client.api.get(KOPFEXAMPLES, "a", { namespace });
        const annotations = body.metadata?.annotations ?? {};
        const plain = annotations["kopf.zalando.org/plain"];
        const own = annotations["kopf.zalando.org/own"];
        return plain && own
          ? { plain: JSON.parse(plain) as StoredProgress, own: JSON.parse(own) as StoredProgress }
          : undefined;
      },
      20_000,
      "both progress records after the first failures",
    );
    const delayOf = (p: StoredProgress) => Date.parse(p.delayed!) - Date.parse(p.started!);
    assert.ok(delayOf(first.plain) < 30_000, `plain delayed by ${delayOf(first.plain)} ms`);
    assert.ok(delayOf(first.own) >= 590_000, `own delayed by ${delayOf(first.own)} ms`);

    // Retried after the operator-wide backoff, not Kopf's former fixed 60 s.
    await op.waitForLog(/^Handler 'plain' succeeded\.$/, 30_000);
    await eventually(() => calls.daemon >= 2, 30_000, "the daemon's second run");
    assert.equal(calls.plain, 2);
    assert.equal(calls.own, 1, "the handler's own backoff (600 s) is not replaced");
  },
);

Deno.test(
  "settings.watching.labelSelectors/fieldSelectors filter the watches of the selected resource on the server (K26-14)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("k26sel");
    const create = (name: string, team: string) =>
      client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name, labels: { team } },
        spec: {},
      } as KubeObject, { namespace });
    // Created before the operator starts: the initial list is filtered too.
    await create("b-listed", "b");
    await create("a-skipped", "a");
    const handled: string[] = [];
    const settings = createSettings({ process: { gracePeriod: 1 }, queueing: { exitTimeout: 1 } });
    settings.watching.labelSelectors["kopf.dev/kopfexamples"] = "team=a";
    settings.watching.fieldSelectors["kopfexamples"] = "metadata.name!=a-skipped";
    settings.watching.labelSelectors["pods"] = "team=nobody"; // another resource: not applied
    const op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ name }) => {
        handled.push(name);
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await create("b-watched", "b");
    await create("a-handled", "a");
    await op.waitForLog(/^Handler 'create_fn' succeeded\.$/, 30_000);
    await op.stop();
    assert.deepEqual(handled, ["a-handled"]);
    for (const name of ["b-listed", "a-skipped", "b-watched"]) {
      const body = await client.api.get(KOPFEXAMPLES, name, { namespace });
      assert.equal(body.metadata?.finalizers, undefined, `${name} is not seen`);
    }
  },
);

Deno.test("a key of settings.watching.labelSelectors that names no resource stops the start (K26-14)", async () => {
  const settings = createSettings();
  settings.watching.labelSelectors["a/b/c/d"] = "x=y";
  await assert.rejects(
    operator({ registry: new OperatorRegistry(), settings, standalone: true }),
    /settings\.watching\.labelSelectors: the key "a\/b\/c\/d" does not name a resource/,
  );
});

Deno.test(
  "settings.watching.initialStreaming: the watcher starts with a streaming list (sendInitialEvents), then follows changes (K26-13)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("k26stream");
    const object = (name: string) =>
      ({
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name },
        spec: {},
      }) as KubeObject;
    await client.api.create(KOPFEXAMPLES, object("one"), { namespace });
    await client.api.create(KOPFEXAMPLES, object("two"), { namespace });
    const settings = createSettings({ watching: { initialStreaming: true } });
    const controller = new AbortController();
    const seen: string[] = [];
    const before = client.counters.snapshot();
    try {
      for await (
        const event of watcher(client.api, KOPFEXAMPLES, {
          namespace,
          ...watchingOptions(settings.watching),
          signal: controller.signal,
        }) as AsyncGenerator<WatcherEvent>
      ) {
        if (event.type === "initApply") seen.push(`initApply ${event.object.metadata?.name}`);
        else if (event.type === "apply") seen.push(`apply ${event.object.metadata?.name}`);
        else if (event.type === "init" || event.type === "initDone") seen.push(event.type);
        if (event.type === "initDone") {
          await client.api.create(KOPFEXAMPLES, object("three"), { namespace });
        }
        if (event.type === "apply") break;
      }
    } finally {
      controller.abort();
    }
    assert.deepEqual(seen, ["init", "initApply one", "initApply two", "initDone", "apply three"]);
    const sent = client.counters.since(before);
    assert.equal(sent.count({ verb: "list", resource: "kopfexamples" }), 0, "no list request");
    assert.equal(sent.count({ verb: "watch", resource: "kopfexamples" }), 1, "one watch");

    // An operator with it: ready after the streamed list, the existing objects handled.
    const handled: string[] = [];
    settings.process.gracePeriod = 1;
    settings.queueing.exitTimeout = 1;
    const op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ name }) => {
        handled.push(name);
      });
    }, { namespaces: [namespace], settings });
    await op.ready;
    await eventually(() => handled.length === 3, 30_000, "three objects handled");
    await op.stop();
    assert.deepEqual(handled.sort(), ["one", "three", "two"]);
  },
);

Deno.test(
  "settings.watching.initialStreaming asks for the initial events itself (sendInitialEvents, resourceVersionMatch), not relying on the server's defaulting (K26-13)",
  opts,
  async () => {
    // API servers since 1.34 default a watch without a resourceVersion to a streaming list;
    // older ones (and the feature gate off) do not: the request must say it. The emulator
    // records the query.
    await using emulator = await Emulator.start();
    using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    await applyCrds(client, "crds/example.yaml");
    const settings = createSettings({ watching: { initialStreaming: true } });
    const controller = new AbortController();
    emulator.history.clear();
    for await (
      const event of watcher(client.api, KOPFEXAMPLES, {
        namespace: "default",
        ...watchingOptions(settings.watching),
        signal: controller.signal,
      }) as AsyncGenerator<WatcherEvent>
    ) {
      if (event.type === "initDone") break;
    }
    controller.abort();
    const watches = emulator.history.find({ verb: "watch", resource: "kopfexamples" });
    assert.equal(watches.length, 1);
    const query = new URLSearchParams(watches[0]!.query);
    assert.equal(query.get("sendInitialEvents"), "true");
    assert.equal(query.get("resourceVersionMatch"), "NotOlderThan");
    assert.equal(query.get("allowWatchBookmarks"), "true");
  },
);

Deno.test(
  "Event posts retry with settings.posting.defaultBackoffs (explicit), loggingBackoffs (log messages) or the call's own backoffs (K26-11)",
  opts,
  async () => {
    // Failing Event posts on purpose needs fault injection: the emulator (see contract_*_test).
    await using emulator = await Emulator.start();
    using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    const settings = createSettings({
      posting: { aggregationWindow: 0, loggers: true, defaultBackoffs: [0.01, 0.01, 0.01] },
    }).posting;
    settings.loggingBackoffs = [0.01];
    const poster = new EventPoster(client.api, settings);
    const ref = {
      apiVersion: "v1",
      kind: "ConfigMap",
      name: "cm",
      namespace: "default",
      uid: "u1",
    };
    const post = async (fault: number, event: Parameters<EventPoster["enqueue"]>[0]) => {
      using failing = emulator.faults.fail(503, {
        times: fault,
        match: { verb: "create", resource: "events" },
      });
      poster.enqueue(event);
      await poster.flush();
      return failing.hits;
    };
    // Explicit: 3 retries by the settings; 3 failures, then posted.
    assert.equal(await post(3, { ref, type: "Normal", reason: "Explicit", message: "e" }), 3);
    // From a log message: 1 retry; 3 failures are too many, it is dropped after 2 attempts.
    assert.equal(
      await post(3, { ref, type: "Normal", reason: "Logging", message: "l", logging: true }),
      2,
    );
    // The call's own backoffs: 2 retries.
    assert.equal(
      await post(5, { ref, type: "Normal", reason: "Own", message: "o", backoffs: [0.01, 0.01] }),
      3,
    );
    const { items } = await client.api.list(EVENTS_RESOURCE, { namespace: "default" });
    const reasons = items.map((e) => (e as { reason?: string }).reason).sort();
    assert.deepEqual(reasons, ["Explicit"]);
  },
);

Deno.test(
  "settings.watching.chunkSize pages the initial list: 5 objects in pages of 2 are 3 list requests, null is 1 (K26-12)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("k26chunks");
    for (const name of ["a", "b", "c", "d", "e"]) {
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name },
        spec: {},
      } as KubeObject, { namespace });
    }
    const listed = async (chunkSize: number | null) => {
      const settings = createSettings({ watching: { chunkSize } });
      const before = client.counters.snapshot();
      const controller = new AbortController();
      const names: string[] = [];
      for await (
        const event of watcher(client.api, KOPFEXAMPLES, {
          namespace,
          ...watchingOptions(settings.watching),
          signal: controller.signal,
        })
      ) {
        if (event.type === "initApply") names.push(event.object.metadata!.name!);
        if (event.type === "initDone") break;
      }
      controller.abort();
      assert.deepEqual(names, ["a", "b", "c", "d", "e"]);
      return client.counters.since(before).count({ verb: "list", resource: "kopfexamples" });
    };
    assert.equal(await listed(2), 3);
    assert.equal(await listed(null), 1);
    assert.equal(await listed(500), 1);
  },
);
