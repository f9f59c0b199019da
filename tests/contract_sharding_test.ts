/**
 * Contract tests of what sharded operators use, on the emulator and the real API server alike
 * (the runner: tests/_contract.ts): lists and watches filtered by `shardSelector` as our FNV-1a
 * hash says, its errors in the API server's wording, and Leases with compare-and-swap.
 */

import assert from "node:assert/strict";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { type Lease, LEASES } from "../core/client/leases.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { shardOfObject, shardSelector } from "../core/structs/shards.ts";
import { collect, contract, failure, stopEmulatorLast } from "./_contract.ts";
import { applyCrds, CONFIGMAPS, KOPFEXAMPLES } from "./_support.ts";

contract(
  "shardSelector: lists and watches are filtered by the 64-bit FNV-1a of the uid as our hash says; built-in lists echo the selector, custom-resource lists do not",
  async ({ client, namespace }) => {
    await applyCrds(client, "crds/example.yaml");
    const selector = shardSelector([0], 2, "uid"); // the lower half of the hash space
    const names = Array.from({ length: 8 }, (_, i) => `s${i}`);
    const mine = (items: KubeObject[]) =>
      items.filter((o) => names.includes(o.metadata?.name ?? "")).map((o) => o.metadata!.name!)
        .sort();
    const inShard = (items: KubeObject[]) =>
      mine(items.filter((o) => shardOfObject(o, "uid", 2) === 0));
    for (const resource of [CONFIGMAPS, KOPFEXAMPLES]) {
      const created: KubeObject[] = [];
      for (const name of names) {
        const body = resource === CONFIGMAPS
          ? { metadata: { name } }
          : { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: {} };
        created.push(await client.api.create(resource, body, { namespace }));
      }
      const expected = inShard(created);
      const listed = await client.http.json<
        {
          metadata?: { resourceVersion?: string; shardInfo?: { selector?: string } };
          items: KubeObject[];
        }
      >({
        method: "GET",
        path: resource === CONFIGMAPS
          ? `/api/v1/namespaces/${namespace}/configmaps`
          : `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`,
        query: { shardSelector: selector },
      });
      assert.deepEqual(
        mine(listed.items),
        expected,
        `${resource.plural}: exactly the shard's objects`,
      );
      assert.equal(
        listed.metadata?.shardInfo?.selector,
        resource === CONFIGMAPS ? selector : undefined,
        `${resource.plural}: the echo`,
      );

      // A watch from the list's version: only the shard's objects come.
      const watch = await client.api.watch(resource, {
        namespace,
        shardSelector: selector,
        resourceVersion: listed.metadata?.resourceVersion,
        allowBookmarks: false,
      });
      const changes = created.map((o) =>
        client.api.patch(resource, o.metadata!.name!, { metadata: { labels: { seen: "1" } } }, {
          namespace,
        })
      );
      await Promise.all(changes);
      const events = await collect(
        watch,
        (e) => new Set(e.map((x) => x.object.metadata?.name)).size >= expected.length,
      );
      assert.deepEqual([...new Set(mine(events.map((e) => e.object)))].sort(), expected);
    }
  },
);

contract(
  "shardSelector: bad selectors get 500 'invalid shard selector: …' with the API server's wording",
  async ({ namespace, kubeconfigPath }) => {
    // 500s are retried by default: not here.
    using client = new KubeClient(await loadKubeconfig({ paths: [kubeconfigPath] }), {
      retries: 0,
    });
    const uid = "object.metadata.uid";
    const cases = {
      "   ": "empty shard selector is not allowed; omit the parameter for unfiltered lists",
      [`shardRange(${uid}, '0x00', '0x8000000000000000')`]:
        `hexStart must be a 0x-prefixed 16-digit hex value, got "0x00" (did you mean "0x0000000000000000"?)`,
      "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')":
        `unsupported field path "object.metadata.name"; supported: object.metadata.uid, object.metadata.namespace`,
      [`shardRange(${uid}, '0x8000000000000000', '0x0000000000000000')`]:
        "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
      [`shardRange(${uid}, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')`]:
        `all shard ranges must use the same field, got "object.metadata.uid" and "object.metadata.namespace"`,
    };
    for (const [selector, message] of Object.entries(cases)) {
      const error = await failure(
        client.api.list(CONFIGMAPS, { namespace, shardSelector: selector }),
        500,
      );
      assert.equal(
        error.message.replace(/^.*?invalid shard selector: /s, "").replace(/ \[GET .*\]$/s, ""),
        message,
      );
    }
  },
);

contract(
  "Leases: create, compare-and-swap replace (409 on a stale resourceVersion), list by label, delete",
  async ({ client, namespace }) => {
    const lease = await client.api.create<Lease>(LEASES, {
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "l1", labels: { role: "shard" } },
      spec: { holderIdentity: "a", leaseDurationSeconds: 15 },
    }, { namespace });
    assert.equal(lease.spec?.holderIdentity, "a");
    const taken = await client.api.replace<Lease>(LEASES, "l1", {
      ...lease,
      spec: { ...lease.spec, holderIdentity: "b" },
    }, { namespace });
    assert.equal(taken.spec?.holderIdentity, "b");
    await failure(
      client.api.replace(LEASES, "l1", { ...lease, spec: { ...lease.spec, holderIdentity: "c" } }, {
        namespace,
      }),
      409,
      "Conflict",
    );
    const { items } = await client.api.list<Lease>(LEASES, {
      namespace,
      labelSelector: "role=shard",
    });
    assert.deepEqual(items.map((l) => [l.metadata?.name, l.spec?.holderIdentity]), [["l1", "b"]]);
    await client.api.delete(LEASES, "l1", { namespace });
    await failure(client.api.get(LEASES, "l1", { namespace }), 404, "NotFound");
  },
);

stopEmulatorLast();
