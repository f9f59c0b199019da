/**
 * End-to-end tests of the examples that are whole operators: two operators peering
 * (06-peering), the walkthrough's operator (18-walkthrough-evc) and everything at once
 * (99-all-at-once), on the shared control plane. As in examples_handlers_test.ts, each runs `examples/NN-name/example.ts` with the
 * real CLI (`cli.ts run … --verbose -n <namespace>`) as a subprocess, does what a user would do
 * with kubectl, and checks what a user would look at: objects, their status, children, Events,
 * and the operator's log lines. With `DUMP_LINES=1`, each test prints the operator's output.
 */

import assert from "node:assert/strict";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import type { KubeClient, KubeObject } from "../mod.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { main } from "../core/cli/main.ts";
import { NAMESPACED_PEERINGS, parsePeers } from "../core/engines/coordination/peering.ts";
import { type SpawnedOperator, spawnOperator } from "./_operator.ts";
import {
  createExampleObject,
  fixture,
  isGone,
  linesWith,
  listEvents,
  NAME,
  opts,
  PODS,
  ref,
  runExample,
  stopCleanly,
  waitFor,
} from "./_examples.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
} from "./_support.ts";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** Creates a KopfExample with a given name and spec. */
async function createExample(
  client: KubeClient,
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
): Promise<KubeObject> {
  return await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name },
    spec,
  }, { namespace });
}

/** Waits until a field of the object's status is set, and returns it. */
async function statusOf<T>(
  client: KubeClient,
  resource: ResourceRef,
  namespace: string,
  name: string,
  key: string,
  timeoutMs = 30_000,
): Promise<T> {
  return await eventually(
    async () => {
      const object = await client.api.get(resource, name, { namespace });
      return (object.status as Record<string, T> | undefined)?.[key];
    },
    timeoutMs,
    `status.${key} of ${namespace}/${name}`,
  );
}

/** Waits until the Events about an object (by name) satisfy `done`, and returns their messages. */
async function eventsAbout(
  client: KubeClient,
  namespace: string,
  name: string,
  done: (events: Array<{ type: string; reason: string; message: string }>) => boolean,
  what: string,
): Promise<Array<{ type: string; reason: string; message: string }>> {
  return await eventually(
    async () => {
      const events = await listEvents(client, namespace, { name });
      return done(events) && events;
    },
    30_000,
    what,
  );
}

/** Waits until `count` output lines contain `text`. */
async function waitForCount(op: SpawnedOperator, text: string, count: number): Promise<void> {
  await eventually(
    () => linesWith(op, text).length >= count,
    30_000,
    `${count} lines with '${text}'; output:\n${op.lines.join("\n")}`,
  );
}

// ---------------------------------------------------------------------------------------------
// 06-peering
// ---------------------------------------------------------------------------------------------

