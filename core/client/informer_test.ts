/**
 * Taps of a shared informer (`Informer.events`) on the in-memory emulator: a late tap gets the
 * store as a listing (or a fresh one, listed once more and merged into a lagging store), filters
 * apply, the copies are the tap's own, several taps share one list+watch, and a relist after 410
 * reaches the taps so that `objectEvents()` folds it exactly as for a watch of their own.
 */

import assert from "node:assert/strict";
import type { Resource } from "../structs/resources.ts";
import type { ListOptions } from "./api.ts";
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

Deno.test(
  "Informer taps: a fresh late tap lists once more; what the lagging store missed reaches the store, the other taps and the subscribers once, and the watch's late echoes are skipped",
  opts,
  async () => {
    await withEmulator(async (client, emulator) => {
      await client.api.create(CONFIGMAPS, cm("a", { k: "1" }), NS);
      await client.api.create(CONFIGMAPS, cm("b"), NS);
      await using cache = new InformerCache(client.api);
      const informer = cache.informer(CONFIGMAPS, NS);
      await informer.ready;
      const stop = new AbortController();
      const early = collect(informer.events({ signal: stop.signal }));
      const changes: string[] = [];
      informer.subscribe((e) => {
        const name = e.object.metadata?.name;
        if (name !== "kube-root-ca.crt") changes.push(`${e.type}:${name}`);
      });
      // The store lags: the watch holds its events while "a" changes, "b" goes, "c" comes.
      const stalled = emulator.faults.stallWatches();
      await client.api.patch(CONFIGMAPS, "a", { data: { k: "2" } }, NS);
      await client.api.delete(CONFIGMAPS, "b", NS);
      await client.api.create(CONFIGMAPS, cm("c"), NS);
      const lists = () => client.counters.count({ verb: "list", resource: "configmaps" });
      const before = lists();
      const stale = collect(informer.events({ signal: stop.signal })); // the store as it is
      const fresh = collect(informer.events({ signal: stop.signal, fresh: true }));
      const listing = (names: string[]) => [
        "init",
        ...names.map((n) => `initApply:${n}`),
        "initDone",
      ];
      await until(() => seen(fresh.items).length === 4, "the fresh listing");
      assert.deepEqual(seen(fresh.items), listing(["a", "c"]));
      const a = fresh.items.find((e) => "object" in e && e.object.metadata?.name === "a");
      assert.deepEqual(a && "object" in a ? a.object.data : undefined, { k: "2" });
      assert.equal(lists() - before, 1, "one list request");
      const merged = ["MODIFIED:a", "ADDED:c", "delete:b"];
      assert.deepEqual(seen(stale.items), [...listing(["a", "b"]), ...merged]);
      // The held events come now; a later change tells when they have been read.
      stalled.clear();
      await client.api.create(CONFIGMAPS, cm("later"), NS);
      await until(
        () => [early, stale, fresh].every((t) => seen(t.items).includes("ADDED:later")),
        "a later change",
      );
      stop.abort();
      await Promise.all([early.done, stale.done, fresh.done]);
      assert.deepEqual(seen(early.items), [...listing(["a", "b"]), ...merged, "ADDED:later"]);
      assert.deepEqual(seen(stale.items), [...listing(["a", "b"]), ...merged, "ADDED:later"]);
      assert.deepEqual(seen(fresh.items), [...listing(["a", "c"]), "ADDED:later"]);
      assert.deepEqual(changes, ["apply:a", "apply:c", "delete:b", "apply:later"]);
      assert.equal(cache.get(CONFIGMAPS, "b", NS), undefined);
    });
  },
);

Deno.test(
  "Informer taps: an object the watch deletes while a fresh listing is read is not brought back by that listing",
  opts,
  async () => {
    await withEmulator(async (client) => {
      await client.api.create(CONFIGMAPS, cm("a"), NS);
      await client.api.create(CONFIGMAPS, cm("b"), NS);
      // The API as the informer sees it: a list's pages wait (once read) while `holding`.
      const hold = Promise.withResolvers<void>();
      let holding = false;
      let listed = false;
      const api = Object.create(client.api) as typeof client.api;
      const listPages = client.api.listPages.bind(client.api);
      api.listPages = (async function* (resource: Resource, options?: ListOptions) {
        for await (const page of listPages(resource, options)) {
          listed = true;
          if (holding) await hold.promise;
          yield page;
        }
      }) as typeof api.listPages;
      await using cache = new InformerCache(api);
      const informer = cache.informer(CONFIGMAPS, NS);
      await informer.ready;
      const stop = new AbortController();
      const early = collect(informer.events({ signal: stop.signal }));
      holding = true;
      listed = false;
      const fresh = collect(informer.events({ signal: stop.signal, fresh: true }));
      await until(() => listed, "the fresh listing read (with b in it)");
      await client.api.delete(CONFIGMAPS, "b", NS);
      await until(() => seen(early.items).includes("delete:b"), "the watch's deletion");
      hold.resolve();
      await until(() => seen(fresh.items).at(-1) === "initDone", "the fresh listing");
      await client.api.create(CONFIGMAPS, cm("later"), NS);
      await until(() => seen(fresh.items).includes("ADDED:later"), "a later change");
      stop.abort();
      await Promise.all([early.done, fresh.done]);
      assert.deepEqual(seen(fresh.items), ["init", "initApply:a", "initDone", "ADDED:later"]);
      assert.deepEqual(seen(early.items).slice(4), ["delete:b", "ADDED:later"]);
      assert.equal(cache.get(CONFIGMAPS, "b", NS), undefined);
    });
  },
);

Deno.test(
  "Informer taps: when the fresh listing's request fails, the tap gets the store as it is and the error is reported",
  opts,
  async () => {
    await withEmulator(async (client, emulator) => {
      await client.api.create(CONFIGMAPS, cm("a"), NS);
      const errors: string[] = [];
      await using cache = new InformerCache(client.api, {
        onError: (error) => errors.push(error.message),
      });
      const informer = cache.informer(CONFIGMAPS, NS);
      await informer.ready;
      emulator.faults.fail(403, { match: { verb: "list" }, message: "forbidden here" });
      const stop = new AbortController();
      const fresh = collect(informer.events({ signal: stop.signal, fresh: true }));
      await until(() => seen(fresh.items).at(-1) === "initDone", "the store's listing");
      stop.abort();
      await fresh.done;
      assert.deepEqual(seen(fresh.items), ["init", "initApply:a", "initDone"]);
      assert.ok(errors.some((m) => m.includes("forbidden here")), errors.join("; "));
    });
  },
);
