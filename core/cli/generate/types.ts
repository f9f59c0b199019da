/**
 * `kopf generate types`: TypeScript types for the objects of custom resources, from their CRDs'
 * `openAPIV3Schema`, through json-schema-to-typescript (a well-kept JSON Schema compiler).
 *
 * Kubernetes' structural schemas are JSON Schema with a few extensions; {@link toJsonSchema}
 * maps them first: `x-kubernetes-int-or-string` → `number | string`,
 * `x-kubernetes-preserve-unknown-fields` → open records (`[k: string]: unknown`), objects with
 * listed properties → closed (the API server prunes unknown fields), `nullable` → `| null`,
 * embedded resources → objects with apiVersion/kind/metadata; `format` goes into the doc
 * comment; objects that allow no field become `Record<string, never>` (not `{}`, which means
 * "anything but null"). Each served version becomes an interface extending
 * `TypedObject<Spec, Status>` and a typed resource constant (`KopfExamples`): a full resource
 * reference (group, version, plural, kind, scope), which handlers take instead of a resource name
 * and the client takes to type what it reads and writes.
 *
 * The module is formatted by `deno fmt` when the running Deno can do it (as configured by the
 * project's `deno.json`, or at a given line width), so it is `deno fmt --check`-clean; otherwise
 * it is laid out as `deno fmt` would at that width for usual names.
 * @module
 */

import { parseAllDocuments } from "yaml";
import type { KubeObject } from "../../structs/objects.ts";

/** A JSON schema node as the compiler takes it (and as CRDs carry it). */
export type SchemaNode = { [key: string]: unknown };

/** Options of {@link generateTypes}. */
export interface GenerateTypesOptions {
  /** The module specifier the generated file imports `TypedObject` and `typedResource` from. */
  readonly importFrom: string;
  /** The command line to name in the header comment. */
  readonly command?: string;
  /** The line width to lay the module out for (without `configDir`). @default 80 */
  readonly lineWidth?: number;
  /**
   * The directory whose `deno.json` configures `deno fmt` for the module (the project's); without
   * it, `deno fmt` runs without a configuration, at `lineWidth`.
   */
  readonly configDir?: string;
  /** Whether to run `deno fmt` over the module when the running Deno can. @default true */
  readonly denoFmt?: boolean;
}

/** One CRD version to emit. */
interface Target {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly plural: string;
  /** Whether the objects live in namespaces (`scope: Namespaced`). */
  readonly namespaced: boolean;
  /** The type name: the kind, plus the version for versions other than the storage one. */
  readonly name: string;
  /** The constant's name: the plural in PascalCase (plus the version likewise). */
  readonly constant: string;
  readonly schema: SchemaNode;
}

const isNode = (value: unknown): value is SchemaNode =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const pascal = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/**
 * Maps a Kubernetes structural schema to plain JSON Schema for the compiler (see the module
 * documentation for the rules).
 *
 * @param node A schema node from `openAPIV3Schema` (or an OpenAPI v3 document).
 * @returns A new node; the input is not changed.
 */
