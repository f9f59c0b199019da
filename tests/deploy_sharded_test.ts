/**
 * `deploy/sharded.yaml` against the real API server (RBAC on): two replicas run with its
 * arguments as the ServiceAccount of `deploy/rbac.yaml` with its Lease Role, split the shards
 * and handle objects with no permission error, as tests/deploy_test.ts runs the single replica.
 */

import assert from "node:assert/strict";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import { spawnOperator } from "./_operator.ts";
import { eventually, permissionErrors } from "./_support.ts";
import {
  apply,
  awaitAccess,
  containerOf,
  createObject,
  deleteClusterScoped,
  manifests,
  opts,
  rbacFor,
  serviceAccountKubeconfig,
  setup,
  USED,
} from "./_deploy.ts";

Deno.test(
  "deploy/sharded.yaml: two replicas with its arguments, as the ServiceAccount of rbac.yaml with its Lease Role, split the shards and handle objects with no permission error; the API server accepts its Deployment of 3 replicas (X-SCALE-30)",
  opts,
  async () => {
    await using fx = await setup("deploy-shards");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    const sharded = await manifests("deploy/sharded.yaml");
    try {
      await apply(client, [...rbacDocs, ...sharded], namespace);
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      const leases = ["get", "list", "create", "update", "delete"].map((verb) => ({
        verb,
        group: "coordination.k8s.io",
        resource: "leases",
        namespaced: true,
      }));
      await awaitAccess(client, namespace, account, [...USED, ...leases], true);
      await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);

      const manifest = sharded.find((d) => d.kind === "Deployment")!;
      assert.equal((manifest.spec as { replicas: number }).replicas, 3);
      const container = containerOf(manifest);
      assert.ok(container.env.some((e) => e.name === "POD_NAME"));
      const args = container.args
        .map((arg) => arg.replaceAll("$(POD_NAMESPACE)", namespace))
        .filter((arg) => !arg.startsWith("--liveness="))
        .map((arg) => (arg.startsWith("--shard-count=") ? "--shard-count=4" : arg));
      assert.ok(args.includes("--shards"), `no --shards in ${args}`);
      const spawn = (pod: string) =>
        spawnOperator(["tests/_scaling_operator.ts", "--verbose", ...args], {
          KUBECONFIG: fx.kubeconfig,
          POD_NAME: pod,
          REPLICA: pod,
          KOPF_TEST_LEASE: "4,3,0.5",
        });
      const ops = [await spawn("kopf-operator-sharded-a"), await spawn("kopf-operator-sharded-b")];
      try {
        await eventually(
          async () => {
            const status = await readShardStatus(client.api, { name: "kopf", namespace });
            const holders = new Set(status.shards.map((s) => s.holder));
            return status.shards.length === 4 && !holders.has(undefined) && holders.size === 2;
          },
          60_000,
          `two replicas holding all 4 shards; output:\n${ops.flatMap((o) => o.lines).join("\n")}`,
        );
        for (const name of ["kex-1", "kex-2", "kex-3", "kex-4"]) {
          await createObject(client, namespace, name);
        }
        await eventually(
          () => ops.flatMap((o) => o.lines).filter((l) => l.startsWith("RUN create ")).length === 4,
          30_000,
          "4 creations",
        );
      } finally {
        for (const op of ops) assert.equal(await op.stop(), 0, op.lines.join("\n"));
      }
      const lines = ops.flatMap((o) => o.lines);
      assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));
      // Without --standalone: sharded replicas turn peering off (they would pause each other).
      assert.equal(lines.filter((l) => /Peering is off for sharded replicas/.test(l)).length, 2);
      assert.deepEqual(lines.filter((l) => /peering/i.test(l) && !/Peering is off/.test(l)), []);
      // Both left: their shards are released and their memberships deleted.
      const after = await readShardStatus(client.api, { name: "kopf", namespace });
      assert.deepEqual(after.members, []);
      assert.ok(after.shards.every((s) => s.holder === undefined));
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);
