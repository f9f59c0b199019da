/**
 * The background controllers a real cluster runs in kube-apiserver and
 * kube-controller-manager, reduced to what operators observe:
 *
 * - CRDs: `NamesAccepted` and `Established` shortly after creation, the custom resource is
 *   served from then on; a deleted CRD first loses its objects, then goes.
 * - Garbage collection by owner references: dependents of gone owners are deleted
 *   (background), `Foreground` owners go after their blocking dependents, `Orphan` owners
 *   release their dependents; dangling references next to live owners are removed.
 * - Namespaces: a `Terminating` namespace loses its contents, then goes; an active one gets the
 *   `kube-root-ca.crt` ConfigMap and the `default` ServiceAccount (and gets them back).
 * @module
 */

import type { Cluster } from "./cluster.ts";
import { CRD_CLEANUP, deleteObject, FOREGROUND, ORPHAN } from "./deletion.ts";
import { CRDS, definitionFromCrd, NAMESPACES } from "./registry.ts";
import {
  clone,
  deepEqual,
  isObject,
  type KubeObject,
  nowTimestamp,
  type OwnerReference,
  type ResourceDef,
  resourceKey,
} from "./types.ts";

/**
 * Runs every controller once.
 *
 * @param cluster The cluster.
 * @returns Whether anything was written (then another run may have more to do).
 */
export function reconcile(cluster: Cluster): boolean {
  const before = cluster.store.resourceVersion;
  const registered = cluster.registry.all().length;
  definitions(cluster);
  garbageCollection(cluster);
  namespaces(cluster);
  return cluster.store.resourceVersion !== before || cluster.registry.all().length !== registered;
}