Deno.test(
  "06-peering: same priorities both pause; --dev takes over and the deployed one resumes; kopf freeze (EX-06)",
  opts,
  async () => {
    await using fx = await fixture("ex06");
    const { client, namespace } = fx;
    await applyCrds(client, "crds/peering.yaml");
    for (const doc of parseAllDocuments(await Deno.readTextFile("deploy/peering.yaml"))) {
      await client.api.create(NAMESPACED_PEERINGS, doc.toJS() as KubeObject, { namespace });
    }
    const deployed = { env: { POD_ID: "deployed" } };
    await using a = await runExample("06-peering", namespace, deployed);
    await waitFor(a, /Starting with the peering priority 0\./);
    await createExample(client, namespace, "one");
    assert.deepEqual(await statusOf(client, KOPFEXAMPLES, namespace, "one", "create_fn"), {
      priority: 0,
    });

    // A second operator with the same priority: both pause, both warn.
    {
      // Not runExample(): a paused operator may never get to watching.
      await using b = await spawnOperator(
        ["examples/06-peering/example.ts", "--verbose", "-n", namespace],
        { POD_ID: "twin" },
      );
      await waitFor(a, /Possibly conflicting operators with the same priority 0: twin/);
      await waitFor(b, /Possibly conflicting operators with the same priority 0: deployed/);
      await stopCleanly(b);
    }
    await waitForCount(a, "Resuming operations after the pause", 1);

    // The developer's operator: the deployed one pauses in its favour.
    const dev = await runExample("06-peering", namespace, {
      env: { POD_ID: "developer" },
      args: ["--dev"],
    });
    try {
      await waitFor(dev, /Starting with the peering priority 666\./);
      await waitFor(a, /Pausing operations in favour of developer \(priority 666\)/);
      const entries = parsePeers(
        (await client.api.get(NAMESPACED_PEERINGS, "default", { namespace })).status,
      ).map((p) => [p.identity, p.priority]).sort();
      assert.deepEqual(entries, [["deployed", 0], ["developer", 666]]);
      await createExample(client, namespace, "two");
      assert.deepEqual(await statusOf(client, KOPFEXAMPLES, namespace, "two", "create_fn"), {
        priority: 666,
      });
    } finally {
      await stopCleanly(dev);
    }
    await waitForCount(a, "Resuming operations after the pause", 2);
    assert.equal(linesWith(a, `${ref(namespace, "two")} Handled`).length, 0, "A paused for 'two'");
    await createExample(client, namespace, "three");
    assert.deepEqual(await statusOf(client, KOPFEXAMPLES, namespace, "three", "create_fn"), {
      priority: 0,
    });

    // The same without an operator: kopf freeze and kopf resume.
    const out: string[] = [];
    const cli = (...args: string[]) => main(args, { write: (line) => out.push(line) });
    const kubeconfig = await kubeconfigPath();
    const common = ["-n", namespace, "--kubeconfig", kubeconfig, "-i", "manual"];
    assert.equal(await cli("freeze", ...common, "--lifetime", "60", "--priority", "100"), 0);
    await waitFor(a, /Pausing operations in favour of manual \(priority 100\)/);
    assert.equal(await cli("resume", ...common), 0, out.join("\n"));
    await waitForCount(a, "Resuming operations after the pause", 3);
    await stopCleanly(a);
  },
);

// ---------------------------------------------------------------------------------------------
// 99-all-at-once
// ---------------------------------------------------------------------------------------------

/** Waits until the namespace's default ServiceAccount exists (Pods need it). */
async function waitForServiceAccount(client: KubeClient, namespace: string): Promise<void> {
  const accounts = { group: "", version: "v1", plural: "serviceaccounts", namespaced: true };
  await eventually(
    () => client.api.get(accounts, "default", { namespace }),
    15_000,
    "the default ServiceAccount",
  );
}

