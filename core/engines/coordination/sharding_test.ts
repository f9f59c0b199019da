import assert from "node:assert/strict";
import { Emulator } from "../../../kits/emulator/mod.ts";
import { Logger } from "../../actions/loggers.ts";
import { KubeClient } from "../../client/client.ts";
import { loadKubeconfig } from "../../client/config.ts";
import { shardingDefaults } from "../../settings/scaling.ts";
import { fairShares, memberLeaseName, ShardCoordinator, shardLeaseName } from "./sharding.ts";

Deno.test("fairShares() gives every member ceil or floor of K/N, adding up to K exactly", () => {
  for (const count of [1, 7, 8, 32]) {
    for (let n = 1; n <= 5; n++) {
      const members = Array.from({ length: n }, (_, i) => `replica-${n - i}`);
      const shares = fairShares(members, count);
      assert.equal(shares.size, n);
      const values = [...shares.values()];
      assert.equal(values.reduce((a, b) => a + b, 0), count, `K=${count} N=${n}`);
      assert.ok(Math.max(...values) - Math.min(...values) <= 1, `K=${count} N=${n}: ${values}`);
    }
  }
  // Every replica computes the same plan, whatever order it saw the members in.
  assert.deepEqual(
    [...fairShares(["c", "a", "b"], 8)].sort(),
    [...fairShares(["b", "c", "a", "a"], 8)].sort(),
  );
  assert.deepEqual(Object.fromEntries(fairShares(["c", "a", "b"], 8)), { a: 3, b: 3, c: 2 });
});

Deno.test("Lease names: shard index in the name; members by a hash of any identity", () => {
  assert.equal(shardLeaseName("kopf", 3), "kopf-shard-3");
  const name = memberLeaseName("kopf", "my-pod-7d9f _3f9a1c2e");
  assert.match(name, /^kopf-member-[0-9a-f]{12}$/);
  assert.notEqual(name, memberLeaseName("kopf", "my-pod-7d9f _3f9a1c2f"));
});

Deno.test("ShardCoordinator: a replica whose membership lapsed (API errors past the renew deadline) stops its shards, and takes them back once the API answers again", async () => {
  await using emulator = await Emulator.start();
  using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }), {
    retries: 0,
  });
  const settings = shardingDefaults({
    enabled: true,
    shards: 2,
    leaseDuration: 3,
    renewDeadline: 2,
    retryPeriod: 0.5,
  });
  let served = new Set<number>();
  const controller = new AbortController();
  const coordinator = new ShardCoordinator({
    api: client.api,
    settings,
    namespace: "default",
    identity: "replica-1",
    logger: new Logger(["kopf", "sharding"]),
    serve: (shards) => {
      served = new Set(shards);
      return Promise.resolve();
    },
    signal: controller.signal,
  });
  const until = async (what: string, check: () => boolean, ms = 15_000) => {
    const deadline = Date.now() + ms;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  try {
    await coordinator.join();
    await until("both shards served", () => served.size === 2);
    const fault = emulator.faults.fail(503, { match: { resource: "leases" } });
    await until("the shards stopped after the renew deadline", () => served.size === 0);
    fault.clear();
    await until("the shards taken back", () => served.size === 2);
  } finally {
    controller.abort();
    await coordinator.finished;
  }
});
