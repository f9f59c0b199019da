/**
 * Taps of a shared informer (`Informer.events`) on the in-memory emulator: a late tap gets the
 * store as a listing, filters apply, the copies are the tap's own, several taps share one
 * list+watch, and a relist after 410 reaches the taps so that `objectEvents()` folds it exactly
 * as for a watch of their own.
 */

import assert from "node:assert/strict";
import { InformerCache } from "./caching.ts";
import { cm, CONFIGMAPS, until, withEmulator } from "./_test_support.ts";
import { type ObjectEvent, objectEvents, type WatcherEvent } from "./watching.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const NS = { namespace: "default" };

/** Collects a stream in the background. */
function collect<T>(stream: AsyncIterable<T>): { items: T[]; done: Promise<void> } {
  const items: T[] = [];
  const done = (async () => {
    for await (const item of stream) items.push(item);
  })();
  return { items, done };
}

/** The events worth comparing: no bookmarks, reconnections or the namespace's CA ConfigMap. */
function seen(events: readonly WatcherEvent[]): string[] {
  return events.filter((e) =>
    e.type !== "bookmark" && e.type !== "connected" &&
    !("object" in e && e.object.metadata?.name === "kube-root-ca.crt")
  ).map(describe);
}

function describe(event: WatcherEvent): string {
  if ("object" in event) {
    const kind = event.type === "apply" ? event.raw : event.type;
    return `${kind}:${event.object.metadata?.name}`;
  }
  return event.type;
}

Deno.test(
  "Informer taps: a late tap gets the store as a listing, then the changes; filters apply; the copies are its own; one list+watch for all",
  opts,
  async () => {
    await withEmulator(async (client) => {
      await client.api.create(CONFIGMAPS, cm("a", { k: "1" }), NS);
      await client.api.create(CONFIGMAPS, cm("b"), NS);
      await using cache = new InformerCache(client.api);
      const informer = cache.informer(CONFIGMAPS, NS);
      const stop = new AbortController();
      const early = collect(informer.events({ signal: stop.signal })); // before the first listing
      await informer.ready;
      const late = collect(informer.events({ signal: stop.signal }));
      const onlyB = collect(informer.events({
        signal: stop.signal,
        accept: (o) => o.metadata?.name === "b" || o.metadata?.name === "c",
      }));
      await until(
        () => seen(late.items).length === 4 && seen(onlyB.items).length === 3,
        "the listings",
      );
      await client.api.create(CONFIGMAPS, cm("c"), NS);
      await client.api.patch(CONFIGMAPS, "a", { data: { k: "2" } }, NS);
      await client.api.delete(CONFIGMAPS, "b", NS);
      const changes = ["ADDED:c", "MODIFIED:a", "delete:b"];
      const listing = (
        names: string[],
      ) => ["init", ...names.map((n) => `initApply:${n}`), "initDone"];
      await until(
        () => [early, late].every((t) => seen(t.items).length === 4 + changes.length),
        "the changes reach every tap",
      );
      stop.abort();
      await Promise.all([early.done, late.done, onlyB.done]);
      for (const [tap, what] of [[early, "early"], [late, "late"]] as const) {
        assert.deepEqual(seen(tap.items), [...listing(["a", "b"]), ...changes], what);
      }
      assert.deepEqual(
        seen(onlyB.items),
        [...listing(["b"]), "ADDED:c", "delete:b"],
        "the filtered tap",
      );
      // A tap's objects are its own copies; the store's stay frozen and unchanged.
      const mine = late.items.find((e) => e.type === "apply" && e.object.metadata?.name === "a");
      assert.ok(mine && "object" in mine);
      (mine.object.data as Record<string, string>).k = "mutated";
      assert.deepEqual(cache.get(CONFIGMAPS, "a", NS)?.data, { k: "2" });
      assert.equal(informer.taps, 0, "stopped taps are gone");
      assert.equal(client.counters.count({ verb: "list", resource: "configmaps" }), 1, "one list");
      assert.equal(
        client.counters.count({ verb: "watch", resource: "configmaps" }),
        1,
        "one watch",
      );
    });
  },
);

Deno.test(
  "Informer taps: a relist after 410 Gone reaches the taps, and objectEvents() folds it as for a watch of their own",
  opts,
  async () => {
    await withEmulator(async (client, emulator) => {
      for (const name of ["a", "b"]) await client.api.create(CONFIGMAPS, cm(name), NS);
      await using cache = new InformerCache(client.api, { watching: { reconnectBackoffMs: 10 } });
      const informer = cache.informer(CONFIGMAPS, NS);
      await informer.ready;
      const stop = new AbortController();
      const tap = collect(objectEvents(informer.events({
        signal: stop.signal,
        accept: (o) => o.metadata?.name !== "kube-root-ca.crt",
      })));
      await until(() => tap.items.length === 2, "the first listing");
      // While the watch is down, "a" goes and "c" comes; the history is compacted: 410, relist.
      const blocked = emulator.faults.fail(503, { match: { verb: "watch" } });
      emulator.faults.dropConnections();
      await client.api.delete(CONFIGMAPS, "a", NS);
      await client.api.create(CONFIGMAPS, cm("c"), NS);
      emulator.compact();
      blocked.clear();
      await until(() => tap.items.length === 5, `the relist folded, got ${tap.items.length}`);
      stop.abort();
      await tap.done;
      const seen = tap.items.slice(2).map((e: ObjectEvent) =>
        `${e.type}:${e.object.metadata?.name}${
          e.type === "apply" && e.unchanged ? ":unchanged" : ""
        }`
      ).sort();
      assert.deepEqual(seen, ["apply:b:unchanged", "apply:c", "delete:a"]);
      assert.equal(cache.get(CONFIGMAPS, "a", NS), undefined, "the store forgot it too");
      assert.ok(client.counters.count({ verb: "list", resource: "configmaps" }) >= 2, "relisted");
    });
  },
);

Deno.test(
  "Informer taps: the operator's own write reaches the taps at once, as the watch would say it (ADDED for a creation, MODIFIED after), and its echo is skipped",
  opts,
  async () => {
    await withEmulator(async (client, emulator) => {
      await using cache = new InformerCache(client.api);
      const informer = cache.informer(CONFIGMAPS, NS);
      await informer.ready;
      const stop = new AbortController();
      const tap = collect(informer.events({ signal: stop.signal }));
      const stalled = emulator.faults.stallWatches(); // the echoes wait until it is cleared
      const created = await client.api.create(CONFIGMAPS, cm("mine"), NS);
      cache.observe(CONFIGMAPS, created);
      const changed = await client.api.patch(CONFIGMAPS, "mine", { data: { k: "1" } }, NS);
      cache.observe(CONFIGMAPS, changed);
      await until(() => seen(tap.items).length === 4, "the observed writes");
      stalled.clear();
      await client.api.create(CONFIGMAPS, cm("later"), NS); // after the echoes, if any came
      await until(() => seen(tap.items).includes("ADDED:later"), "a later change");
      stop.abort();
      await tap.done;
      assert.deepEqual(seen(tap.items).slice(2), ["ADDED:mine", "MODIFIED:mine", "ADDED:later"]);
    });
  },
);
