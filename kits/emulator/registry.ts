/**
 * Which resources the emulator serves: the built-in ones operators need, and custom resources
 * from established CustomResourceDefinitions (registered and unregistered at runtime).
 * @module
 */

import type { StatusCause } from "./errors.ts";
import { EVENTS_V1 } from "./events.ts";
import {
  isObject,
  type JsonObject,
  type KubeObject,
  type PrinterColumn,
  type ResourceDef,
} from "./types.ts";

function builtin(
  group: string,
  plural: string,
  kind: string,
  extra: Partial<ResourceDef> = {},
): ResourceDef {
  return {
    group,
    versions: ["v1"],
    plural,
    singular: kind.toLowerCase(),
    kind,
    listKind: `${kind}List`,
    namespaced: true,
    shortNames: [],
    categories: [],
    subresources: [],
    generation: false,
    ...extra,
  };
}

/**
 * The built-in resources: core/v1 essentials (persistent volume claims among them, as children
 * that operators make), apps/v1 deployments, coordination.k8s.io/v1 leases
 * and CRDs themselves.
 */
export const BUILTINS: readonly ResourceDef[] = [
  builtin("", "configmaps", "ConfigMap", { shortNames: ["cm"] }),
  builtin("", "events", "Event", { shortNames: ["ev"] }),
  builtin("", "namespaces", "Namespace", {
    namespaced: false,
    shortNames: ["ns"],
    subresources: ["finalize", "status"],
  }),
  builtin("", "persistentvolumeclaims", "PersistentVolumeClaim", {
    shortNames: ["pvc"],
    subresources: ["status"],
    returnsObjectOnDelete: true,
  }),
  builtin("", "pods", "Pod", {
    shortNames: ["po"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
    returnsObjectOnDelete: true,
  }),
  builtin("", "podtemplates", "PodTemplate", { generation: true }),
  builtin("", "secrets", "Secret"),
  builtin("", "serviceaccounts", "ServiceAccount", { shortNames: ["sa"] }),
  builtin("", "services", "Service", {
    shortNames: ["svc"],
    categories: ["all"],
    subresources: ["status"],
  }),
  builtin("apps", "deployments", "Deployment", {
    shortNames: ["deploy"],
    categories: ["all"],
    subresources: ["status"],
    generation: true,
  }),
  builtin("coordination.k8s.io", "leases", "Lease"),
  builtin("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", {
    namespaced: false,
    shortNames: ["crd", "crds"],
    categories: ["api-extensions"],
    subresources: ["status"],
    generation: true,
  }),
  EVENTS_V1,
];

/** The definition of CustomResourceDefinitions. */
export const CRDS: ResourceDef = BUILTINS.find((d) => d.plural === "customresourcedefinitions")!;
/** The definition of Namespaces. */
export const NAMESPACES: ResourceDef = BUILTINS.find((d) => d.plural === "namespaces")!;

/** Sorts versions as Kubernetes prioritises them: GA > beta > alpha, higher numbers first. */
export function byVersionPriority(a: string, b: string): number {
  const rank = (v: string): [number, number, number] => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return [0, 0, 0];
    const stage = m[2] === "alpha" ? 1 : m[2] === "beta" ? 2 : 3;
    return [stage, Number(m[1]), Number(m[3] ?? 0)];
  };
  const [sa, ma, na] = rank(a);
  const [sb, mb, nb] = rank(b);
  if (sa === 0 && sb === 0) return a < b ? -1 : a > b ? 1 : 0;
  return sb - sa || mb - ma || nb - na;
}

/** The served resources, built-in and custom. */
export class Registry {
  #custom = new Map<string, ResourceDef>();

