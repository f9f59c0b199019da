/**
 * `kopf generate rbac`'s rules, without a cluster: what is granted, by name where Kubernetes
 * allows it, and nothing on webhook configurations unless the operator manages them.
 */

import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { OperatorRegistry } from "../../intents/registries.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { on } from "../../api/on.ts";
import { main } from "../main.ts";
import {
  type Permission,
  rbacDocuments,
  type RbacOptions,
  requiredPermissions,
  resourcesOfCrds,
} from "./rbac.ts";
import { readCrdFiles } from "./types.ts";

const CRDS = "crds/example.yaml";

async function catalogue() {
  return resourcesOfCrds(await readCrdFiles([CRDS]));
}

function options(extra: Partial<RbacOptions> = {}): RbacOptions {
  return {
    namespaces: ["ops"],
    clusterwide: false,
    name: "op",
    accountNamespace: "ops",
    standalone: false,
    leases: undefined,
    ...extra,
  };
}

function webhooked(): OperatorRegistry {
  const registry = new OperatorRegistry();
  on.create("kopfexamples", { registry, id: "c" }, () => {});
  on.validate("kopfexamples", { registry, id: "v" }, () => {});
  on.mutate("kopfexamples", { registry, id: "m" }, () => {});
  return registry;
}

function about(permissions: readonly Permission[], resource: string): Permission[] {
  return permissions.filter((p) => p.resource === resource);
}

const CONFIGURATIONS = ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"];

Deno.test("generate rbac: admission handlers without a managed configuration get no webhook-configuration rule", async () => {
  const permissions = requiredPermissions(webhooked(), await catalogue(), options());
  for (const resource of CONFIGURATIONS) assert.deepEqual(about(permissions, resource), []);
  assert.ok(!permissions.some((p) => p.group === "admissionregistration.k8s.io"));
});

Deno.test("generate rbac: a managed configuration is granted get/patch by name, create (unrestrictable) apart", async () => {
  const permissions = requiredPermissions(
    webhooked(),
    await catalogue(),
    options({ admissionManaged: "ops.kopf.dev" }),
  );
  for (const resource of CONFIGURATIONS) {
    const rules = about(permissions, resource);
    assert.deepEqual(
      rules.map((p) => [p.verbs, p.resourceNames, "cluster" in p.scope]),
      [[["get", "patch"], ["ops.kopf.dev"], true], [["create"], undefined, true]],
    );
    assert.match(rules[1]!.reason, /create cannot be restricted by name/);
  }
  // No verb that the operator does not use.
  assert.ok(
    !permissions.some((p) => p.verbs.includes("update") && CONFIGURATIONS.includes(p.resource)),
  );
  assert.ok(
    !permissions.some((p) => p.verbs.includes("delete") && CONFIGURATIONS.includes(p.resource)),
  );
});

Deno.test("generate rbac: only the kinds of the handlers: validating alone gets no mutating rule", async () => {
  const registry = new OperatorRegistry();
  on.validate("kopfexamples", { registry, id: "v" }, () => {});
  const permissions = requiredPermissions(
    registry,
    await catalogue(),
    options({ admissionManaged: "a.kopf.dev" }),
  );
  assert.equal(about(permissions, "validatingwebhookconfigurations").length, 2);
  assert.deepEqual(about(permissions, "mutatingwebhookconfigurations"), []);
});

Deno.test("generate rbac: the peering object and the leader's Lease by name; shards' Leases not", async () => {
  const registry = webhooked();
  const leader = requiredPermissions(
    registry,
    await catalogue(),
    options({ peering: "mine", leases: "ops", leaseName: "op-leader" }),
  );
  assert.deepEqual(
    about(leader, "kopfpeerings").map((p) => [p.verbs, p.resourceNames]),
    [[["get", "list", "watch", "patch"], ["mine"]]],
  );
  assert.deepEqual(
    about(leader, "leases").map((p) => [p.verbs, p.resourceNames]),
    [[["get", "update"], ["op-leader"]], [["create"], undefined]],
  );
  const shards = requiredPermissions(
    registry,
    await catalogue(),
    options({ standalone: true, leases: "ops", shards: true }),
  );
  assert.deepEqual(about(shards, "kopfpeerings"), []);
  // Sharded replicas run without peering: no peering rules without --standalone either.
  for (const clusterwide of [false, true]) {
    const sharded = requiredPermissions(
      registry,
      await catalogue(),
      options({ leases: "ops", shards: true, clusterwide, namespaces: clusterwide ? [] : ["ops"] }),
    );
    assert.deepEqual(about(sharded, "kopfpeerings"), []);
    assert.deepEqual(about(sharded, "clusterkopfpeerings"), []);
    assert.equal(about(sharded, "leases").length, 1);
  }
  assert.deepEqual(
    about(shards, "leases").map((p) => [p.verbs, p.resourceNames]),
    [[["get", "list", "create", "update", "delete"], undefined]],
  );
  // Literal namespaces: no namespaces rule, no cluster-wide peering.
  assert.deepEqual(about(leader, "namespaces"), []);
  assert.deepEqual(about(leader, "clusterkopfpeerings"), []);
});

Deno.test("generate rbac: resourceNames reach the rendered rules", async () => {
  const permissions = requiredPermissions(
    webhooked(),
    await catalogue(),
    options({ admissionManaged: "ops.kopf.dev" }),
  );
  const docs = rbacDocuments(permissions, options()).map((d) => d.toJS() as KubeObject);
  const cluster = docs.find((d) => d.kind === "ClusterRole")!;
  const rules = cluster.rules as Array<{ resources: string[]; resourceNames?: string[] }>;
  const named = rules.filter((r) => r.resources[0] === "validatingwebhookconfigurations");
  assert.deepEqual(named.map((r) => r.resourceNames), [["ops.kopf.dev"], undefined]);
});

async function generate(args: readonly string[]): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const code = await main(["generate", "rbac", ...args], { write: (line) => lines.push(line) });
  return { code, out: lines.join("\n") };
}

Deno.test("kopf generate rbac: --admission-managed NAME restricts the configurations by name; without it a note says how", async () => {
  const base = ["examples/17-admission/example.ts", "--crd", CRDS, "-n", "ops"];
  const plain = await generate(base);
  assert.equal(plain.code, 0, plain.out);
  assert.doesNotMatch(plain.out, /webhookconfigurations/);
  assert.match(plain.out, /# .*--admission-managed NAME/);
  const managed = await generate([...base, "--admission-managed", "auto.kopf.dev"]);
  assert.equal(managed.code, 0, managed.out);
  const docs = parseAllDocuments(managed.out).map((d) => d.toJS() as KubeObject).filter(Boolean);
  const role = docs.find((d) => d.kind === "ClusterRole")!;
  const rules = role.rules as Array<
    { resources: string[]; resourceNames?: string[]; verbs: string[] }
  >;
  const configs = rules.filter((r) => r.resources[0]!.endsWith("webhookconfigurations"));
  assert.ok(configs.length > 0, managed.out);
  for (const rule of configs) {
    if (rule.verbs.includes("create")) assert.equal(rule.resourceNames, undefined);
    else assert.deepEqual(rule.resourceNames, ["auto.kopf.dev"]);
  }
  assert.doesNotMatch(managed.out, /generate again with/);
  const bad = await generate([...base, "--admission-managed", "Not A Name"]);
  assert.notEqual(bad.code, 0);
  assert.match(bad.out, /--admission-managed "Not A Name" is not a valid object name/);
});