interface Condition {
  type: string;
  status: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

function conditionsOf(object: KubeObject): Condition[] {
  const status = isObject(object.status) ? object.status : {};
  return Array.isArray(status.conditions) ? status.conditions as Condition[] : [];
}

function definitions(cluster: Cluster): void {
  const key = resourceKey(CRDS);
  for (const crd of cluster.store.list(key)) {
    const name = crd.metadata?.name ?? "";
    if (crd.metadata?.deletionTimestamp) {
      terminateDefinition(cluster, crd);
      continue;
    }
    const def = definitionFromCrd(crd);
    if (!conditionsOf(crd).some((c) => c.type === "Established" && c.status === "True")) {
      const now = nowTimestamp();
      const spec = crd.spec as {
        names?: Record<string, unknown>;
        versions?: Array<{ name: string; storage?: boolean }>;
      };
      const next = clone(crd);
      next.status = {
        conditions: [
          {
            type: "NamesAccepted",
            status: "True",
            lastTransitionTime: now,
            reason: "NoConflicts",
            message: "no conflicts found",
          },
          {
            type: "Established",
            status: "True",
            lastTransitionTime: now,
            reason: "InitialNamesAccepted",
            message: "the initial names have been accepted",
          },
        ],
        acceptedNames: {
          ...spec.names,
          singular: def.singular,
          listKind: def.listKind,
        },
        storedVersions: (spec.versions ?? []).filter((v) => v.storage).map((v) => v.name),
      };
      cluster.commit(CRDS, crd, next);
    }
    if (!deepEqual(cluster.registry.custom(name), def)) cluster.registry.setCustom(name, def);
  }
  for (const name of cluster.registry.customNames()) {
    if (!cluster.store.get(key, "", name)) cluster.registry.setCustom(name, undefined);
  }
}

function terminateDefinition(cluster: Cluster, crd: KubeObject): void {
  const name = crd.metadata?.name ?? "";
  const def = cluster.registry.custom(name);
  const objects = def ? cluster.store.list(resourceKey(def)) : [];
  for (const object of objects) {
    if (object.metadata?.deletionTimestamp) continue;
    deleteObject(cluster, def!, object.metadata?.namespace ?? "", object.metadata?.name ?? "");
  }
  if (def && cluster.store.list(resourceKey(def)).length > 0) return;
  if (crd.metadata?.finalizers?.includes(CRD_CLEANUP)) {
    const next = clone(crd);
    next.metadata!.finalizers = crd.metadata.finalizers.filter((f) => f !== CRD_CLEANUP);
    cluster.commit(CRDS, crd, next);
  }
}

interface Located {
  def: ResourceDef;
  object: KubeObject;
}

function locateAll(cluster: Cluster): Located[] {
  const defs = new Map(
    cluster.registry.all().filter((d) => !d.storage).map((d) => [resourceKey(d), d]),
  );
  const found: Located[] = [];
  for (const [key, object] of cluster.store.entries()) {
    const def = defs.get(key);
    if (def) found.push({ def, object });
  }
  return found;
}

function current(cluster: Cluster, { def, object }: Located): KubeObject | undefined {
  const live = cluster.store.get(
    resourceKey(def),
    object.metadata?.namespace ?? "",
    object.metadata?.name ?? "",
  );
  return live?.metadata?.uid === object.metadata?.uid ? live : undefined;
}

function withOwners(cluster: Cluster, located: Located, keep: (r: OwnerReference) => boolean) {
  const live = current(cluster, located);
  if (!live) return;
  const refs = live.metadata?.ownerReferences ?? [];
  const next = clone(live);
  next.metadata!.ownerReferences = refs.filter(keep);
  if (next.metadata!.ownerReferences.length === 0) delete next.metadata!.ownerReferences;
  cluster.commit(located.def, live, next);
}

function withoutFinalizer(cluster: Cluster, located: Located, finalizer: string): void {
  const live = current(cluster, located);
  if (!live) return;
  const next = clone(live);
  next.metadata!.finalizers = (live.metadata?.finalizers ?? []).filter((f) => f !== finalizer);
  cluster.commit(located.def, live, next);
}

function garbageCollection(cluster: Cluster): void {
  const all = locateAll(cluster);
  const byUid = new Map(all.map((l) => [l.object.metadata?.uid ?? "", l]));
  const alive = (uid: string) => {
    const owner = byUid.get(uid);
    return owner && current(cluster, owner) ? owner : undefined;
  };
  for (const located of all) {
    const refs = located.object.metadata?.ownerReferences ?? [];
    if (refs.length === 0 || !current(cluster, located)) continue;
    const solid: OwnerReference[] = [];
    const waiting: OwnerReference[] = [];
    let dangling = 0;
    for (const ref of refs) {
      const owner = alive(ref.uid);
      const meta = owner ? current(cluster, owner)?.metadata : undefined;
      if (!meta) dangling++;
      else if (meta.deletionTimestamp && meta.finalizers?.includes(FOREGROUND)) waiting.push(ref);
      else solid.push(ref);
    }
    if (solid.length > 0) {
      if (dangling > 0 || waiting.length > 0) {
        withOwners(cluster, located, (r) => solid.some((s) => s.uid === r.uid));
      }
    } else if (!located.object.metadata?.deletionTimestamp) {
      const meta = located.object.metadata!;
      try {
        deleteObject(cluster, located.def, meta.namespace ?? "", meta.name ?? "", {
          propagationPolicy: waiting.length > 0 ? "Foreground" : "Background",
        });
      } catch { /* gone meanwhile */ }
    }
  }
  for (const located of locateAll(cluster)) {
    const meta = located.object.metadata;
    if (!meta?.deletionTimestamp || !meta.uid) continue;
    const uid = meta.uid;
    const dependents = locateAll(cluster).filter((d) =>
      (d.object.metadata?.ownerReferences ?? []).some((r) => r.uid === uid)
    );
    if (meta.finalizers?.includes(ORPHAN)) {
      for (const dependent of dependents) withOwners(cluster, dependent, (r) => r.uid !== uid);
      withoutFinalizer(cluster, located, ORPHAN);
    } else if (meta.finalizers?.includes(FOREGROUND)) {
      const blocking = dependents.some((d) =>
        (d.object.metadata?.ownerReferences ?? []).some((r) =>
          r.uid === uid && r.blockOwnerDeletion === true
        )
      );
      if (!blocking) withoutFinalizer(cluster, located, FOREGROUND);
    }
  }
}

const ROOT_CA_DESCRIPTION = "Contains a CA bundle that can be used to verify the " +
  "kube-apiserver when using internal endpoints such as the internal service IP or " +
  "kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes " +
  "clusters.";

function populate(cluster: Cluster, namespace: string): void {
  const configmaps = cluster.registry.find("", "v1", "configmaps")!;
  const accounts = cluster.registry.find("", "v1", "serviceaccounts")!;
  if (!cluster.store.get(resourceKey(configmaps), namespace, "kube-root-ca.crt")) {
    cluster.create(configmaps, namespace, {
      metadata: {
        name: "kube-root-ca.crt",
        annotations: { "kubernetes.io/description": ROOT_CA_DESCRIPTION },
      },
      data: { "ca.crt": cluster.caPem },
    });
  }
  if (!cluster.store.get(resourceKey(accounts), namespace, "default")) {
    cluster.create(accounts, namespace, { metadata: { name: "default" } });
  }
}

function namespaces(cluster: Cluster): void {
  const key = resourceKey(NAMESPACES);
  for (const namespace of cluster.store.list(key)) {
    if (!namespace.metadata?.deletionTimestamp) {
      populate(cluster, namespace.metadata?.name ?? "");
      continue;
    }
    const name = namespace.metadata.name ?? "";
    let remaining = 0;
    for (const def of cluster.registry.all()) {
      if (!def.namespaced || def.storage) continue;
      for (const object of cluster.store.list(resourceKey(def), name)) {
        if (!object.metadata?.deletionTimestamp) {
          deleteObject(cluster, def, name, object.metadata?.name ?? "");
        }
      }
      remaining += cluster.store.list(resourceKey(def), name).length;
    }
    const spec = isObject(namespace.spec) ? namespace.spec : {};
    const finalizers = Array.isArray(spec.finalizers) ? spec.finalizers as string[] : [];
    if (remaining === 0 && finalizers.includes("kubernetes")) {
      const next = clone(namespace);
      next.spec = { ...spec, finalizers: finalizers.filter((f) => f !== "kubernetes") };
      cluster.commit(NAMESPACES, namespace, next);
    }
  }
}
