/**
 * The deployment manifests of `deploy/` against the real API server (RBAC on): the operator runs
 * as the ServiceAccount of `deploy/rbac.yaml` — with a token from the TokenRequest API in a
 * kubeconfig of its own — with the arguments and environment of `deploy/deployment.yaml`, and
 * peers in the KopfPeering of `deploy/peering.yaml`. It must handle an object, post Events,
 * keep its peering entry and answer the liveness probe, with no permission error. Then, with
 * one rule removed at a time, it must report a clear permission error: the rules are needed and
 * the test can fail. The Deployment itself is created too: its ReplicaSet makes a Pod (the test
 * plane has no kubelet, so it never runs), which the ServiceAccount admission accepts.
 *
 * Cluster-scoped objects (the ClusterRole and its binding) get names unique to the test and are
 * deleted in `finally`; everything else lives in the test's namespace. The sharded Deployment:
 * tests/deploy_sharded_test.ts; the manifests' hardening: tests/deploy_manifests_test.ts.
 */

import assert from "node:assert/strict";
import { NAMESPACED_PEERINGS, parsePeers } from "../core/engines/coordination/peering.ts";
import { EVENTS, PODS, waitFor } from "./_examples.ts";
import { eventually, KOPFEXAMPLES, permissionErrors } from "./_support.ts";
import {
  type Access,
  apply,
  awaitAccess,
  containerOf,
  createObject,
  deleteClusterScoped,
  deployment,
  manifests,
  opts,
  rbacFor,
  type Rule,
  runAsPod,
  serviceAccountKubeconfig,
  setup,
  USED,
} from "./_deploy.ts";

