/**
 * Rules of built-in kinds the API server applies on writes: creation defaults and initial
 * status (namespaces, pods, persistent volume claims, services with a cluster IP, deployments,
 * CRDs), the immutable spec of a claim that is not bound, `stringData` of Secrets, and the decoding and validation errors operators are most likely to meet
 * (non-string label/annotation/data values, invalid label keys and values, invalid base64).
 * @module
 */

import { badRequest, invalid, type StatusCause } from "./errors.ts";
import { deepEqual, isObject, type KubeObject, type ResourceDef } from "./types.ts";

const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const STANDARD_FINALIZERS = new Set(["kubernetes", "orphan", "foregroundDeletion"]);
const QUALIFIED_NAME = "name part must consist of alphanumeric characters, '-', '_' or '.', and " +
  "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or " +
  "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const EVENT_FIELDS = [
  "involvedObject",
  "reason",
  "message",
  "source",
  "firstTimestamp",
  "lastTimestamp",
  "count",
  "type",
  "eventTime",
  "series",
  "action",
  "related",
  "reportingComponent",
  "reportingInstance",
];

/** Top-level fields of built-in kinds without a `spec`/`status` pair. */
const FIELDS: Readonly<Record<string, readonly string[]>> = {
  "/configmaps": ["data", "binaryData", "immutable"],
  "/secrets": ["data", "stringData", "type", "immutable"],
  "/serviceaccounts": ["secrets", "imagePullSecrets", "automountServiceAccountToken"],
  "/podtemplates": ["template"],
  "/events": EVENT_FIELDS,
  "events.k8s.io/events": EVENT_FIELDS,
};

/** Allocates service cluster IPs from 10.96.0.0/16, like a cluster's service range. */
export class IpAllocator {
  #next = 10;

  /** The next free address. */
  allocate(): string {
    const n = this.#next++;
    return `10.96.${Math.floor(n / 256) % 256}.${n % 256}`;
  }
}

function kindOf(def: ResourceDef): string {
  return `${def.group}/${def.plural}`;
}

function stringMap(def: ResourceDef, value: unknown, go: string): void {
  if (value === undefined || value === null) return;
  const entries = isObject(value) ? Object.values(value) : [value];
  const bad = entries.find((v) => typeof v !== "string");
  if (!isObject(value) || bad !== undefined) {
    const what = Array.isArray(bad) ? "array" : bad === null ? "null" : typeof bad;
    throw badRequest(
      `${def.kind} in version "v1" cannot be handled as a ${def.kind}: json: cannot unmarshal ` +
        `${what === "object" ? "object" : what} into Go struct field ${go} of type string`,
    );
  }
}

/**
 * Checks and normalises a built-in object before any write (create or update).
 *
 * @param def The resource.
 * @param object The object (changed in place).
 * @throws {ApiFailure} 400 for undecodable values, 422 for invalid labels.
 */
export function normalize(def: ResourceDef, object: KubeObject): void {
  const meta = object.metadata ?? {};
  stringMap(def, meta.labels, "ObjectMeta.metadata.labels");
  stringMap(def, meta.annotations, "ObjectMeta.metadata.annotations");
  const causes: StatusCause[] = [];
  for (const [key, value] of Object.entries(meta.labels ?? {})) {
    const [prefix, name] = key.includes("/") ? key.split(/\/(.*)/s) as [string, string] : ["", key];
    if (!LABEL_NAME.test(name) || name.length > 63 || (prefix && !SUBDOMAIN.test(prefix))) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${key}": ${QUALIFIED_NAME}`,
        field: "metadata.labels",
      });
    }
    if (value !== "" && (!LABEL_NAME.test(value) || value.length > 63)) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${value}": a valid label must be an empty string or consist ` +
          `of alphanumeric characters, '-', '_' or '.', and must start and end with an ` +
          `alphanumeric character`,
        field: `metadata.labels`,
      });
    }
  }
  (meta.finalizers ?? []).forEach((finalizer, i) => {
    const [prefix, name] = finalizer.includes("/")
      ? finalizer.split(/\/(.*)/s) as [string, string]
      : ["", finalizer];
    if (!LABEL_NAME.test(name) || name.length > 63 || (prefix && !SUBDOMAIN.test(prefix))) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${finalizer}": ${QUALIFIED_NAME}`,
        field: "metadata.finalizers",
      });
    } else if (!prefix && !STANDARD_FINALIZERS.has(finalizer)) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${finalizer}": name is neither a standard finalizer name nor ` +
          `is it fully qualified`,
        field: `metadata.finalizers[${i}]`,
      });
    }
  });
  for (const ref of meta.ownerReferences ?? []) {
    for (const field of ["apiVersion", "kind", "name", "uid"] as const) {
      if (!ref[field]) {
        causes.push({
          reason: "FieldValueInvalid",
          message: `Invalid value: "": ${
            field === "uid" ? "must not be empty" : `${field} must not be empty`
          }`,
          field: `metadata.ownerReferences.${field}`,
        });
      }
    }
  }
  if (causes.length) throw invalid(def, meta.name ?? "", causes);
  if (def.crd) return;
  // Typed decoding drops unknown top-level fields (the API server warns about them).
  const known = FIELDS[kindOf(def)] ?? ["spec", "status"];
  for (const key of Object.keys(object)) {
    if (!["apiVersion", "kind", "metadata", ...known].includes(key)) delete object[key];
  }
  switch (kindOf(def)) {
    case "apiextensions.k8s.io/customresourcedefinitions": {
      const spec = isObject(object.spec) ? object.spec : {};
      const names = isObject(spec.names) ? spec.names : {};
      const kind = typeof names.kind === "string" ? names.kind : "";
      object.spec = {
        ...spec,
        names: {
          ...names,
          singular: names.singular || kind.toLowerCase(),
          listKind: names.listKind || `${kind}List`,
        },
        conversion: spec.conversion ?? { strategy: "None" },
      };
      return;
    }
    case "/configmaps":
      stringMap(def, object.data, "ConfigMap.data");
      return;
    case "/events":
    case "events.k8s.io/events":
      object.source ??= {};
      object.eventTime ??= null;
      object.reportingComponent ??= "";
      object.reportingInstance ??= "";
      return;
    case "/secrets": {
      stringMap(def, object.stringData, "Secret.stringData");
      const data = isObject(object.data) ? { ...object.data } : {};
      for (const value of Object.values(data)) {
        if (typeof value !== "string" || !BASE64.test(value)) {
          const at = typeof value === "string" ? Math.max(0, value.search(/[^A-Za-z0-9+/=]/)) : 0;
          throw badRequest(
            `Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte ${at}`,
          );
        }
      }
      const plain = isObject(object.stringData) ? object.stringData as Record<string, string> : {};
      for (const [key, value] of Object.entries(plain)) {
        data[key] = btoa(String.fromCharCode(...new TextEncoder().encode(value)));
      }
      delete object.stringData;
      if (Object.keys(data).length) object.data = data;
      object.type ??= "Opaque";
      return;
    }
  }
}