export function toJsonSchema(node: SchemaNode): SchemaNode {
  const out: SchemaNode = {};
  const description = [typeof node.description === "string" ? node.description : ""];
  if (typeof node.format === "string") description.push(`Format: \`${node.format}\`.`);
  if (node.default !== undefined) description.push(`Default: \`${JSON.stringify(node.default)}\`.`);
  const text = description.filter(Boolean).join("\n\n");
  if (text) out.description = text;
  for (const key of ["$ref", "tsType", "title"]) if (node[key] !== undefined) out[key] = node[key];

  if (node["x-kubernetes-int-or-string"] === true) {
    out.tsType = node.nullable === true ? "number | string | null" : "number | string";
    return out;
  }
  const open = node["x-kubernetes-preserve-unknown-fields"] === true;
  const embedded = node["x-kubernetes-embedded-resource"] === true;
  const properties = isNode(node.properties) ? { ...node.properties } : undefined;
  if (node.type === undefined && open && !properties && !embedded) {
    out.tsType = "unknown";
    return out;
  }
  if (node.type !== undefined) out.type = node.type;
  if (Array.isArray(node.enum)) out.enum = node.enum;
  if (node.nullable === true) {
    out.type = out.type === undefined ? undefined : [out.type, "null"];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
  }
  if (isNode(node.items)) out.items = toJsonSchema(node.items);
  if (Array.isArray(node.required)) out.required = node.required;
  if (node.type === "object" || properties || embedded) {
    const props: SchemaNode = {};
    if (embedded) {
      props.apiVersion = { type: "string" };
      props.kind = { type: "string" };
      props.metadata = { type: "object", additionalProperties: true };
    }
    for (const [key, child] of Object.entries(properties ?? {})) {
      if (isNode(child)) props[key] = toJsonSchema(child);
    }
    if (Object.keys(props).length) out.properties = props;
    if (open || embedded) out.additionalProperties = true;
    else if (isNode(node.additionalProperties)) {
      out.additionalProperties = toJsonSchema(node.additionalProperties);
    } else if (node.additionalProperties === true) out.additionalProperties = true;
    else out.additionalProperties = false; // pruned by the API server
    if (!out.properties && out.additionalProperties === false) {
      // `{}` would mean "anything but null" (and fails `deno lint`): nothing is allowed here.
      out.tsType = node.nullable === true
        ? "Record<string, never> | null"
        : "Record<string, never>";
    }
  }
  // allOf/anyOf/oneOf/not only validate in structural schemas: the types come from `type`.
  return out;
}

function targetsOf(crd: KubeObject): Target[] {
  const spec = crd.spec as SchemaNode | undefined;
  const names = spec?.names as { kind?: string; plural?: string } | undefined;
  const group = spec?.group;
  const crdName = crd.metadata?.name ?? "(unnamed)";
  if (crd.kind !== "CustomResourceDefinition" || !isNode(spec) || typeof group !== "string") {
    throw new Error(`Not a CustomResourceDefinition: ${crd.kind ?? "no kind"} ${crdName}`);
  }
  if (!names?.kind || !names.plural) throw new Error(`CRD ${crdName} has no names.kind/plural`);
  const versions = (Array.isArray(spec.versions) ? spec.versions : []) as SchemaNode[];
  const served = versions.filter((v) => v.served !== false);
  if (!served.length) throw new Error(`CRD ${crdName} serves no versions`);
  const main = served.find((v) => v.storage === true) ?? served[0]!;
  const base = names.plural.toLowerCase().startsWith(names.kind.toLowerCase())
    ? names.kind + names.plural.slice(names.kind.length)
    : pascal(names.plural);
  return served.map((v) => {
    const version = String(v.name);
    // As the compiler spells names: v1beta1 → V1Beta1.
    const suffix = v === main
      ? ""
      : version.replace(/(^|[^a-zA-Z])([a-z])/g, (_, a: string, b: string) => a + b.toUpperCase());
    const schema = (v.schema as SchemaNode | undefined)?.openAPIV3Schema ??
      (spec.validation as SchemaNode | undefined)?.openAPIV3Schema;
    return {
      group,
      version,
      kind: names.kind!,
      plural: names.plural!,
      namespaced: spec.scope !== "Cluster",
      name: names.kind! + suffix,
      constant: base + suffix,
      schema: isNode(schema)
        ? schema
        : { type: "object", "x-kubernetes-preserve-unknown-fields": true },
    };
  });
}

type Compile = (schema: SchemaNode, name: string, options: Record<string, unknown>) => Promise<
  string
>;

async function compiler(): Promise<Compile> {
  // Loaded only for this command: it brings a formatter and a $ref parser along.
  const module = await import("json-schema-to-typescript");
  return module.compile as unknown as Compile;
}

/** The compiler's options for a line width. */
function compileOptions(width: number): Record<string, unknown> {
  return {
    bannerComment: "",
    additionalProperties: false,
    declareExternallyReferenced: true,
    unknownAny: true,
    format: true,
    style: { printWidth: width, semi: true, singleQuote: false, trailingComma: "all" },
  };
}

