/**
 * Discovery documents (`/api`, `/api/v1`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`)
 * in the legacy (unaggregated) JSON form, plus `/version`; and kubectl's server-side printing
 * (`Table` answers for `Accept: …;as=Table`).
 * @module
 */

import type { Registry } from "./registry.ts";
import { groupVersion, isObject, type KubeObject, type ResourceDef } from "./types.ts";

const VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/** The version the emulator reports at `/version`. */
export const VERSION_INFO = {
  major: "1",
  minor: "36",
  gitVersion: "v1.36.0-kopf-emulator",
  gitCommit: "0000000000000000000000000000000000000000",
  gitTreeState: "clean",
  buildDate: "1970-01-01T00:00:00Z",
  goVersion: "none",
  compiler: "deno",
  platform: "linux/amd64",
} as const;

/** A stable 8-byte hash (FNV-1a 64) in base64, like the API server's storageVersionHash. */
function storageVersionHash(text: string): string {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(text)) {
    hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  const bytes = Array.from({ length: 8 }, (_, i) => Number((hash >> BigInt(56 - 8 * i)) & 0xffn));
  return btoa(String.fromCharCode(...bytes));
}

function resourceList(registry: Registry, group: string, version: string): unknown | undefined {
  const defs = registry.all().filter((d) => d.group === group && d.versions.includes(version))
    .sort((a, b) => a.plural < b.plural ? -1 : 1);
  if (defs.length === 0) return undefined;
  const resources: unknown[] = [];
  for (const def of defs) {
    resources.push({
      name: def.plural,
      singularName: def.singular,
      namespaced: def.namespaced,
      kind: def.kind,
      verbs: def.crd
        ? ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
        : def.plural === "namespaces"
        ? VERBS.filter((v) => v !== "deletecollection")
        : VERBS,
      ...(def.shortNames.length ? { shortNames: def.shortNames } : {}),
      ...(def.categories.length ? { categories: def.categories } : {}),
      storageVersionHash: storageVersionHash(
        `${groupVersion(def.group, def.versions[0]!)}/${def.kind}`,
      ),
    });
    for (const sub of def.subresources) {
      resources.push({
        name: `${def.plural}/${sub}`,
        singularName: "",
        namespaced: def.namespaced,
        kind: def.kind,
        verbs: sub === "finalize" ? ["update"] : ["get", "patch", "update"],
      });
    }
  }
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupVersion(group, version),
    resources,
  };
}

function apiGroup(name: string, versions: string[]): Record<string, unknown> {
  const list = versions.map((version) => ({ groupVersion: `${name}/${version}`, version }));
  return { name, versions: list, preferredVersion: list[0] };
}

/**
 * The discovery document at a path, if it is a discovery path.
 *
 * @param registry The served resources.
 * @param path The URL path.
 * @param serverAddress `host:port` of the server, for `/api`.
 * @returns The document, or `undefined` when the path is not a discovery path (or unknown).
 */
export function discoveryDocument(
  registry: Registry,
  path: string,
  serverAddress: string,
): unknown | undefined {
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "version" && parts.length === 1) return VERSION_INFO;
  if (parts[0] === "api") {
    if (parts.length === 1) {
      return {
        kind: "APIVersions",
        versions: ["v1"],
        serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
      };
    }
    if (parts.length === 2) return resourceList(registry, "", parts[1]!);
    return undefined;
  }
  if (parts[0] !== "apis") return undefined;
  const groups = registry.groups();
  if (parts.length === 1) {
    return {
      kind: "APIGroupList",
      apiVersion: "v1",
      groups: groups.map((g) => apiGroup(g.name, g.versions)),
    };
  }
  const group = groups.find((g) => g.name === parts[1]);
  if (!group) return undefined;
  if (parts.length === 2) {
    return { kind: "APIGroup", apiVersion: "v1", ...apiGroup(group.name, group.versions) };
  }
  if (parts.length === 3) return resourceList(registry, group.name, parts[2]!);
  return undefined;
}

/**
 * A minimal OpenAPI v3 tree (`/openapi/v3` and `/openapi/v3/<api|apis/group>/<version>`): one
 * PATCH operation per resource declaring the `fieldValidation` parameter — enough for kubectl
 * to leave validation to the server instead of downloading schemas. No schemas are included.
 *
 * @param registry The served resources.
 * @param path The URL path.
 * @returns The document, or `undefined` for other paths.
 */
