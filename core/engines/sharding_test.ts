import assert from "node:assert/strict";
import { fairShares, memberLeaseName, shardLeaseName } from "./sharding.ts";

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
