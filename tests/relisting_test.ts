/**
 * A restart over handled objects on the real control plane: the listing reports every object,
 * and only those whose cycle has something to do reach the queue — the objects handled before
 * and unchanged since get no worker, no cycle and no write (`needsNoCycle` in
 * core/reactor/causes/processing.ts); so does a watched change that concerns no handler once the
 * object's worker idled out. Counted with the operator's own metrics.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { Exposition } from "./_prometheus.ts";
import { startOperator } from "./_operator.ts";
import { createSettings } from "../core/settings/settings.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const RESOURCE = "kopfexamples.v1.kopf.dev";

Deno.test(
  "a restart queues only the objects changed while the operator was away: no cycle, no write for the rest",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("relisting");
    const names = Array.from({ length: 12 }, (_, i) => `r${i}`);
    const ran: string[] = [];
    const handlers = (registry: OperatorRegistry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ name }) => {
        ran.push(`create ${name}`);
        return { done: true };
      });
      on.update("kopfexamples", { registry, id: "update_fn" }, ({ name }) => {
        ran.push(`update ${name}`);
      });
    };
    for (const name of names) {
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name },
        spec: { field: "a" },
      }, { namespace });
    }
    {
      await using first = await startOperator(handlers, { namespaces: [namespace] });
      await first.ready;
      await eventually(() => ran.length === names.length, 30_000, "all objects created");
    }
    // Changed while no operator runs: the restart must handle this one.
    await client.api.patch(KOPFEXAMPLES, "r3", { spec: { field: "b" } }, { namespace });
    ran.length = 0;

    await using op = await startOperator(handlers, {
      namespaces: [namespace],
      metrics: "http://127.0.0.1:0/metrics",
    });
    await op.ready;
    const url = (await op.waitForLog(/^Serving metrics at /)).message.split(" ").at(-1)!;
    await eventually(() => ran.includes("update r3"), 30_000, "the changed object updated");
    // Scraped once the listing is counted and the update's write answered (the handler runs
    // before its cycle's write is sent).
    const x = await eventually(
      async () => {
        const x = new Exposition(await (await fetch(url)).text());
        const listed = x.value("kopf_watch_events_total", { resource: RESOURCE, type: "LISTED" });
        const written = x.value("rest_client_requests_total", { verb: "patch" });
        return listed === names.length && written > 0 ? x : undefined;
      },
      15_000,
      "the listing counted and the update written",
    );
    assert.deepEqual(ran, ["update r3"]);
    // Queued: the changed object, and at most the echo of its own write (a watch event).
    const queued = x.value("workqueue_adds_total", { name: RESOURCE });
    assert.ok(queued >= 1 && queued <= 2, `${queued} events queued for 12 listed objects`);
    // One write in all: the update's diff-base on r3.
    assert.equal(x.value("rest_client_requests_total", { verb: "patch" }), 1);
    // The others hold no memory and no worker in the operator.
    assert.ok(op.stats().objects <= 1, `${op.stats().objects} objects remembered`);
  },
);

Deno.test(
  "a watched change that needs no cycle is not queued once the object's worker idled out; one that does is",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("relisting-watched");
    const ran: string[] = [];
    await using op = await startOperator(
      (registry) => {
        on.create("kopfexamples", { registry, id: "create_fn" }, ({ name }) => {
          ran.push(`create ${name}`);
        });
        on.update("kopfexamples", { registry, id: "update_fn" }, ({ name }) => {
          ran.push(`update ${name}`);
        });
      },
      {
        namespaces: [namespace],
        metrics: "http://127.0.0.1:0/metrics",
        settings: createSettings({ posting: { enabled: false }, queueing: { idleTimeout: 0.3 } }),
      },
    );
    await op.ready;
    const url = (await op.waitForLog(/^Serving metrics at /)).message.split(" ").at(-1)!;
    const scrape = async () => new Exposition(await (await fetch(url)).text());
    const modified = (x: Exposition) =>
      x.value("kopf_watch_events_total", { resource: RESOURCE, type: "MODIFIED" });
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "w" },
      spec: { field: "a" },
    }, { namespace });
    await eventually(() => ran.includes("create w"), 30_000, "the object created");
    await eventually(() => op.stats().objects === 0, 15_000, "the worker idled out");
    const before = await scrape();
    const queuedBefore = before.value("workqueue_adds_total", { name: RESOURCE });

    // Someone else writes outside the essence (the status of a CRD without a status
    // subresource): the watch reports it, its cycle would do nothing — nothing is queued.
    await client.api.patch(KOPFEXAMPLES, "w", { status: { other: "x" } }, { namespace });
    const seen = await eventually(
      async () => {
        const x = await scrape();
        return modified(x) > modified(before) ? x : undefined;
      },
      15_000,
      "the status change watched",
    );
    assert.equal(seen.value("workqueue_adds_total", { name: RESOURCE }), queuedBefore);
    assert.equal(op.stats().objects, 0, "no memory made for it");

    // A change of the spec is queued and handled as usual.
    await client.api.patch(KOPFEXAMPLES, "w", { spec: { field: "b" } }, { namespace });
    await eventually(() => ran.includes("update w"), 30_000, "the spec change handled");
    const after = await scrape();
    assert.ok(after.value("workqueue_adds_total", { name: RESOURCE }) > queuedBefore);
    assert.deepEqual(ran, ["create w", "update w"]);
  },
);
