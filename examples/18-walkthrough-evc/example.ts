/**
 * The walkthrough's operator: EphemeralVolumeClaims, each with a PersistentVolumeClaim made for
 * it and deleted with it. The whole story is in docs/walkthrough.md; Kopf's documentation walks
 * through the same problem.
 *
 * - `create_fn`: renders `pvc.yaml` with the EVC's name, `spec.size` and `spec.storageClass`,
 *   adopts the PVC (owner reference, namespace, the EVC's labels), creates it, and returns its
 *   name, which lands in `status.create_fn["pvc-name"]`. Without a size it fails permanently.
 * - `update_fn`: on every change of the EVC, sets the PVC's requested size to `spec.size`.
 * - `relabel`: when the EVC's labels change, applies the change to the PVC — new and changed
 *   labels are set, removed ones are removed (the diff's `null`), other labels of the PVC stay.
 * - Deletion: nothing here. The owner reference makes Kubernetes' garbage collector delete the
 *   PVC after its EVC.
 *
 *   kubectl apply -f examples/18-walkthrough-evc/crd.yaml
 *   kopf run examples/18-walkthrough-evc/example.ts --verbose
 *   kubectl apply -f examples/18-walkthrough-evc/evc.yaml
 *   kubectl get evc my-claim -o jsonpath='{.status.create_fn}'   # {"pvc-name":"my-claim"}
 *   kubectl patch evc my-claim --type merge -p '{"spec": {"size": "2G"}}'
 *   kubectl label evc my-claim application=some-app owner=me
 *   kubectl label evc my-claim owner-
 *   kubectl get pvc my-claim --show-labels
 *   kubectl delete evc my-claim                                  # the PVC follows
 */
import { parse as parseYaml } from "yaml";
import { adopt } from "../../kits/hierarchies.ts";
import { declarePermissions, KubeClient, type KubeObject, on, PermanentError } from "../../mod.ts";

const PVCS = { group: "", version: "v1", plural: "persistentvolumeclaims", namespaced: true };

// For `kopf generate rbac`: the handlers create and patch the PVCs themselves.
declarePermissions(["", "v1", "persistentvolumeclaims"], ["create", "patch"], {
  reason: "the PVCs of ephemeralvolumeclaims",
});

/** The EVC's spec and the part of its status this operator writes. */
interface EvcSpec {
  size?: string;
  storageClass?: string;
}
interface EvcStatus {
  create_fn?: { "pvc-name"?: string };
}

on.create("ephemeralvolumeclaims", async function create_fn({ spec, name, body, logger }) {
  const { size, storageClass = "standard" } = spec as EvcSpec;
  if (!size) throw new PermanentError(`Size must be set. Got ${JSON.stringify(size)}.`);

  const template = await Deno.readTextFile(new URL("./pvc.yaml", import.meta.url));
  const text = template.replaceAll("{name}", name ?? "").replaceAll("{size}", size)
    .replaceAll("{storageClass}", storageClass);
  const data = parseYaml(text) as KubeObject;

  // Our child: the EVC's namespace and labels, and an owner reference for the garbage collector.
  adopt(data, body);

  using client = await KubeClient.connect();
  const pvc = await client.api.create(PVCS, data, { namespace: data.metadata?.namespace });
  logger.info(`PVC child is created: ${pvc.metadata?.name}`);
  return { "pvc-name": pvc.metadata?.name };
});

on.update("ephemeralvolumeclaims", async function update_fn({ spec, status, namespace, logger }) {
  const { size } = spec as EvcSpec;
  if (!size) throw new PermanentError(`Size must be set. Got ${JSON.stringify(size)}.`);
  const pvcName = pvcNameOf(status);
  using client = await KubeClient.connect();
  await client.api.patch(PVCS, pvcName, { spec: { resources: { requests: { storage: size } } } }, {
    namespace,
  });
  logger.info(`PVC child is updated: ${pvcName} requests ${size}`);
});

on.field(
  "ephemeralvolumeclaims",
  { field: "metadata.labels" },
  async function relabel({ diff, status, namespace, logger }) {
    // Relative to metadata.labels: [op, [key], old, new]; a removed label has new = null, which
    // is exactly what removes it in a merge patch. An empty path means all labels at once.
    const labels: Record<string, unknown> = {};
    for (const [, path, old, value] of diff) {
      if (path.length > 0) {
        labels[String(path[0])] = value ?? null;
      } else {
        for (const key of Object.keys(asMapping(old))) labels[key] = null;
        Object.assign(labels, asMapping(value));
      }
    }
    const pvcName = pvcNameOf(status);
    using client = await KubeClient.connect();
    await client.api.patch(PVCS, pvcName, { metadata: { labels } }, { namespace });
    logger.info(`PVC child is relabelled: ${JSON.stringify(labels)}`);
  },
);

function pvcNameOf(status: unknown): string {
  const name = (status as EvcStatus).create_fn?.["pvc-name"];
  if (!name) throw new PermanentError("No PVC is known: status.create_fn['pvc-name'] is missing.");
  return name;
}

function asMapping(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" ? value as Record<string, unknown> : {};
}