  /** Every served resource. */
  all(): ResourceDef[] {
    return [...BUILTINS, ...this.#custom.values()];
  }

  /** The resource serving `group/version` under `plural`, if any. */
  find(group: string, version: string, plural: string): ResourceDef | undefined {
    return this.all().find((d) =>
      d.group === group && d.plural === plural && d.versions.includes(version)
    );
  }

  /** The resource of objects of `apiVersion` and `kind`, if any. */
  byKind(apiVersion: string, kind: string): ResourceDef | undefined {
    const [group, version] = apiVersion.includes("/")
      ? apiVersion.split("/", 2) as [string, string]
      : ["", apiVersion];
    return this.all().find((d) =>
      d.group === group && d.kind === kind && d.versions.includes(version)
    );
  }

  /** The custom resource defined by a CRD, if registered. */
  custom(crdName: string): ResourceDef | undefined {
    return this.#custom.get(crdName);
  }

  /** Names of the CRDs whose resources are registered. */
  customNames(): string[] {
    return [...this.#custom.keys()];
  }

  /** Registers (or re-registers) the resource of an established CRD, or removes it. */
  setCustom(crdName: string, def: ResourceDef | undefined): void {
    if (def) this.#custom.set(crdName, def);
    else this.#custom.delete(crdName);
  }

  /** The API groups (without the core group), each with its versions, preferred first. */
  groups(): Array<{ name: string; versions: string[] }> {
    const groups = new Map<string, Set<string>>();
    for (const def of this.all()) {
      if (!def.group) continue;
      const versions = groups.get(def.group) ?? new Set();
      for (const v of def.versions) versions.add(v);
      groups.set(def.group, versions);
    }
    return [...groups].map(([name, versions]) => ({
      name,
      versions: [...versions].sort(byVersionPriority),
    }));
  }
}

interface CrdVersion {
  name?: unknown;
  served?: unknown;
  storage?: unknown;
  subresources?: { status?: unknown; scale?: unknown };
  additionalPrinterColumns?: PrinterColumn[];
  schema?: { openAPIV3Schema?: JsonObject };
}

interface CrdSpec {
  group?: unknown;
  scope?: unknown;
  names?: {
    plural?: unknown;
    singular?: unknown;
    kind?: unknown;
    listKind?: unknown;
    shortNames?: unknown;
    categories?: unknown;
  };
  versions?: CrdVersion[];
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/** Validates a CRD as the API server would (the essentials); returns the causes of failure. */
export function validateCrd(crd: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const spec = (isObject(crd.spec) ? crd.spec : {}) as CrdSpec;
  const names = spec.names ?? {};
  const required = (field: string) =>
    causes.push({ reason: "FieldValueRequired", message: "Required value", field });
  if (typeof spec.group !== "string" || !spec.group) required("spec.group");
  if (typeof names.plural !== "string" || !names.plural) required("spec.names.plural");
  if (typeof names.kind !== "string" || !names.kind) required("spec.names.kind");
  if (spec.scope !== "Namespaced" && spec.scope !== "Cluster") {
    causes.push({
      reason: "FieldValueNotSupported",
      message: `Unsupported value: ${JSON.stringify(spec.scope ?? "")}: supported values: ` +
        `"Cluster", "Namespaced"`,
      field: "spec.scope",
    });
  }
  const expected = `${names.plural}.${spec.group}`;
  if (crd.metadata?.name !== expected) {
    causes.push({
      reason: "FieldValueInvalid",
      message: `Invalid value: ${JSON.stringify(crd.metadata?.name ?? "")}: must be ` +
        `spec.names.plural+"."+spec.group`,
      field: "metadata.name",
    });
  }
  const versions = spec.versions ?? [];
  if (!Array.isArray(versions) || versions.length === 0) {
    required("spec.versions");
  } else {
    const storage = versions.filter((v) => v.storage === true).length;
    if (storage !== 1) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: ${JSON.stringify(versions)}: must have exactly one version ` +
          `marked as storage version`,
        field: "spec.versions",
      });
    }
    versions.forEach((v, i) => {
      if (typeof v.name !== "string" || !v.name) required(`spec.versions[${i}].name`);
      if (!v.schema?.openAPIV3Schema) required(`spec.versions[${i}].schema.openAPIV3Schema`);
    });
  }
  return causes;
}

/** The resource a valid CRD defines (its served versions, preferred first). */
export function definitionFromCrd(crd: KubeObject): ResourceDef {
  const spec = crd.spec as CrdSpec;
  const names = spec.names ?? {};
  const kind = String(names.kind);
  const plural = String(names.plural);
  const served = (spec.versions ?? []).filter((v) => v.served !== false);
  const columns: Record<string, PrinterColumn[]> = {};
  const schemas: Record<string, JsonObject | undefined> = {};
  let status = false;
  for (const v of served) {
    const name = String(v.name);
    columns[name] = v.additionalPrinterColumns ?? [];
    schemas[name] = v.schema?.openAPIV3Schema;
    if (v.subresources && isObject(v.subresources) && v.subresources.status !== undefined) {
      status = true;
    }
  }
  return {
    group: String(spec.group),
    versions: served.map((v) => String(v.name)).sort(byVersionPriority),
    plural,
    singular: typeof names.singular === "string" && names.singular
      ? names.singular
      : kind.toLowerCase(),
    kind,
    listKind: typeof names.listKind === "string" && names.listKind ? names.listKind : `${kind}List`,
    namespaced: spec.scope !== "Cluster",
    shortNames: strings(names.shortNames),
    categories: strings(names.categories),
    subresources: status ? ["status"] : [],
    generation: true,
    crd: crd.metadata?.name ?? "",
    columns,
    schemas,
  };
}
