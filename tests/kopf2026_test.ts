/**
 * Behaviour changes of Kopf after the seed documentation (1.44 → 1.45.x and its 2026 main
 * branch) that this project adopts: docs/parity.md, rows K26-xx. On the real control plane.
 * @module
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
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
      execution: { defaultBackoff: 2 },
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

    // The stored delays: the operator-wide 2 s for 'plain', the handler's own 600 s for 'own'.
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