Deno.test(
  "99-all-at-once: startup retries, Events, several create handlers, a child Pod and its spy, field and update handlers, deletion, cleanup (EX-99)",
  opts,
  async () => {
    await using fx = await fixture("ex99");
    const { client, namespace } = fx;
    await waitForServiceAccount(client, namespace);
    await using op = await runExample("99-all-at-once", namespace, { plural: "pods" });
    await waitFor(op, new RegExp(`Watching kopfexamples\\b.* in ${namespace}$`));

    // Startup: the simple handler, the retried one after three temporary failures, then watching.
    const started = op.lines.findIndex((l) => l.includes("Starting retried..."));
    const watching = op.lines.findIndex((l) => /Watching (kopfexamples|pods)/.test(l));
    assert.ok(op.lines.findIndex((l) => l.includes("Starting in 1s...")) >= 0);
    assert.ok(started >= 0 && started < watching, op.lines.join("\n"));
    for (const left of [3, 2, 1]) {
      assert.equal(linesWith(op, `Going to succeed in ${left}s`).length, 1, `retry ${left}`);
    }

    const parent = await createExampleObject(client, namespace);
    const p = ref(namespace);
    assert.deepEqual(await statusOf(client, KOPFEXAMPLES, namespace, NAME, "create_1"), {
      "job1-status": 100,
    });
    assert.deepEqual(await statusOf(client, KOPFEXAMPLES, namespace, NAME, "create_2"), {
      "job2-status": 100,
    });
    await waitFor(op, /Creation is processed: 3 succeeded; 0 failed\./);
    assert.equal(linesWith(op, `${p} Handler 'create_2' failed`).length, 1, "one failed attempt");
    assert.ok(linesWith(op, "Whoops!").length > 0);

    // The explicit Events about the object.
    await eventsAbout(
      client,
      namespace,
      NAME,
      (events) =>
        events.some((e) => e.type === "Normal" && e.reason === "AnyReason") &&
        events.some((e) =>
          e.type === "Warning" && e.reason === "SomeReason" && e.message === "Cannot do something"
        ),
      "the Events of create_1",
    );

    // The child Pod: adopted, labelled, and seen by the spy.
    const { items: pods } = await client.api.list(PODS, {
      namespace,
      labelSelector: "application=kopf-example-10",
    });
    assert.equal(pods.length, 1);
    const pod = pods[0]!;
    assert.deepEqual(pod.metadata?.labels, {
      application: "kopf-example-10",
      somelabel: "somevalue",
    });
    assert.equal(pod.metadata?.ownerReferences?.[0]?.uid, parent.metadata!.uid);
    await waitFor(op, new RegExp(`\\[${namespace}/${pod.metadata!.name}\\] This pod is special`));

    // A change of spec.lst: the field handler and the update handler.
    await client.api.patch(KOPFEXAMPLES, NAME, { spec: { lst: ["a", "b"] } }, { namespace });
    await waitFor(op, /Handling the FIELD = undefined -> \["a","b"\]/);
    await waitFor(op, /Handling the diff/);
    await waitFor(op, /\[\["add",\["spec","lst"\],null,\["a","b"\]\]\]/);

    // Deletion: the delete handler, then the object and (garbage-collected) its Pod are gone.
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await waitFor(op, new RegExp(`${p.replace(/[[\]]/g, "\\$&")} Deleting: nothing to clean up`));
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 15_000, "the object");
    await eventually(
      () => isGone(client, PODS, namespace, pod.metadata!.name!),
      25_000,
      "the Pod to be garbage-collected",
    );
    assert.ok(linesWith(op, "Handling the diff").length === 1, "no update for the deletion");

    await stopCleanly(op);
    assert.equal(linesWith(op, "Cleaning up in 1s...").length, 1);
  },
);

// ---------------------------------------------------------------------------------------------
// 18-walkthrough-evc
// ---------------------------------------------------------------------------------------------

const EVCS: ResourceRef = {
  group: "kopf.dev",
  version: "v1",
  plural: "ephemeralvolumeclaims",
  namespaced: true,
};
const PVCS: ResourceRef = {
  group: "",
  version: "v1",
  plural: "persistentvolumeclaims",
  namespaced: true,
};
const PVS: ResourceRef = {
  group: "",
  version: "v1",
  plural: "persistentvolumes",
  namespaced: false,
};
const STORAGECLASSES: ResourceRef = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "storageclasses",
  namespaced: false,
};

