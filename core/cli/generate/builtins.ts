/**
 * `kopf generate builtins`: TypeScript types of the built-in objects operators touch most (Pod,
 * Deployment, Service, ConfigMap, Secret, Job, Event, Lease, Namespace), generated from the API
 * server's OpenAPI v3 documents (`/openapi/v3/api/v1`, `/openapi/v3/apis/apps/v1`, …), with a
 * typed resource constant each (`on.create(Pods, ({ spec }) => spec.containers…)`).
 *
 * Every schema reachable from those kinds becomes one interface named by the last segment of its
 * OpenAPI name (`io.k8s.api.core.v1.PodSpec` → `PodSpec`); `ObjectMeta` is the framework's own.
 * The kit `kits/builtins.ts` is this generator's output for the test control plane's version.
 * @module
 */

import type { KubeClient } from "../../client/client.ts";
import { type SchemaNode, toJsonSchema } from "./types.ts";

/** One built-in kind to emit. */
export interface BuiltinKind {
  /** API group (`""` for core). */
  readonly group: string;
  /** API version. */
  readonly version: string;
  /** Kind. */
  readonly kind: string;
  /** Plural (the resource). */
  readonly plural: string;
  /** Whether the objects live in namespaces. @default true */
  readonly namespaced?: boolean;
  /** The typed resource constant's name. */
  readonly constant: string;
}

/** The kinds of `kits/builtins.ts`. */
export const BUILTIN_KINDS: readonly BuiltinKind[] = [
  { group: "", version: "v1", kind: "Pod", plural: "pods", constant: "Pods" },
  { group: "", version: "v1", kind: "Service", plural: "services", constant: "Services" },
  { group: "", version: "v1", kind: "ConfigMap", plural: "configmaps", constant: "ConfigMaps" },
  { group: "", version: "v1", kind: "Secret", plural: "secrets", constant: "Secrets" },
  { group: "", version: "v1", kind: "Event", plural: "events", constant: "Events" },
  {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    namespaced: false,
    constant: "Namespaces",
  },
  {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    plural: "deployments",
    constant: "Deployments",
  },
  { group: "batch", version: "v1", kind: "Job", plural: "jobs", constant: "Jobs" },
  {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    constant: "Leases",
  },
];

const OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

const isNode = (value: unknown): value is SchemaNode =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** The OpenAPI name of a kind's schema, found by its `x-kubernetes-group-version-kind`. */
function schemaNameOf(schemas: Record<string, SchemaNode>, kind: BuiltinKind): string {
  for (const [name, schema] of Object.entries(schemas)) {
    const gvks = schema["x-kubernetes-group-version-kind"];
    if (!Array.isArray(gvks)) continue;
    if (
      gvks.some((g) =>
        isNode(g) && g.group === kind.group && g.version === kind.version && g.kind === kind.kind
      )
    ) return name;
  }
  throw new Error(
    `The OpenAPI document has no schema for ${kind.kind} (${kind.group}/${kind.version})`,
  );
}

/** `{allOf: [{$ref}]}` (how OpenAPI v3 adds a description to a reference) → `{$ref}`. */
function unwrap(node: SchemaNode): SchemaNode {
  if (Array.isArray(node.allOf) && node.allOf.length === 1 && isNode(node.allOf[0])) {
    const { allOf: _, ...rest } = node;
    return { ...rest, ...node.allOf[0] };
  }
  return node;
}

/** The names of all schemas a node refers to, directly or not. */
function references(node: unknown, into: Set<string>, schemas: Record<string, SchemaNode>): void {
  if (Array.isArray(node)) {
    for (const item of node) references(item, into, schemas);
    return;
  }
  if (!isNode(node)) return;
  const ref = node.$ref;
  if (typeof ref === "string") {
    const name = ref.replace("#/components/schemas/", "");
    if (!into.has(name) && name !== OBJECT_META) {
      into.add(name);
      references(schemas[name], into, schemas);
    }
  }
  for (const value of Object.values(node)) references(value, into, schemas);
}

/** Rewrites references and special types for the compiler, recursively. */
function prepare(node: unknown, titles: Map<string, string>): unknown {
  if (Array.isArray(node)) return node.map((item) => prepare(item, titles));
  if (!isNode(node)) return node;
  const unwrapped = unwrap(node);
  if (typeof unwrapped.$ref === "string") {
    const name = unwrapped.$ref.replace("#/components/schemas/", "");
    // A description beside a reference would make the compiler declare a copy of the
    // referenced type per use site (IntOrString1, IntOrString2, …): the type keeps its own.
    if (name === OBJECT_META) return { tsType: "ObjectMeta" };
    return { $ref: `#/definitions/${titles.get(name) ?? name}` };
  }
  if (unwrapped.format === "int-or-string") {
    return { ...unwrapped, type: undefined, "x-kubernetes-int-or-string": true };
  }
  const out: SchemaNode = {};
  for (const [key, value] of Object.entries(unwrapped)) {
    out[key] = key === "properties" && isNode(value)
      ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, prepare(v, titles)]))
      : prepare(value, titles);
  }
  return out;
}

/** Short, unique interface names: the last segment, or the group's too where two collide. */
function titlesOf(names: readonly string[]): Map<string, string> {
  const short = (name: string) => name.split(".").pop()!;
  const counts = new Map<string, number>();
  for (const name of names) counts.set(short(name), (counts.get(short(name)) ?? 0) + 1);
  return new Map(names.map((name) => {
    const parts = name.split(".");
    const title = counts.get(short(name))! > 1
      ? parts.slice(-3).map((p) => p.charAt(0).toUpperCase() + p.slice(1)).join("")
      : short(name);
    return [name, title];
  }));
}

