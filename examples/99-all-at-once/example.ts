/**
 * Many features at once, for trying things out and for end-to-end tests. Port of Kopf's example
 * 99-all-at-once.
 *
 * - Startup: `startup_fn_simple` takes a second; `startup_fn_retried` fails temporarily three
 *   times, 1 s apart, before it succeeds. Nothing is watched until both have succeeded.
 * - Cleanup: `cleanup_fn` takes a second when the operator exits.
 * - Creation: `create_1` posts Events about the object (a `Normal` and a `Warning` one) and
 *   about its children (none here), and returns `{"job1-status": 100}`; `create_2` first waits
 *   for something (a second), fails with an arbitrary error on its first attempt and succeeds on
 *   the retry with `{"job2-status": 100}`; `create_pod` creates a Pod, adopted by the object and
 *   labelled `application: kopf-example-10`. The results land in `status.create_1` and
 *   `status.create_2`.
 * - Updates: `update` prints the diff of every change; `update_lst` prints the old and new value
 *   of `spec.lst` whenever it changes.
 * - Deletion: `delete` logs a line; its finalizer keeps the object until it has run. The Pod is
 *   deleted by Kubernetes' garbage collector, because the object owns it.
 * - Pods: `example_pod_change` watches the Pods labelled `application: kopf-example-10` (the
 *   ones `create_pod` makes) and logs a line for every event about them.
 *
 * Differences from Kopf's version: `create_2` retries after 1 s (`backoff: 1`) instead of the
 * default 60 s, and the cleanup takes 1 s instead of 3 s, so that a test finishes quickly.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/99-all-at-once/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl get kex kopf-example-1 -o jsonpath='{.status}'   # create_1 and create_2 results
 *   kubectl get pods -l application=kopf-example-10          # the child
 *   kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"lst": ["a", "b"]}}'
 *   kubectl delete -f examples/obj.yaml
 */
import { adopt, label } from "../../kits/hierarchies.ts";
import {
  declarePermissions,
  event,
  info,
  KubeClient,
  type KubeObject,
  on,
  TemporaryError,
} from "../../mod.ts";

const PODS = { group: "", version: "v1", plural: "pods", namespaced: true };

// For `kopf generate rbac`: the handler creates the child Pod itself.
declarePermissions(["", "v1", "pods"], ["create"], { reason: "children Pods of kopfexamples" });

on.startup(async function startup_fn_simple({ logger }) {
  logger.info("Starting in 1s...");
  await sleep(1);
});

on.startup(function startup_fn_retried({ retry, logger }) {
  if (retry < 3) {
    throw new TemporaryError(`Going to succeed in ${3 - retry}s`, { delay: 1 });
  }
  logger.info("Starting retried...");
});

on.cleanup(async function cleanup_fn({ logger }) {
  logger.info("Cleaning up in 1s...");
  await sleep(1);
});

on.create("kopfexamples", function create_1({ body }) {
  const children = createChildren(body);
  info(body, { reason: "AnyReason" });
  event(body, { type: "Warning", reason: "SomeReason", message: "Cannot do something" });
  event(children, {
    type: "Normal",
    reason: "SomeReason",
    message: "Created as part of the job1step",
  });
  return { "job1-status": 100 };
});

on.create("kopfexamples", { backoff: 1 }, async function create_2({ retry }) {
  await waitForSomething(); // e.g. polling an external API
  if (!retry) {
    // Retried by the framework, also after a restart of the operator: the retry count is stored.
    throw new Error("Whoops!");
  }
  return { "job2-status": 100 };
});

on.update("kopfexamples", function update({ diff }) {
  console.log("Handling the diff");
  console.log(JSON.stringify(diff));
});

on.field("kopfexamples", { field: "spec.lst" }, function update_lst({ old, new: value }) {
  console.log(`Handling the FIELD = ${JSON.stringify(old)} -> ${JSON.stringify(value)}`);
});

on.delete("kopfexamples", function delete_fn({ logger }) {
  logger.info("Deleting: nothing to clean up, the garbage collector deletes the children.");
});

on.create("kopfexamples", async function create_pod({ body }) {
  // The Pod as it would be written in YAML.
  const pod: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    spec: {
      containers: [{
        name: "the-only-one",
        image: "busybox",
        command: ["sh", "-x", "-c", "sleep 1"],
      }],
    },
  };

  // Make it our child (namespace, name, labels, owner reference), and mark it for the spy below.
  adopt(pod, body);
  label(pod, { application: "kopf-example-10" });

  using client = await KubeClient.connect();
  await client.api.create(PODS, pod, { namespace: pod.metadata?.namespace });
});

on.event(
  "pods",
  { labels: { application: "kopf-example-10" } },
  function example_pod_change({ logger }) {
    logger.info("This pod is special for us.");
  },
);

/** The children of an object; none in this example. */
function createChildren(_owner: KubeObject): KubeObject[] {
  return [];
}

function waitForSomething(): Promise<void> {
  return sleep(1);
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}
