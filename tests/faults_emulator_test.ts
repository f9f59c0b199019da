/**
 * Faults the in-memory emulator injects (kits/emulator faults): an API server that throttles
 * with 429 and `Retry-After`, answers 503, and drops connections under a burst of creations and
 * changes; and malformed input on a watch stream. Each test asserts that no change is lost and no
 * completed handler runs again, and records its figures (tests/_faults.ts).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import { startOperator } from "./_operator.ts";
import { recordFault, RunLog } from "./_faults.ts";
import { applyCrds, eventually, KOPFEXAMPLES, sleep } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function kex(name: string, value: number): KubeObject {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: { value } };
}

async function emulated() {
  const emulator = await Emulator.start();
  const connect = async () =>
    new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
  const client = await connect();
  await applyCrds(client, "crds/example.yaml");
  return { emulator, client, connect };
}

function operatorWith(log: RunLog, client: KubeClient) {
  return startOperator((registry) => {
    on.create("kopfexamples", { registry }, function create({ name, spec }) {
      log.add("create", name, (spec as { value?: number }).value);
    });
    on.update("kopfexamples", { registry }, function update({ name, spec }) {
      log.add("update", name, (spec as { value?: number }).value);
    });
  }, {
    namespaces: ["default"],
    client,
    settings: createSettings({ posting: { enabled: false } }),
  });
}

Deno.test(
  "fault: a storm of 429 with Retry-After, 503s and dropped connections under a burst — Retry-After honoured, nothing lost, nothing repeated, no request storm (X-REL-06)",
  opts,
  async () => {
    const { emulator, client, connect } = await emulated();
    await using _emulator = emulator;
    using _client = client;
    const log = new RunLog();
    const op = await operatorWith(log, await connect());
    try {
      await op.ready;
      const names = Array.from({ length: 20 }, (_, i) => `storm-${i}`);
      emulator.history.clear();
      const patches = { verb: "patch", resource: "kopfexamples" };
      using throttled = emulator.faults.throttle({
        times: 10,
        retryAfterSeconds: 1,
        match: patches,
      });
      using failing = emulator.faults.fail(503, { times: 10, match: patches });
      using dropped = emulator.faults.drop({ times: 5, match: patches });
      const started = Date.now();
      for (const name of names) {
        await client.api.create(KOPFEXAMPLES, kex(name, 1), { namespace: "default" });
      }
      // The harness changes objects with PUT (update), so that only the operator's patches meet
      // the faults and the history tells them apart.
      for (const name of names.slice(0, 10)) {
        const body = await client.api.get<KubeObject>(KOPFEXAMPLES, name, { namespace: "default" });
        await client.api.replace(KOPFEXAMPLES, name, { ...body, spec: { value: 2 } }, {
          namespace: "default",
        }).catch(async () => {
          const again = await client.api.get<KubeObject>(KOPFEXAMPLES, name, {
            namespace: "default",
          });
          await client.api.replace(KOPFEXAMPLES, name, { ...again, spec: { value: 2 } }, {
            namespace: "default",
          });
        });
      }
      await eventually(
        () =>
          names.every((n) => log.of("create", n).length > 0) &&
          names.slice(0, 10).every((n) => log.of("update", n).some((r) => r.value === 2)),
        60_000,
        "every creation and change handled",
      );
      await sleep(1_500); // repeats, if any, would come now
      const recovery = (Date.now() - started) / 1000;
      assert.equal(throttled.hits + failing.hits + dropped.hits, 25, "every fault was hit");
      assert.equal(log.repeats(), 0, "no completed handler ran again");
      // Every object ends in the state its last change asked for, recorded by the handlers.
      for (const name of names) {
        const body = await client.api.get<KubeObject>(KOPFEXAMPLES, name, { namespace: "default" });
        const last =
          (body.metadata?.annotations ?? {})["kopf.zalando.org/last-handled-configuration"];
        assert.ok(
          last?.includes(`"value":${names.indexOf(name) < 10 ? 2 : 1}`),
          `${name}: ${last}`,
        );
      }
      // Retry-After honoured: after each 429, the same object's next patch came ≥ 1 s later.
      const records = emulator.history.find({ verb: "patch", resource: "kopfexamples" })
        .sort((a, b) => a.time - b.time);
      for (const [i, r] of records.entries()) {
        if (r.code !== 429) continue;
        const next = records.slice(i + 1).find((n) => n.name === r.name);
        assert.ok(next, `a retry after the 429 for ${r.name}`);
        assert.ok(next.time - r.time >= 950, `${r.name}: retried after ${next.time - r.time} ms`);
      }
      // No request storm: one patch per creation and per change, plus one per injected fault.
      const sent = records.length;
      assert.ok(sent <= names.length + 10 + 25 + 5, `${sent} patches for 30 cycles and 25 faults`);
      await recordFault({
        fault: "429 storm (Retry-After 1 s) + 503s + dropped connections (emulator), 20 objects",
        recoverySeconds: recovery,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: `${sent} patches for 30 handled cycles and 25 injected faults`,
      });
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "fault: malformed watch input (not JSON, unknown event types, objects without metadata) — one clear log line each, no secret echoed, other objects keep being served (X-REL-07)",
  opts,
  async () => {
    const { emulator, client, connect } = await emulated();
    await using _emulator = emulator;
    using _client = client;
    const log = new RunLog();
    const op = await operatorWith(log, await connect());
    try {
      await op.ready;
      await client.api.create(KOPFEXAMPLES, kex("before", 1), { namespace: "default" });
      await eventually(() => log.of("create", "before").length === 1, 30_000, "the first object");
      const streams = emulator.faults.injectWatchLines([
        '{"type":"ADDED","object":{"token":"s3cr3t-t0ken"', // cut off: not JSON
        '{"type":"EXPLODED","object":{}}',
        '{"type":"MODIFIED","object":{"kind":"KopfExample"}}',
        '{"type":"DELETED"}',
      ], { match: { resource: "kopfexamples" } });
      assert.ok(streams >= 1, "the operator's watch stream received the lines");
      await client.api.create(KOPFEXAMPLES, kex("after", 1), { namespace: "default" });
      await eventually(() => log.of("create", "after").length === 1, 30_000, "the next object");
      const warnings = op.logs.filter((e) => /ignored .*; the stream goes on/.test(e.message))
        .map((e) => e.message);
      assert.equal(warnings.length, 4, warnings.join("\n"));
      assert.ok(warnings.some((m) => /a line that is not JSON \(\d+ characters\)/.test(m)));
      assert.ok(warnings.some((m) => m.includes('unexpected type "EXPLODED"')));
      assert.ok(
        warnings.some((m) => m.includes("MODIFIED event with an object without metadata.name")),
      );
      assert.ok(warnings.some((m) => m.includes("DELETED event without an object")));
      assert.ok(
        !op.logs.some((e) => e.message.includes("s3cr3t")),
        "the line's content is not logged",
      );
      assert.equal(log.repeats(), 0);
      await recordFault({
        fault: "malformed watch lines: not JSON, unknown type, no metadata, no object (emulator)",
        recoverySeconds: 0,
        lostChanges: 0,
        repeatedRuns: 0,
        notes: "one warning per line; the stream goes on",
      });
    } finally {
      await op.stop();
    }
  },
);

Deno.test(
  "stopping while the resources are still being discovered: the operator returns cleanly, no error",
  opts,
  async () => {
    const { emulator, client, connect } = await emulated();
    await using _emulator = emulator;
    using _client = client;
    // Discovery of the API groups hangs; the operator is stopped meanwhile.
    using _slow = emulator.faults.latency(4_000, { match: { path: "/apis" } });
    const log = new RunLog();
    const op = await operatorWith(log, await connect());
    await sleep(300);
    const began = Date.now();
    await op.stop(); // rejected with the abort before the fix
    assert.ok(Date.now() - began < 3_000, "stopped without waiting for the discovery");
  },
);