export function openApiDocument(registry: Registry, path: string): unknown | undefined {
  const gvs = new Map<string, ResourceDef[]>();
  for (const def of registry.all()) {
    for (const version of def.versions) {
      const gv = def.group ? `apis/${def.group}/${version}` : `api/${version}`;
      gvs.set(gv, [...(gvs.get(gv) ?? []), def]);
    }
  }
  if (path === "/openapi/v3") {
    return {
      paths: Object.fromEntries(
        [...gvs.keys()].map((gv) => [gv, { serverRelativeURL: `/openapi/v3/${gv}` }]),
      ),
    };
  }
  const gv = path.replace(/^\/openapi\/v3\//, "");
  const defs = path.startsWith("/openapi/v3/") ? gvs.get(gv) : undefined;
  if (!defs) return undefined;
  const version = gv.split("/").at(-1)!;
  const paths: Record<string, unknown> = {};
  for (const def of defs) {
    const scope = def.namespaced ? "/namespaces/{namespace}" : "";
    paths[`/${gv}${scope}/${def.plural}/{name}`] = {
      patch: {
        "x-kubernetes-group-version-kind": { group: def.group, version, kind: def.kind },
        parameters: [{ name: "fieldValidation", in: "query", schema: { type: "string" } }],
        responses: {},
      },
    };
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes", version: VERSION_INFO.gitVersion },
    paths,
    components: { schemas: {} },
  };
}

/** Whether the client asked for a `Table` (kubectl's server-side printing). */
export function wantsTable(accept: string | null): boolean {
  return accept !== null && /(^|[;,\s])as=Table(;|,|$)/.test(accept);
}

/** Kubernetes' short human durations: `45s`, `3m12s`, `5h`, `2d3h`, `40d`. */
export function humanDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (h < 24 * 8) return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
  return `${d}d`;
}

function pathValue(object: unknown, jsonPath: string): unknown {
  let value = object;
  for (const part of jsonPath.replace(/^\{?\.?/, "").replace(/\}$/, "").split(/\.|\[(\d+)\]/)) {
    if (!part) continue;
    if (Array.isArray(value)) value = value[Number(part)];
    else value = isObject(value) ? value[part] : undefined;
  }
  return value;
}

/**
 * A `meta.k8s.io/v1` Table of objects: Name and the CRD's printer columns when it defines some
 * (its own Age among them, as kube-apiserver has no Age of its own then), else Name, Status for
 * namespaces, and Age.
 *
 * @param def The resource.
 * @param version The served version.
 * @param objects The objects (full, as served).
 * @param listMeta The list metadata (resourceVersion, continue).
 * @returns The table.
 */
export function toTable(
  def: ResourceDef,
  version: string,
  objects: KubeObject[],
  listMeta: Record<string, unknown>,
): Record<string, unknown> {
  const own = def.columns?.[version]?.length ? def.columns[version] : undefined;
  const extra = own ??
    (def.plural === "namespaces"
      ? [{ name: "Status", type: "string", jsonPath: ".status.phase" }]
      : []);
  const columns = [
    { name: "Name", type: "string", format: "name", description: "Name", priority: 0 },
    ...extra.map((c) => ({
      name: c.name,
      type: c.type === "date" ? "string" : c.type,
      format: "",
      description: c.description ?? "",
      priority: c.priority ?? 0,
    })),
    ...(own ? [] : [{ name: "Age", type: "string", format: "", description: "Age", priority: 0 }]),
  ];
  const age = (timestamp: unknown) =>
    typeof timestamp === "string" ? humanDuration(Date.now() - Date.parse(timestamp)) : "<unknown>";
  const rows = objects.map((object) => ({
    cells: [
      object.metadata?.name ?? "",
      ...extra.map((c) => {
        const value = pathValue(object, c.jsonPath);
        if (c.type === "date") return age(value);
        return value === undefined
          ? null
          : typeof value === "object"
          ? JSON.stringify(value)
          : value;
      }),
      ...(own ? [] : [age(object.metadata?.creationTimestamp)]),
    ],
    object: {
      kind: "PartialObjectMetadata",
      apiVersion: "meta.k8s.io/v1",
      metadata: object.metadata ?? {},
    },
  }));
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMeta,
    columnDefinitions: columns,
    rows,
  };
}
