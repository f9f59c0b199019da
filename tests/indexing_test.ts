/**
 * Indices on the real control plane: complete before any resource handler runs, visible to
 * handlers by name, updated on changes and deletions, honouring filters.
 */

import assert from "node:assert/strict";
import { index } from "../core/api/indexing.ts";
import { on } from "../core/api/on.ts";
import { ABSENT } from "../core/intents/filters.ts";
import {
  applyCrds,
  CONFIGMAPS,
  eventually,
  KOPFEXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "indices are complete before handlers run, passed by name, and follow changes (HK-IDX-02..06, 17; SUB-33)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("index");
    for (let i = 0; i < 20; i++) {
      await client.api.create(CONFIGMAPS, {
        metadata: { name: `cm-${i}`, labels: { team: i % 2 ? "odd" : "even" } },
      }, {
        namespace,
      });
    }
    await client.api.create(CONFIGMAPS, {
      metadata: { name: "skip", labels: { team: "odd", ignore: "yes" } },
    }, {
      namespace,
    });
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "x" },
    }, {
      namespace,
    });
    const sizes: number[] = [];
    const changes: string[] = [];
    await using op = await startOperator((registry) => {
      index(
        "configmaps",
        { registry, labels: { ignore: ABSENT } },
        function byTeam({ labels, name }) {
          return labels.team ? { [labels.team]: name } : undefined;
        },
      );
      on.resume("kopfexamples", { registry }, function count(ctx) {
        const byTeam =
          (ctx as unknown as Record<string, { get(k: string): { size: number } | undefined }>)
            .byTeam!;
        sizes.push(byTeam.get("odd")?.size ?? 0);
        return {
          odd: ctx.indices.byTeam?.get("odd")?.toArray().length,
          even: ctx.indices.byTeam?.get("even")?.size,
        };
      });
      on.create("kopfexamples", { registry }, function created({ indices }) {
        return { odd: indices.byTeam?.get("odd")?.size };
      });
      // A ConfigMap's event handler runs after its stream indexed the change (and every change
      // before it): the test waits for it before asking another resource's handler.
      on.event("configmaps", { registry }, function seen({ type, name }) {
        changes.push(`${type}:${name}`);
      });
    }, { namespaces: [namespace] });
    await op.ready;
    // The object existed before the operator: its first handler already sees the full index.
    const first = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "x", { namespace });
        return (o.status as Record<string, unknown> | undefined)?.created ??
          (o.status as Record<string, unknown> | undefined)?.count;
      },
      15_000,
      "the first handler's result",
    );
    assert.deepEqual(
      first,
      { odd: 10 },
      "all 10 odd ConfigMaps were indexed before the handler ran; 'skip' is filtered out",
    );

    await client.api.delete(CONFIGMAPS, "cm-1", { namespace });
    await client.api.patch(CONFIGMAPS, "cm-3", { metadata: { labels: { team: "even" } } }, {
      namespace,
    });
    // Indices of different resources are eventually consistent with each other, as in Kopf.
    await eventually(() => changes.includes("MODIFIED:cm-3"), 15_000, "the relabelling seen");
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "y" },
    }, {
      namespace,
    });
    const second = await eventually(
      async () => {
        const o = await client.api.get(KOPFEXAMPLES, "y", { namespace });
        return (o.status as Record<string, unknown> | undefined)?.created;
      },
      15_000,
      "the second object's result",
    );
    assert.deepEqual(second, { odd: 8 }, "a deletion and a relabelling left the odd store");
  },
);