/** Compiles one named part (spec or status) of an object's schema. */
async function part(
  compile: Compile,
  schema: unknown,
  name: string,
  width: number,
): Promise<string> {
  if (!isNode(schema)) {
    return `/** Not described by the schema. */\nexport type ${name} = Record<string, unknown>;\n`;
  }
  const node = toJsonSchema(schema);
  delete node.title;
  if ((node.type !== "object" && node.properties === undefined) || node.tsType !== undefined) {
    const doc = typeof node.description === "string" ? docComment(node.description) : "";
    return `${doc}export type ${name} = ${node.tsType ?? "unknown"};\n`;
  }
  return await compile(node, name, compileOptions(width));
}

/** A doc comment as the compiler writes them. */
function docComment(text: string): string {
  const lines = text.replaceAll("*/", "* /").split("\n");
  return ["/**", ...lines.map((line) => line ? ` * ${line}` : " *"), " */", ""].join("\n");
}

/**
 * The first line of the object's interface, laid out as `deno fmt` does at the width: on one
 * line, else with `extends` on the next line, else with the base type below `extends`.
 */
function interfaceHeader(name: string, base: string, width: number): string {
  const one = `export interface ${name} extends ${base} {`;
  if (one.length <= width) return one;
  if (`  extends ${base} {`.length <= width) return `export interface ${name}\n  extends ${base} {`;
  return `export interface ${name}\n  extends\n    ${base} {`;
}

async function emit(compile: Compile, target: Target, width: number): Promise<string> {
  const root = target.schema;
  const props = isNode(root.properties) ? root.properties : {};
  const spec = `${target.name}Spec`;
  const status = `${target.name}Status`;
  const apiVersion = target.group ? `${target.group}/${target.version}` : target.version;
  const extra: SchemaNode = {};
  for (const [key, value] of Object.entries(props)) {
    if (!["apiVersion", "kind", "metadata", "spec", "status"].includes(key) && isNode(value)) {
      extra[key] = value;
    }
  }
  const object = toJsonSchema({
    ...root,
    description: typeof root.description === "string"
      ? root.description
      : `A ${target.kind} (\`${target.plural}.${target.group}/${target.version}\`).`,
    properties: {
      ...extra,
      apiVersion: { tsType: JSON.stringify(apiVersion) },
      kind: { tsType: JSON.stringify(target.kind) },
    },
    required: [],
  });
  object.additionalProperties = false;
  delete object.tsType;
  let main = await compile(object, target.name, compileOptions(width));
  const header = `export interface ${target.name} {`;
  if (!main.includes(header)) throw new Error(`Unexpected compiler output for ${target.name}`);
  main = main.replace(
    header,
    interfaceHeader(target.name, `TypedObject<${spec}, ${status}>`, width),
  );
  const call = `export const ${target.constant} = typedResource<${target.name}>({`;
  return [
    main,
    await part(compile, props.spec, spec, width),
    await part(compile, props.status, status, width),
    `/** The \`${target.plural}\` resource (\`${apiVersion}\`), typed, for handlers and the client. */`,
    call.length <= width
      ? call
      : `export const ${target.constant} = typedResource<\n  ${target.name}\n>({`,
    `  group: ${JSON.stringify(target.group)},`,
    `  version: ${JSON.stringify(target.version)},`,
    `  plural: ${JSON.stringify(target.plural)},`,
    `  kind: ${JSON.stringify(target.kind)},`,
    `  namespaced: ${target.namespaced},`,
    `});`,
    "",
  ].join("\n");
}

/**
 * Generates the TypeScript module for the given CRDs: per served version an interface
 * extending `TypedObject<Spec, Status>`, its `Spec` and `Status` types, and a typed resource
 * constant (a full resource reference: group, version, plural, kind, scope).
 *
 * @param crds CustomResourceDefinition objects.
 * @param options Where the generated file imports the framework from, and its formatting.
 * @returns The module's text.
 * @throws {Error} for objects that are not CRDs or CRDs without names or served versions.
 */
