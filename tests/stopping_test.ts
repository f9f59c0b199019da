/**
 * A stop asked for while a cycle is in flight: the cycle finishes and stores its outcome before
 * the operator exits (within `settings.queueing.exitTimeout`), so the next start repeats
 * nothing. Found by the fault suite (X-REL-03), made deterministic here.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { startOperator } from "./_operator.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "a stop asked for by a handler as it returns: its result and progress are stored before the exit, and the next start runs nothing again (X-REL-05)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("stopping");
    const runs: string[] = [];
    let stop: (() => Promise<void>) | undefined;
    let stopped: Promise<void> | undefined;
    const setup = (registry: Parameters<Parameters<typeof startOperator>[0]>[0]) => {
      on.create("kopfexamples", { registry }, function create_fn({ name }) {
        runs.push(name);
        // The stop is asked for now, before this cycle's patch is sent.
        stopped ??= stop?.();
        return { done: true };
      });
    };
    const first = await startOperator(setup, { namespaces: [namespace] });
    stop = first.stop;
    await first.ready;
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "once" },
      spec: {},
    }, { namespace });
    await eventually(() => runs.length > 0, 30_000, "the handler to run and stop the operator");
    await stopped;
    const stored = await client.api.get(KOPFEXAMPLES, "once", { namespace });
    assert.deepEqual((stored.status as Record<string, unknown>)?.["create_fn"], { done: true });

    stop = undefined;
    await using second = await startOperator(setup, { namespaces: [namespace] });
    await second.ready;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.deepEqual(runs, ["once"], "the create handler ran once, across both starts");
  },
);
