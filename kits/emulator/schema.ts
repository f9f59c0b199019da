/**
 * Object-level rules used by `cluster.ts`: name validation, pruning of custom resources by their structural schema, the part of an object that
 * counts for `metadata.generation`, and continue tokens.
 * @module
 */

import type { ListQuery } from "./cluster.ts";
import { ApiFailure, badRequest, expired, invalid, type StatusCause } from "./errors.ts";
import { NAMESPACES } from "./registry.ts";
import type { Store } from "./storage.ts";
import {
  clone,
  groupVersion,
  isObject,
  type Json,
  type JsonObject,
  type KubeObject,
  type ResourceDef,
} from "./types.ts";

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Validates an object name (DNS label for namespaces, DNS subdomain otherwise); 422. */
export function validateName(def: ResourceDef, name: string): void {
  const fail = (cause: StatusCause) => {
    throw invalid(def, name, [cause]);
  };
  if (!name) {
    fail({
      reason: "FieldValueRequired",
      message: "Required value: name or generateName is required",
      field: "metadata.name",
    });
  }
  const label = def === NAMESPACES;
  const ok = label ? LABEL.test(name) && name.length <= 63 : SUBDOMAIN.test(name) &&
    name.length <= 253;
  if (!ok) {
    fail({
      reason: "FieldValueInvalid",
      message: label
        ? `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case ` +
          `alphanumeric characters or '-', and must start and end with an alphanumeric ` +
          `character (e.g. 'my-name',  or '123-abc', regex used for validation is ` +
          `'[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
        : `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower ` +
          `case alphanumeric characters, '-' or '.', and must start and end with an ` +
          `alphanumeric character (e.g. 'example.com', regex used for validation is ` +
          `'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
      field: "metadata.name",
    });
  }
}

/** The `spec.finalizers` of a namespace. */
export function finalizersOf(spec: unknown): string[] {
  return isObject(spec) && Array.isArray(spec.finalizers) ? spec.finalizers as string[] : [];
}

/** The part of an object whose changes bump `metadata.generation`. */
export function specOf(def: ResourceDef, object: KubeObject): KubeObject {
  const { metadata: _m, apiVersion: _a, status, ...rest } = object;
  return def.subresources.includes("status") ? rest : { ...rest, status };
}

/** `namespace/name`: the storage order of objects. */
export function idOf(object: KubeObject): string {
  return `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
}

/** Encodes a continue token (as etcd-backed lists do). */
export function encodeContinue(rv: number, start: string): string {
  const json = JSON.stringify({ v: "meta.k8s.io/v1", rv, start: `${start}\u0000` });
  return btoa(String.fromCharCode(...new TextEncoder().encode(json)))
    .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Decodes a continue token; 400 when malformed. */
export function decodeContinue(token: string): { rv: number; start: string } {
  try {
    const b64 = token.replace(/-/g, "+").replace(/_/g, "/");
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const parsed = JSON.parse(new TextDecoder().decode(bytes)) as { rv?: unknown; start?: unknown };
    if (typeof parsed.rv !== "number" || typeof parsed.start !== "string") throw new Error();
    return {
      rv: parsed.rv,
      start: parsed.start.endsWith("\u0000") ? parsed.start.slice(0, -1) : parsed.start,
    };
  } catch (error) {
    throw badRequest(
      `invalid continue token: continue key is not valid: ${(error as Error).message}`,
    );
  }
}

function propertySchema(schema: JsonObject, key: string): JsonObject | undefined {
  const properties = schema.properties;
  if (isObject(properties) && isObject(properties[key])) return properties[key] as JsonObject;
  if (isObject(schema.additionalProperties)) return schema.additionalProperties as JsonObject;
  if (schema.additionalProperties === true || schema["x-kubernetes-preserve-unknown-fields"]) {
    return {};
  }
  return undefined;
}

function jsonType(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(value: Json, schema: JsonObject): boolean {
  const actual = jsonType(value);
  if (actual === "null") return schema.nullable === true || schema.type === undefined;
  if (schema["x-kubernetes-int-or-string"]) return actual === "integer" || actual === "string";
  if (typeof schema.type !== "string") return true;
  return actual === schema.type || (schema.type === "number" && actual === "integer");
}

/**
 * Drops fields a structural schema does not know, applies `default`s, and checks types, `enum`
 * and `required`, as the API server does for custom resources (other constraints are not
 * checked).
 */
function prune(
  value: Json,
  schema: JsonObject | undefined,
  path: string,
  causes: StatusCause[],
): Json | undefined {
  if (schema === undefined) return undefined;
  if (!typeMatches(value, schema)) {
    const actual = jsonType(value);
    causes.push({
      reason: "FieldValueTypeInvalid",
      message: `Invalid value: "${actual}": ${path} in body must be of type ${schema.type}: ` +
        `"${actual}"`,
      field: path,
    });
    return value;
  }
  if (
    Array.isArray(schema.enum) &&
    !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))
  ) {
    causes.push({
      reason: "FieldValueNotSupported",
      message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${
        schema.enum.map((e) => JSON.stringify(e)).join(", ")
      }`,
      field: path,
    });
  }
  if (Array.isArray(value)) {
    const items = isObject(schema.items) ? schema.items as JsonObject : {};
    return value.map((item, i) => prune(item, items, `${path}[${i}]`, causes) ?? null);
  }
  if (!isObject(value)) return value;
  for (const key of Array.isArray(schema.required) ? schema.required : []) {
    if (typeof key === "string" && !(key in value)) {
      causes.push({
        reason: "FieldValueRequired",
        message: "Required value",
        field: `${path}.${key}`,
      });
    }
  }
  if (Object.keys(schema).length === 0) return value;
  if (!isObject(schema.properties) && schema.additionalProperties === undefined) {
    return schema["x-kubernetes-preserve-unknown-fields"] || schema.type !== "object" ? value : {};
  }
  const result: JsonObject = {};
  const properties = isObject(schema.properties) ? schema.properties as JsonObject : {};
  const given: JsonObject = { ...value };
  for (const [key, property] of Object.entries(properties)) {
    if (!(key in given) && isObject(property) && property.default !== undefined) {
      given[key] = clone(property.default); // structural defaulting
    }
  }
  for (const [key, item] of Object.entries(given)) {
    const pruned = prune(item, propertySchema(schema, key), `${path}.${key}`, causes);
    if (pruned !== undefined) result[key] = pruned;
  }
  return result;
}