export async function generateTypes(
  crds: readonly KubeObject[],
  options: GenerateTypesOptions,
): Promise<string> {
  const width = options.lineWidth ?? 80;
  const compile = await compiler();
  const targets = crds.flatMap(targetsOf);
  const seen = new Set<string>();
  for (const target of targets) {
    if (seen.has(target.name)) {
      throw new Error(`Two CRDs define the kind ${target.name}; generate them into separate files`);
    }
    seen.add(target.name);
  }
  const from = JSON.stringify(options.importFrom);
  // Sorted as `deno fmt` sorts them (by name, ignoring case and `type`).
  const names = ["type TypedObject", "typedResource"];
  const imports = `import { ${names.join(", ")} } from ${from};`;
  const parts = [
    `// Generated by \`${options.command ?? "kopf generate types"}\`. Do not edit: generate again.`,
    imports.length <= width
      ? imports
      : `import {\n${names.map((name) => `  ${name},\n`).join("")}} from ${from};`,
    "",
  ];
  for (const target of targets) parts.push(await emit(compile, target, width));
  const text = parts.join("\n").replace(/\n{3,}/g, "\n\n");
  return options.denoFmt === false ? text : await denoFmt(text, width, options.configDir);
}

/**
 * Formats TypeScript with the running Deno's `deno fmt` (as configured in `configDir`, else
 * with no configuration at `width`). Where that cannot run (a compiled binary, no permission to
 * run programs, a broken configuration), the text is returned as it is.
 */
async function denoFmt(text: string, width: number, configDir?: string): Promise<string> {
  if (!/(^|[\/\\])deno(\.exe)?$/.test(Deno.execPath())) return text;
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: configDir === undefined
        ? ["fmt", "--no-config", `--line-width=${width}`, "--ext=ts", "-"]
        : ["fmt", "--ext=ts", "-"],
      ...(configDir === undefined ? {} : { cwd: configDir }),
      env: { NO_COLOR: "1" },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(text));
    await writer.close();
    const result = await child.output();
    const formatted = new TextDecoder().decode(result.stdout);
    return result.success && formatted.trim() ? formatted : text;
  } catch {
    return text;
  }
}

/**
 * The `fmt.lineWidth` of the Deno configuration that applies in a directory (the nearest
 * `deno.json` or `deno.jsonc` there or above), else Deno's default, 80.
 *
 * @param dir The directory.
 * @returns The line width.
 */
export async function configuredLineWidth(dir: string): Promise<number> {
  let current = dir.replace(/[\/\\]+$/, "") || "/";
  for (;;) {
    for (const name of ["deno.json", "deno.jsonc"]) {
      let text: string;
      try {
        text = await Deno.readTextFile(`${current}/${name}`);
      } catch {
        continue;
      }
      const width = /"lineWidth"\s*:\s*(\d+)/.exec(text)?.[1];
      return width ? Number(width) : 80;
    }
    const parent = current.replace(/[\/\\][^\/\\]*$/, "") || "/";
    if (parent === current) return 80;
    current = parent;
  }
}

/**
 * Reads the CRDs from YAML or JSON files (multi-document YAML allowed; other kinds skipped).
 *
 * @param paths The files.
 * @returns The CRDs, in file order.
 * @throws {Error} for unreadable or unparsable files, or when no file has a CRD.
 */
export async function readCrdFiles(paths: readonly string[]): Promise<KubeObject[]> {
  const crds: KubeObject[] = [];
  for (const path of paths) {
    let text: string;
    try {
      text = await Deno.readTextFile(path);
    } catch (error) {
      throw new Error(`Cannot read ${path}: ${error instanceof Error ? error.message : error}`);
    }
    for (const doc of parseAllDocuments(text)) {
      if (doc.errors.length) throw new Error(`Cannot parse ${path}: ${doc.errors[0]!.message}`);
      const object = doc.toJS() as KubeObject | null;
      if (object?.kind === "CustomResourceDefinition") crds.push(object);
    }
  }
  if (!crds.length) throw new Error(`No CustomResourceDefinition in ${paths.join(", ")}`);
  return crds;
}
