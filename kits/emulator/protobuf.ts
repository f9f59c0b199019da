/**
 * Decoding of Kubernetes protobuf request bodies for the few built-in kinds kubectl's
 * imperative commands send that way (`kubectl create namespace|configmap|secret|
 * serviceaccount`). Answers are always JSON, which kubectl accepts. Other kinds get 415.
 * @module
 */

import { unsupportedMediaType } from "./errors.ts";
import type { KubeObject } from "./types.ts";

type Kind =
  | "string"
  | "bytes"
  | "int"
  | "bool"
  | "time"
  | "map"
  | "bytesMap"
  | Schema
  | readonly ["repeated", Kind];

interface Schema {
  readonly [field: number]: readonly [name: string, kind: Kind];
}

const OWNER: Schema = {
  1: ["kind", "string"],
  3: ["name", "string"],
  4: ["uid", "string"],
  5: ["apiVersion", "string"],
  6: ["controller", "bool"],
  7: ["blockOwnerDeletion", "bool"],
};
const META: Schema = {
  1: ["name", "string"],
  2: ["generateName", "string"],
  3: ["namespace", "string"],
  5: ["uid", "string"],
  6: ["resourceVersion", "string"],
  7: ["generation", "int"],
  8: ["creationTimestamp", "time"],
  11: ["labels", "map"],
  12: ["annotations", "map"],
  13: ["ownerReferences", ["repeated", OWNER]],
  14: ["finalizers", ["repeated", "string"]],
};
const LOCAL_REF: Schema = { 1: ["name", "string"] };
const OBJECT_REF: Schema = {
  1: ["kind", "string"],
  2: ["namespace", "string"],
  3: ["name", "string"],
  4: ["uid", "string"],
  5: ["apiVersion", "string"],
};

const KINDS: Readonly<Record<string, Schema>> = {
  "v1/Namespace": {
    1: ["metadata", META],
    2: ["spec", { 1: ["finalizers", ["repeated", "string"]] }],
  },
  "v1/ConfigMap": {
    1: ["metadata", META],
    2: ["data", "map"],
    3: ["binaryData", "bytesMap"],
    4: ["immutable", "bool"],
  },
  "v1/Secret": {
    1: ["metadata", META],
    2: ["data", "bytesMap"],
    3: ["type", "string"],
    4: ["stringData", "map"],
    5: ["immutable", "bool"],
  },
  "v1/ServiceAccount": {
    1: ["metadata", META],
    2: ["secrets", ["repeated", OBJECT_REF]],
    3: ["imagePullSecrets", ["repeated", LOCAL_REF]],
    4: ["automountServiceAccountToken", "bool"],
  },
};

interface Field {
  readonly no: number;
  readonly varint: bigint;
  readonly bytes: Uint8Array;
}

function* fields(buffer: Uint8Array): Generator<Field> {
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buffer[pos++];
      if (byte === undefined) throw new Error("truncated varint");
      result |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return result;
      shift += 7n;
    }
  };
  while (pos < buffer.length) {
    const tag = Number(varint());
    const wire = tag & 7;
    const no = tag >>> 3;
    if (wire === 0) yield { no, varint: varint(), bytes: new Uint8Array() };
    else if (wire === 2) {
      const length = Number(varint());
      yield { no, varint: 0n, bytes: buffer.subarray(pos, pos + length) };
      pos += length;
    } else if (wire === 1) pos += 8;
    else if (wire === 5) pos += 4;
    else throw new Error(`unsupported wire type ${wire}`);
  }
}

const text = new TextDecoder();

function base64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function scalar(kind: Kind, field: Field): unknown {
  switch (kind) {
    case "string":
      return text.decode(field.bytes);
    case "bytes":
      return base64(field.bytes);
    case "int":
      return Number(field.varint);
    case "bool":
      return field.varint !== 0n;
    case "time": {
      const parts = message({ 1: ["seconds", "int"] }, field.bytes);
      return new Date(Number(parts.seconds ?? 0) * 1000).toISOString().replace(/\.\d+Z$/, "Z");
    }
    default:
      return typeof kind === "object" && !Array.isArray(kind)
        ? message(kind as Schema, field.bytes)
        : undefined;
  }
}

function message(schema: Schema, buffer: Uint8Array): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const field of fields(buffer)) {
    const entry = schema[field.no];
    if (!entry) continue;
    const [name, kind] = entry;
    if (kind === "map" || kind === "bytesMap") {
      const pair = message({
        1: ["key", "string"],
        2: ["value", kind === "map" ? "string" : "bytes"],
      }, field.bytes);
      result[name] = { ...(result[name] as object), [String(pair.key ?? "")]: pair.value ?? "" };
    } else if (Array.isArray(kind)) {
      result[name] = [...(result[name] as unknown[] ?? []), scalar(kind[1], field)];
    } else {
      const value = scalar(kind as Kind, field);
      // Go omits empty values from JSON; so does the API server's answer.
      if (value !== "" && value !== 0) result[name] = value;
    }
  }
  return result;
}

/**
 * Decodes a `application/vnd.kubernetes.protobuf` body.
 *
 * @param body The request body (starting with the `k8s\0` magic).
 * @returns The object as JSON.
 * @throws {ApiFailure} 415 for kinds this module does not know.
 */
export function decodeProtobuf(body: Uint8Array): KubeObject {
  const magic = [0x6b, 0x38, 0x73, 0x00];
  if (!magic.every((b, i) => body[i] === b)) throw unsupportedMediaType(["application/json"]);
  let typeMeta: { apiVersion?: unknown; kind?: unknown } = {};
  let raw: Uint8Array = new Uint8Array();
  for (const field of fields(body.subarray(4))) {
    if (field.no === 1) {
      typeMeta = message({ 1: ["apiVersion", "string"], 2: ["kind", "string"] }, field.bytes);
    }
    if (field.no === 2) raw = field.bytes;
  }
  const schema = KINDS[`${typeMeta.apiVersion}/${typeMeta.kind}`];
  if (!schema) throw unsupportedMediaType(["application/json"]);
  return {
    apiVersion: String(typeMeta.apiVersion),
    kind: String(typeMeta.kind),
    ...message(schema, raw),
  };
}