/**
 * Prunes the fields of a custom resource its version's structural schema does not know, and
 * validates the rest against the schema's types, enums and required fields.
 *
 * @param def The custom resource.
 * @param object The object (pruned in place).
 * @returns The validation failures, if any.
 */
export function pruneObject(def: ResourceDef, object: KubeObject): StatusCause[] {
  const version = object.apiVersion?.split("/")[1] ?? def.versions[0]!;
  const schema = def.schemas?.[version];
  const causes: StatusCause[] = [];
  if (!schema) return causes;
  const properties = isObject(schema.properties) ? schema.properties as JsonObject : {};
  for (const [key, property] of Object.entries(properties)) {
    if (!(key in object) && isObject(property) && property.default !== undefined) {
      object[key] = clone(property.default);
    }
  }
  for (const key of Object.keys(object)) {
    if (key === "apiVersion" || key === "kind" || key === "metadata") continue;
    const pruned = prune(object[key] as Json, propertySchema(schema, key), key, causes);
    if (pruned === undefined) delete object[key];
    else object[key] = pruned;
  }
  for (const key of Array.isArray(schema.required) ? schema.required : []) {
    if (typeof key === "string" && !(key in object)) {
      causes.push({ reason: "FieldValueRequired", message: "Required value", field: key });
    }
  }
  return causes;
}

/**
 * The version a list page is served at, and where it starts: from the continue token (410
 * Expired when compacted away), an exact resourceVersion, or the latest.
 *
 * @param store The store.
 * @param query The list query.
 * @returns The version and the key after which the page starts.
 */
export function listVersion(store: Store, query: ListQuery): { rv: number; start: string } {
  let rv = store.resourceVersion;
  let start = "";
  if (query.continue) {
    const token = decodeContinue(query.continue);
    start = token.start;
    if (token.rv >= 0) {
      if (token.rv < store.compactedVersion) {
        throw expired(
          "The provided continue parameter is too old to display a consistent list result. " +
            "You can start a new list without the continue parameter, or use the continue " +
            "token in this response to retrieve the remainder of the results. Continuing " +
            "with the provided token results in an inconsistent list - objects that were " +
            "created, modified, or deleted between the time the first chunk was returned " +
            "and now may show up in the list.",
          encodeContinue(-1, start),
        );
      }
      rv = token.rv;
    }
  } else if (query.resourceVersionMatch && !query.resourceVersion) {
    const message = "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is " +
      "provided";
    throw new ApiFailure(
      422,
      "Invalid",
      `ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: ${message}`,
      {
        group: "meta.k8s.io",
        kind: "ListOptions",
        causes: [{ reason: "FieldValueForbidden", message, field: "resourceVersionMatch" }],
      },
    );
  } else if (query.resourceVersion && query.resourceVersionMatch === "Exact") {
    rv = Number(query.resourceVersion);
  } else if (Number(query.resourceVersion ?? 0) > rv) {
    throw new ApiFailure(
      504,
      "Timeout",
      `Timeout: Too large resource version: ${query.resourceVersion}, current: ${rv}`,
      {
        causes: [{ reason: "ResourceVersionTooLarge", message: "Too large resource version" }],
        retryAfterSeconds: 1,
      },
    );
  }
  return { rv, start };
}

/** Checks a request body's kind and apiVersion and converts it to the stored form; 400. */
export function accept(def: ResourceDef, body: unknown, version = def.versions[0]!): KubeObject {
  if (!isObject(body)) throw badRequest("the body of the request must be a JSON object");
  const object = clone(body) as KubeObject;
  const apiVersion = groupVersion(def.group, version);
  if (def.crd && (!object.kind || !object.apiVersion)) {
    const json = JSON.stringify(body);
    const missing = object.kind ? "apiVersion" : "Kind";
    throw badRequest(
      `the object provided is unrecognized (must be of type ${def.kind}): Object ` +
        `'${missing}' is missing in '${json}' (${json})`,
    );
  }
  if (def.crd && object.apiVersion !== apiVersion) {
    throw badRequest(
      `the API version in the data (${object.apiVersion}) does not match the expected API ` +
        `version (${apiVersion})`,
    );
  }
  if (
    (object.kind !== undefined && object.kind !== def.kind) ||
    (object.apiVersion !== undefined && object.apiVersion !== apiVersion)
  ) {
    throw badRequest(
      `${object.kind ?? def.kind} in version "${object.apiVersion ?? version}" cannot be ` +
        `handled as a ${def.kind}: the kind or version does not match the request`,
    );
  }
  const accepted = def.convert ? def.convert.in(object) : object;
  accepted.apiVersion = apiVersion;
  accepted.kind = def.kind;
  accepted.metadata = isObject(accepted.metadata) ? { ...accepted.metadata } : {};
  return accepted;
}