/**
 * Reads the OpenAPI v3 schemas of the built-in kinds' group-versions from the API server.
 *
 * @param client A client of the cluster.
 * @param kinds The kinds (their group-versions are read).
 * @returns The schemas by OpenAPI name, and the Kubernetes version.
 */
export async function fetchSchemas(
  client: KubeClient,
  kinds: readonly BuiltinKind[] = BUILTIN_KINDS,
): Promise<{ schemas: Record<string, SchemaNode>; version: string }> {
  const schemas: Record<string, SchemaNode> = {};
  const paths = [
    ...new Set(kinds.map((k) => k.group ? `apis/${k.group}/${k.version}` : `api/${k.version}`)),
  ];
  for (const path of paths) {
    const doc = await client.http.json<{ components?: { schemas?: Record<string, SchemaNode> } }>(
      { path: `/openapi/v3/${path}` },
    );
    Object.assign(schemas, doc.components?.schemas ?? {});
  }
  const info = await client.http.json<{ gitVersion?: string }>({ path: "/version" });
  return { schemas, version: info.gitVersion ?? "unknown" };
}

/**
 * Generates the module of the built-in kinds' types from OpenAPI v3 schemas.
 *
 * @param schemas The schemas by OpenAPI name (see {@link fetchSchemas}).
 * @param options Where the module imports the framework from, the Kubernetes version, the
 *   command to name in the header.
 * @param kinds The kinds.
 * @returns The module's text.
 * @throws {Error} when a kind has no schema.
 */
export async function generateBuiltins(
  schemas: Record<string, SchemaNode>,
  options: { importFrom: string; kubernetes: string; command: string },
  kinds: readonly BuiltinKind[] = BUILTIN_KINDS,
): Promise<string> {
  const roots = kinds.map((kind) => schemaNameOf(schemas, kind));
  const reachable = new Set<string>(roots);
  for (const root of roots) references(schemas[root], reachable, schemas);
  const names = [...reachable].sort();
  const titles = titlesOf(names);
  const definitions: SchemaNode = {};
  for (const name of names) {
    let schema = schemas[name]!;
    const kind = kinds[roots.indexOf(name)];
    if (kind) {
      // The object's envelope comes from TypedObject; apiVersion and kind become literals.
      const { apiVersion: _a, kind: _k, metadata: _m, ...properties } =
        (schema.properties ?? {}) as SchemaNode;
      const apiVersion = kind.group ? `${kind.group}/${kind.version}` : kind.version;
      schema = {
        ...schema,
        properties: {
          ...properties,
          apiVersion: { tsType: JSON.stringify(apiVersion) },
          kind: { tsType: JSON.stringify(kind.kind) },
        },
        required: [],
      };
    }
    definitions[titles.get(name)!] = {
      ...toJsonSchema(prepare(schema, titles) as SchemaNode),
      title: titles.get(name)!,
    };
  }
  const root: SchemaNode = {
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(
      roots.map((r) => [titles.get(r)!, { $ref: `#/definitions/${titles.get(r)}` }]),
    ),
    definitions,
  };
  const { compile } = await import("json-schema-to-typescript");
  let text = await (compile as unknown as (
    s: SchemaNode,
    n: string,
    o: Record<string, unknown>,
  ) => Promise<string>)(root, "BuiltinsRoot", {
    bannerComment: "",
    additionalProperties: false,
    declareExternallyReferenced: true,
    unknownAny: true,
    format: true,
    style: { printWidth: 100, semi: true, singleQuote: false, trailingComma: "all" },
  });
  text = text.replace(/export interface BuiltinsRoot \{[\s\S]*?\n\}\n/, "");
  for (const [i, kind] of kinds.entries()) {
    const title = titles.get(roots[i]!)!;
    const props = (schemas[roots[i]!]!.properties ?? {}) as SchemaNode;
    const refOf = (node: unknown): string | undefined => {
      const ref = isNode(node) ? unwrap(node).$ref : undefined;
      return typeof ref === "string"
        ? titles.get(ref.replace("#/components/schemas/", ""))
        : undefined;
    };
    const spec = refOf(props.spec);
    const status = refOf(props.status);
    const header = `export interface ${title} {`;
    if (!text.includes(header)) throw new Error(`Unexpected compiler output for ${title}`);
    text = text.replace(
      header,
      `export interface ${title} extends TypedObject<${spec ?? "never"}, ${status ?? "never"}> {`,
    );
    const apiVersion = kind.group ? `${kind.group}/${kind.version}` : kind.version;
    text += [
      "",
      `/** The \`${kind.plural}\` resource (\`${apiVersion}\`), typed, for handlers and the client. */`,
      `export const ${kind.constant}: TypedResourceRef<${title}> = typedResource<${title}>({`,
      `  group: ${JSON.stringify(kind.group)},`,
      `  version: ${JSON.stringify(kind.version)},`,
      `  plural: ${JSON.stringify(kind.plural)},`,
      `  kind: ${JSON.stringify(kind.kind)},`,
      `  namespaced: ${kind.namespaced ?? true},`,
      `});`,
      "",
    ].join("\n");
  }
  return [
    `// Generated by \`${options.command}\` from the OpenAPI v3 documents of Kubernetes ${options.kubernetes}.`,
    "// Do not edit: generate again.",
    `import {`,
    `  type ObjectMeta,`,
    `  type TypedObject,`,
    `  typedResource,`,
    `  type TypedResourceRef,`,
    `} from ${JSON.stringify(options.importFrom)};`,
    "",
    text,
  ].join("\n").replace(/\n{3,}/g, "\n\n");
}
