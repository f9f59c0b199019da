/**
 * Children objects: a KopfExample creates a Pod that belongs to it. Port of Kopf's example
 * 02-children.
 *
 * When a KopfExample is created, `create_fn` renders a Pod from a few spec fields
 * (`spec.field` goes into an environment variable, `spec.duration` is how long it sleeps),
 * adopts it with `adopt()` from the hierarchies kit — the parent's namespace, a name generated
 * from the parent's name, the parent's labels, and an owner reference — creates it through the
 * API, and stores the Pod's uid in `status.create_fn.children`.
 *
 * Nothing deletes the Pod explicitly: because of the owner reference, Kubernetes' garbage
 * collector (in kube-controller-manager) deletes it when its parent is deleted.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/02-children/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl get pod -l somelabel=somevalue       # the child, owned by kopf-example-1
 *   kubectl delete -f examples/obj.yaml
 *   kubectl get pod -l somelabel=somevalue       # gone soon (garbage-collected)
 */
import { declarePermissions, KubeClient, type KubeObject, on } from "../../mod.ts";
import { adopt } from "../../kits/hierarchies.ts";

const PODS = { group: "", version: "v1", plural: "pods", namespaced: true };

// For `kopf generate rbac`: the handler creates Pods itself (the framework cannot see that).
declarePermissions(["", "v1", "pods"], ["create"], { reason: "children Pods of kopfexamples" });

on.create("kopfexamples", async function create_fn({ spec, body }) {
  // The child as it would be written in YAML, with some values taken from the parent's spec.
  const pod: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    spec: {
      containers: [{
        name: "the-only-one",
        image: "busybox",
        command: ["sh", "-x", "-c"],
        args: [`echo "FIELD=$FIELD"\nsleep ${spec.duration ?? 0}\n`],
        env: [{ name: "FIELD", value: String(spec.field ?? "default-value") }],
      }],
    },
  };

  // Make it our child: namespace, generated name, labels and the owner reference.
  adopt(pod, body);

  // Create it through the Kubernetes API (any client would do: the child is a plain object).
  using client = await KubeClient.connect();
  const created = await client.api.create(PODS, pod, { namespace: pod.metadata?.namespace });

  // Goes to the parent's status.create_fn.
  return { children: [created.metadata?.uid] };
});
