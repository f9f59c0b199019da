/**
 * The hardening of the manifests of `deploy/`: every manifest parses; the Deployments run as
 * non-root with a read-only root and no privileges; the NetworkPolicy and the Deployments pass
 * a server-side dry-run apply, and their Pods are admitted where Pod Security enforces
 * `restricted`.
 */

import assert from "node:assert/strict";
import { ApiError } from "../core/client/errors.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { apply, manifests, NAMESPACES, opts, type Rule, setup } from "./_deploy.ts";

/** The Pod-level and container-level security settings of a Deployment of deploy/. */
interface Secured {
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    seccompProfile?: { type?: string };
  };
  containers: Array<{
    securityContext?: {
      readOnlyRootFilesystem?: boolean;
      allowPrivilegeEscalation?: boolean;
      capabilities?: { drop?: string[] };
    };
    volumeMounts?: Array<{ name: string; mountPath: string }>;
  }>;
  volumes?: Array<{ name: string; emptyDir?: unknown }>;
}

const DEPLOYMENTS = ["deploy/deployment.yaml", "deploy/sharded.yaml"];

/** An HTTP probe of a container. */
interface Probe {
  httpGet: { path: string; port: string | number };
}

async function deploymentsOf(path: string): Promise<KubeObject[]> {
  return (await manifests(path)).filter((doc) => doc.kind === "Deployment");
}

Deno.test(
  "deploy/: every manifest parses; the Deployments run as non-root with RuntimeDefault seccomp, a read-only root, no privilege escalation, no capabilities, and a writable /tmp",
  async () => {
    for await (const entry of Deno.readDir("deploy")) {
      if (!entry.name.endsWith(".yaml")) continue;
      const docs = await manifests(`deploy/${entry.name}`);
      assert.ok(docs.length > 0, `deploy/${entry.name} has no object`);
      for (const doc of docs) assert.ok(doc.apiVersion && doc.kind, `deploy/${entry.name}`);
    }
    for (const path of DEPLOYMENTS) {
      const [manifest] = await deploymentsOf(path);
      const pod = (manifest?.spec as { template: { spec: Secured } }).template.spec;
      assert.equal(pod.securityContext?.runAsNonRoot, true, path);
      assert.equal(pod.securityContext?.seccompProfile?.type, "RuntimeDefault", path);
      for (const container of pod.containers) {
        const sc = container.securityContext;
        assert.equal(sc?.readOnlyRootFilesystem, true, path);
        assert.equal(sc?.allowPrivilegeEscalation, false, path);
        assert.deepEqual(sc?.capabilities?.drop, ["ALL"], path);
        const tmp = container.volumeMounts?.find((m) => m.mountPath === "/tmp");
        assert.ok(tmp, `${path}: no writable /tmp`);
        assert.ok(pod.volumes?.find((v) => v.name === tmp.name)?.emptyDir, path);
        // Ready by the liveness endpoint (tests/incluster_test.ts: the kubelet probes it).
        const probes = container as { livenessProbe?: Probe; readinessProbe?: Probe };
        assert.ok(probes.livenessProbe?.httpGet, path);
        assert.deepEqual(probes.readinessProbe?.httpGet, probes.livenessProbe.httpGet, path);
      }
    }
    // rbac.yaml: nothing on webhook configurations (the Deployment serves no webhooks), the
    // peering object by name, nothing but `create` on Events.
    const rules = (await manifests("deploy/rbac.yaml")).flatMap((doc) =>
      (doc.rules ?? []) as Array<Rule & { resourceNames?: string[] }>
    );
    assert.deepEqual(
      rules.filter((r) => r.apiGroups?.includes("admissionregistration.k8s.io")),
      [],
    );
    assert.ok(
      rules.filter((r) => r.resources?.some((x) => /peerings$/.test(x))).every((r) =>
        r.resourceNames?.length
      ),
    );
    assert.deepEqual(rules.filter((r) => r.resources?.includes("events")).map((r) => r.verbs), [[
      "create",
    ]]);
    const [policy] = await manifests("deploy/networkpolicy.yaml");
    const spec = policy!.spec as {
      podSelector: { matchLabels: Record<string, string> };
      policyTypes: string[];
      ingress: Array<{ ports: Array<{ port: number }> }>;
    };
    const [deployment] = await deploymentsOf("deploy/deployment.yaml");
    const labels =
      (deployment!.spec as { template: { metadata: { labels: Record<string, string> } } })
        .template.metadata.labels;
    for (const [key, value] of Object.entries(spec.podSelector.matchLabels)) {
      assert.equal(labels[key], value, "the NetworkPolicy selects the Deployment's Pods");
    }
    assert.deepEqual(spec.policyTypes, ["Ingress"]);
    assert.deepEqual(spec.ingress.map((rule) => rule.ports.map((p) => p.port)), [[9443], [8080]]);
  },
);

Deno.test(
  "deploy/: the NetworkPolicy and the Deployments pass a server-side dry-run apply, and their Pods are admitted where Pod Security enforces `restricted` (one setting less is refused)",
  opts,
  async () => {
    await using fx = await setup("deploy-psa");
    const { client, namespace } = fx;
    await client.api.patch(NAMESPACES, namespace, {
      metadata: { labels: { "pod-security.kubernetes.io/enforce": "restricted" } },
    });
    const account = (await manifests("deploy/rbac.yaml")).find((d) => d.kind === "ServiceAccount")!;
    await apply(client, [account], namespace);
    const apply1 = async (object: KubeObject, plural: string, group: string) => {
      const base = group ? `/apis/${group}` : "/api/v1";
      const name = object.metadata!.name!;
      return await client.http.json<KubeObject>({
        method: "PATCH",
        path: `${base}/namespaces/${namespace}/${plural}/${name}`,
        query: { dryRun: "All", fieldManager: "kopf-deploy-test", force: true },
        contentType: "application/apply-patch+yaml",
        body: object,
      });
    };
    const [policy] = await manifests("deploy/networkpolicy.yaml");
    const applied = await apply1(policy!, "networkpolicies", "networking.k8s.io/v1");
    assert.equal(applied.kind, "NetworkPolicy");
    for (const path of DEPLOYMENTS) {
      for (const manifest of await deploymentsOf(path)) {
        const result = await apply1(manifest, "deployments", "apps/v1");
        assert.equal(result.kind, "Deployment", path);
        // Pod Security admission checks Pods (for Deployments it only warns): the template's Pod.
        const template =
          (manifest.spec as { template: { metadata: KubeObject["metadata"]; spec: Secured } })
            .template;
        const pod = {
          apiVersion: "v1",
          kind: "Pod",
          metadata: { ...template.metadata, name: `${manifest.metadata!.name}-pod` },
          spec: template.spec,
        };
        const admitted = await apply1(pod as KubeObject, "pods", "");
        assert.equal(admitted.kind, "Pod", path);
        // The check can fail: without the seccomp profile, `restricted` refuses the Pod.
        const weaker = structuredClone(pod);
        delete weaker.spec.securityContext?.seccompProfile;
        await assert.rejects(
          () => apply1(weaker as KubeObject, "pods", ""),
          (error: unknown) =>
            error instanceof ApiError && error.code === 403 && /seccompProfile/.test(error.message),
          `${path}: a Pod without seccompProfile was admitted under restricted`,
        );
      }
    }
  },
);