/**
 * Creation defaults and initial status of built-in kinds; drops `status` of custom resources
 * with a status subresource.
 *
 * @param def The resource.
 * @param object The object being created (changed in place).
 * @param ips The service IP allocator.
 */
export function prepareForCreate(def: ResourceDef, object: KubeObject, ips: IpAllocator): void {
  const meta = object.metadata!;
  const spec = isObject(object.spec) ? object.spec : {};
  switch (kindOf(def)) {
    case "/namespaces":
      meta.labels = { ...meta.labels, "kubernetes.io/metadata.name": meta.name! };
      object.spec = { ...spec, finalizers: ["kubernetes"] };
      object.status = { phase: "Active" };
      return;
    case "/pods":
      object.status = { phase: "Pending", qosClass: "BestEffort" };
      return;
    case "/persistentvolumeclaims":
      // Nothing binds claims here (no volumes, no provisioner): they stay Pending until a test or
      // a user sets `status.phase` through the status subresource, as a provisioner would.
      object.spec = { ...spec, volumeMode: spec.volumeMode ?? "Filesystem" };
      object.status = { phase: "Pending" };
      return;
    case "/services": {
      const type = typeof spec.type === "string" ? spec.type : "ClusterIP";
      const ports = Array.isArray(spec.ports) ? spec.ports.filter(isObject) : [];
      const ip = spec.clusterIP ?? (type === "ExternalName" ? undefined : ips.allocate());
      object.spec = {
        ...spec,
        ...(ports.length
          ? { ports: ports.map((p) => ({ protocol: "TCP", targetPort: p.port, ...p })) }
          : {}),
        ...(ip ? { clusterIP: ip, clusterIPs: [ip] } : {}),
        type,
        sessionAffinity: spec.sessionAffinity ?? "None",
        ...(ip && ip !== "None" ? { ipFamilies: ["IPv4"], ipFamilyPolicy: "SingleStack" } : {}),
        internalTrafficPolicy: spec.internalTrafficPolicy ?? "Cluster",
      };
      object.status = { loadBalancer: {} };
      return;
    }
    case "apps/deployments":
      object.spec = {
        replicas: 1,
        strategy: {
          type: "RollingUpdate",
          rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" },
        },
        revisionHistoryLimit: 10,
        progressDeadlineSeconds: 600,
        ...spec,
      };
      object.status = {};
      return;
    case "apiextensions.k8s.io/customresourcedefinitions": {
      const versions = Array.isArray(spec.versions) ? spec.versions.filter(isObject) : [];
      object.status = {
        conditions: null,
        acceptedNames: { plural: "", kind: "" },
        storedVersions: versions.filter((v) => v.storage === true).map((v) => v.name),
      };
      return;
    }
  }
  if (def.crd && def.subresources.includes("status")) delete object.status;
}

/**
 * Rules on changes to a built-in object's spec (through the main endpoint): a persistent volume
 * claim's spec is immutable except `resources.requests` and `volumeAttributesClassName`, and
 * those only once the claim is bound (`status.phase: Bound`), as kube-apiserver validates it.
 * (The API server's resize admission — a storage class that allows expansion — is not emulated:
 * the emulator serves no storage classes.)
 *
 * @param def The resource.
 * @param old The stored object.
 * @param next Its new state.
 * @throws {ApiFailure} 422 for a forbidden change.
 */
export function validateUpdate(def: ResourceDef, old: KubeObject, next: KubeObject): void {
  if (kindOf(def) !== "/persistentvolumeclaims") return;
  const bound = isObject(next.status) && next.status.phase === "Bound";
  const fixed = (o: KubeObject) => {
    const spec = isObject(o.spec) ? { ...o.spec } : {};
    if (bound) {
      delete spec.resources;
      delete spec.volumeAttributesClassName;
    }
    return spec;
  };
  if (!deepEqual(fixed(old), fixed(next))) {
    throw invalid(def, next.metadata?.name ?? "", [{
      reason: "FieldValueForbidden",
      message: "Forbidden: spec is immutable after creation except resources.requests and " +
        "volumeAttributesClassName for bound claims",
      field: "spec",
    }]);
  }
}