Deno.test(
  "deploy/: the operator runs as the ServiceAccount of rbac.yaml with the Deployment's arguments, with no permission error (DEP-02, DEP-04, DEP-07)",
  opts,
  async () => {
    await using fx = await setup("deploy");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    try {
      await apply(client, rbacDocs, namespace);
      await apply(client, await manifests("deploy/peering.yaml"), namespace);
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      await awaitAccess(client, namespace, account, USED, true);
      await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);

      const podId = "kopf-operator-7d9f8c6b5-x2x4q";
      const { op, liveness } = await runAsPod(namespace, fx.kubeconfig, podId);
      try {
        await waitFor(op, new RegExp(`Watching kopfexamples\\b.* in ${namespace}$`), 30_000);
        await createObject(client, namespace, "kex-1");
        const handled = await eventually(
          async () => {
            const object = await client.api.get(KOPFEXAMPLES, "kex-1", { namespace });
            return (object.status as { create_fn?: { message?: string } } | undefined)?.create_fn;
          },
          30_000,
          `status.create_fn of kex-1; output:\n${op.lines.join("\n")}`,
        );
        assert.deepEqual(handled, { message: "hello world" });

        // The Events of the handling, posted with the ServiceAccount's token.
        const events = await eventually(
          async () => {
            const { items } = await client.api.list(EVENTS, {
              namespace,
              fieldSelector: "involvedObject.name=kex-1",
            });
            const messages = items.map((e) => String(e.message));
            // Both from one batch, which is posted a few at a time: wait for each.
            return messages.some((m) => /Handler 'create_fn' succeeded/.test(m)) &&
              messages.some((m) => m.startsWith("And here we are!")) && messages;
          },
          30_000,
          `Events about kex-1; output:\n${op.lines.join("\n")}`,
        );
        assert.ok(events.some((m) => m.startsWith("And here we are!")), events.join("\n"));

        // The peering entry, keyed by POD_ID, is there and kept alive.
        const peering = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
        const peers = parsePeers(peering.status);
        assert.deepEqual(peers.map((p) => p.identity), [podId]);

        // The liveness endpoint of --liveness, at the path the probe asks.
        const container = containerOf(await deployment());
        assert.equal(new URL(liveness).pathname, container.livenessProbe.httpGet.path);
        const response = await fetch(liveness);
        await response.body?.cancel();
        assert.equal(response.status, 200);
      } finally {
        const code = await op.stop();
        if (Deno.env.get("DUMP_LINES")) console.log(op.lines.join("\n"));
        assert.equal(code, 0, op.lines.join("\n"));
      }
      assert.deepEqual(permissionErrors(op.lines), [], op.lines.join("\n"));
      // The exit removed the entry: the peering object was patched to the end.
      const after = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
      assert.deepEqual(parsePeers(after.status), []);
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);

Deno.test(
  "deploy/: the Deployment has one replica, Recreate, POD_ID from the Pod's name, and its Pod is admitted with the ServiceAccount (DEP-02, DEP-07)",
  opts,
  async () => {
    await using fx = await setup("deploy-pod");
    const { client, namespace } = fx;
    const rbacDocs = await rbacFor(namespace, namespace);
    try {
      await apply(client, rbacDocs, namespace);
      const manifest = await deployment();
      const spec = manifest.spec as {
        replicas: number;
        strategy: { type: string };
        template: { spec: { serviceAccountName: string } };
      };
      assert.equal(spec.replicas, 1);
      assert.equal(spec.strategy.type, "Recreate");
      const account = rbacDocs.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
      assert.equal(spec.template.spec.serviceAccountName, account);
      const container = containerOf(manifest);
      const podId = container.env.find((e) => e.name === "POD_ID");
      assert.equal(podId?.valueFrom?.fieldRef?.fieldPath, "metadata.name");
      const port = container.livenessProbe.httpGet.port;
      const named = container.ports.find((p) => p.name === port || p.containerPort === port);
      const liveness = container.args.find((a) => a.startsWith("--liveness="));
      assert.ok(named && liveness, "the probe's port is a declared port of --liveness");
      assert.equal(new URL(liveness.slice("--liveness=".length)).port, String(named.containerPort));

      // Stored as it is; kube-controller-manager makes a ReplicaSet and a Pod of it.
      await apply(client, [manifest], namespace);
      const pods = await eventually(
        async () => {
          const { items } = await client.api.list(PODS, {
            namespace,
            labelSelector: "app.kubernetes.io/name=kopf-operator",
          });
          return items.length > 0 && items;
        },
        30_000,
        "the Deployment's Pod",
      );
      assert.equal(pods.length, 1);
      const pod = pods[0]!;
      assert.equal((pod.spec as { serviceAccountName?: string }).serviceAccountName, account);
    } finally {
      await deleteClusterScoped(client, rbacDocs);
    }
  },
);

/** One rule (or verb) removed from rbac.yaml, and what the operator must then say. */
interface Removal {
  readonly what: string;
  readonly edit: (kind: string, rule: Rule) => Rule | null;
  /** Creates an object first, for errors that only handling provokes. */
  readonly needsObject?: boolean;
  /** A permission of the removed rule, to wait until the authorizer knows it is gone. */
  readonly check: Access;
  readonly expect: RegExp;
}

/** Removes the Role's rule for `resource`, or with `verb` only that verb of it. */
function without(resource: string, verb?: string): (kind: string, rule: Rule) => Rule | null {
  return (kind, rule) => {
    if (kind !== "Role" || !rule.resources?.includes(resource)) return rule;
    return verb ? { ...rule, verbs: rule.verbs?.filter((v) => v !== verb) ?? [] } : null;
  };
}

const REMOVALS: readonly Removal[] = [
  {
    what: "the served resource",
    edit: without("kopfexamples"),
    check: USED.find((a) => a.resource === "kopfexamples")!,
    expect: /Watching kopfexamples.*forbidden.*cannot list resource "kopfexamples"/,
  },
  {
    what: "patch on the served resource",
    edit: without("kopfexamples", "patch"),
    needsObject: true,
    check: USED.find((a) => a.resource === "kopfexamples" && a.verb === "patch")!,
    expect: /forbidden.*cannot patch resource "kopfexamples"/,
  },
  {
    what: "patch on kopfpeerings",
    edit: without("kopfpeerings", "patch"),
    check: USED.find((a) => a.resource === "kopfpeerings" && a.verb === "patch")!,
    expect: /forbidden.*cannot patch resource "kopfpeerings"/,
  },
  {
    what: "events",
    edit: without("events"),
    needsObject: true,
    check: USED.find((a) => a.resource === "events")!,
    expect: /Failed to post an Event.*forbidden.*cannot create resource "events"/,
  },
  {
    what: "customresourcedefinitions",
    edit: (kind, rule) =>
      kind === "ClusterRole" && rule.resources?.includes("customresourcedefinitions") ? null : rule,
    check: USED.find((a) => a.resource === "customresourcedefinitions")!,
    expect:
      /Watching CustomResourceDefinitions.*forbidden.*cannot list resource "customresourcedefinitions"/,
  },
  {
    what: "kopfpeerings",
    edit: without("kopfpeerings"),
    check: USED.find((a) => a.resource === "kopfpeerings")!,
    expect: /peering object.*forbidden.*cannot get resource "kopfpeerings"/,
  },
];

Deno.test(
  "deploy/: without one rule of rbac.yaml the operator reports a clear permission error (DEP-04)",
  opts,
  async () => {
    await using fx = await setup("deploy-neg");
    const { client, namespace } = fx;
    const all = await rbacFor(namespace, namespace);
    const account = all.find((d) => d.kind === "ServiceAccount")!.metadata!.name!;
    try {
      await apply(client, await manifests("deploy/peering.yaml"), namespace);
      for (const [i, removal] of REMOVALS.entries()) {
        await apply(client, await rbacFor(namespace, namespace, removal.edit), namespace);
        await awaitAccess(client, namespace, account, [removal.check], false);
        const kept = USED.filter((a) =>
          removal.edit(a.namespaced ? "Role" : "ClusterRole", {
            resources: [a.resource],
            verbs: [a.verb],
          })?.verbs?.includes(
            a.verb,
          )
        );
        assert.ok(kept.length < USED.length && !kept.includes(removal.check));
        await awaitAccess(client, namespace, account, kept, true);
        if (i === 0) await serviceAccountKubeconfig(client, namespace, account, fx.kubeconfig);
        const { op } = await runAsPod(namespace, fx.kubeconfig, `kopf-operator-${i}`);
        try {
          if (removal.needsObject) await createObject(client, namespace, `kex-${i}`);
          await waitFor(op, removal.expect, 30_000).catch((error) => {
            throw new Error(`Without ${removal.what}: ${error.message}`);
          });
        } finally {
          await op.stop();
          if (Deno.env.get("DUMP_LINES")) console.log(op.lines.join("\n"));
        }
      }
    } finally {
      await deleteClusterScoped(client, all);
    }
  },
);