Deno.test(
  "18-walkthrough-evc: an EVC gets an adopted PVC; size and labels follow; the PVC is garbage-collected with it (CONT-09)",
  opts,
  async () => {
    await using fx = await fixture("ex18");
    const { client, namespace } = fx;
    const crds = parseAllDocuments(
      await Deno.readTextFile("examples/18-walkthrough-evc/crd.yaml"),
    ).map((d) => d.toJS() as KubeObject);
    await applyCrdObjects(client, crds);

    // A size can only change for a bound claim whose storage class allows expansion. No
    // provisioner here: a class of our own and a volume made by hand, which the claim binds to.
    const storageClass = `kopf-evc-${namespace}`;
    try {
      await client.api.create(STORAGECLASSES, {
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name: storageClass },
        provisioner: "kubernetes.io/no-provisioner",
        allowVolumeExpansion: true,
      });
      await client.api.create(PVS, {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: storageClass },
        spec: {
          storageClassName: storageClass,
          capacity: { storage: "5Gi" },
          accessModes: ["ReadWriteOnce"],
          hostPath: { path: "/tmp/kopf-evc" },
        },
      });

      await using op = await runExample("18-walkthrough-evc", namespace, "ephemeralvolumeclaims");
      const evc = parseYaml(
        await Deno.readTextFile("examples/18-walkthrough-evc/evc.yaml"),
      ) as KubeObject;
      evc.metadata = { ...evc.metadata, labels: { application: "some-app" } };
      evc.spec = { ...(evc.spec as Record<string, unknown>), storageClass };
      const created = await client.api.create(EVCS, evc, { namespace });
      const name = created.metadata!.name!;

      // The PVC: named after the EVC, owned by it, with its labels; the name in the status.
      assert.deepEqual(await statusOf(client, EVCS, namespace, name, "create_fn"), {
        "pvc-name": name,
      });
      const pvc = await client.api.get(PVCS, name, { namespace });
      assert.deepEqual(pvc.metadata?.labels, { application: "some-app" });
      assert.deepEqual(pvc.metadata?.ownerReferences, [{
        apiVersion: "kopf.dev/v1",
        kind: "EphemeralVolumeClaim",
        name,
        uid: created.metadata!.uid!,
        controller: true,
        blockOwnerDeletion: true,
      }]);
      const requested = async () =>
        ((await client.api.get(PVCS, name, { namespace })).spec as {
          resources: { requests: { storage: string } };
        }).resources.requests.storage;
      assert.equal(await requested(), "1G");
      await eventually(
        async () =>
          ((await client.api.get(PVCS, name, { namespace })).status as { phase?: string })
            ?.phase === "Bound",
        30_000,
        "the PVC to be bound to the volume",
      );

      // The size follows the EVC's size.
      await client.api.patch(EVCS, name, { spec: { size: "2G" } }, { namespace });
      await eventually(async () => (await requested()) === "2G", 30_000, "the PVC's new size");
      await waitFor(op, /PVC child is updated: my-claim requests 2G/);

      // Labels: added and changed ones are copied, removed ones removed, the PVC's own kept.
      await client.api.patch(PVCS, name, { metadata: { labels: { own: "label" } } }, {
        namespace,
      });
      await client.api.patch(EVCS, name, {
        metadata: { labels: { application: "other-app", owner: "me" } },
      }, { namespace });
      const labelsOf = async () =>
        (await client.api.get(PVCS, name, { namespace })).metadata?.labels;
      await eventually(
        async () => (await labelsOf())?.owner === "me",
        30_000,
        "the new labels on the PVC",
      );
      assert.deepEqual(await labelsOf(), { application: "other-app", owner: "me", own: "label" });
      await client.api.patch(EVCS, name, { metadata: { labels: { owner: null } } }, { namespace });
      await eventually(
        async () => !("owner" in ((await labelsOf()) ?? {})),
        30_000,
        "the removed label to go from the PVC",
      );
      assert.deepEqual(await labelsOf(), { application: "other-app", own: "label" });

      // Without a size: a permanent failure, no PVC.
      await client.api.create(EVCS, {
        apiVersion: "kopf.dev/v1",
        kind: "EphemeralVolumeClaim",
        metadata: { name: "no-size" },
        spec: {},
      }, { namespace });
      await waitFor(op, /\[.*\/no-size\] Handler 'create_fn' failed permanently: Size must be set/);
      assert.ok(await isGone(client, PVCS, namespace, "no-size"));

      // Deletion: the garbage collector deletes the PVC after its EVC. The EVC's CRD is new in
      // this test, and kube-controller-manager's garbage collector re-reads discovery only every
      // 30 s (hard-coded): until then it does not watch EVCs and learns of the deletion late.
      await client.api.delete(EVCS, name, { namespace });
      await eventually(() => isGone(client, EVCS, namespace, name), 15_000, "the EVC");
      await eventually(
        () => isGone(client, PVCS, namespace, name),
        90_000,
        "the PVC to be garbage-collected",
      );
      await stopCleanly(op);
    } finally {
      await client.api.delete(PVS, storageClass).catch(() => {});
      await client.api.delete(STORAGECLASSES, storageClass).catch(() => {});
    }
  },
);
