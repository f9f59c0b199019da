/** Which field paths a CRD schema can hold (the schema walk of the startup field check). */

import assert from "node:assert/strict";
import type { Resource } from "../../structs/resources.ts";
import {
  checkFieldPaths,
  type FieldCheckDeps,
  fieldPathProblem,
  type FieldSchema,
} from "./field_paths.ts";

const STRICT: FieldSchema = {
  type: "object",
  properties: {
    spec: {
      type: "object",
      properties: {
        size: { type: "integer" },
        color: { type: "string" },
        port: { "x-kubernetes-int-or-string": true },
        items: {
          type: "array",
          items: { type: "object", properties: { name: { type: "string" } } },
        },
        env: { type: "object", additionalProperties: { type: "string" } },
        extra: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
        template: {
          type: "object",
          "x-kubernetes-embedded-resource": true,
          properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } },
        },
        choice: { anyOf: [{ properties: { a: { type: "string" } } }, { properties: { b: {} } }] },
        anything: {},
      },
    },
    status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
  },
};

Deno.test("paths the schema holds have no problem", () => {
  for (
    const path of [
      "spec",
      "spec.size",
      "spec.port",
      "spec.items",
      "spec.env.ANY_NAME",
      "spec.extra.deep.down",
      "spec.template.metadata.labels",
      "spec.template.spec.x",
      "spec.choice.a",
      "spec.choice.b",
      "spec.anything.at.all",
      "status.whatever",
      "metadata.labels.app",
      "metadata.annotations.x",
      "metadata.name",
      "apiVersion",
      "kind",
    ]
  ) {
    assert.equal(fieldPathProblem(STRICT, path.split(".")), undefined, path);
  }
});

Deno.test("paths the schema cannot hold are named, with the likely meant field", () => {
  const cases: Array<[string, string]> = [
    ["spec.colr", "no field `colr` in `spec` (did you mean `color`?)"],
    ["spce.size", "no field `spce` at the top level (did you mean `spec`?)"],
    ["data.x", "no field `data` at the top level"],
    ["spec.size.value", "`spec.size` is an integer, it has no fields"],
    ["spec.port.x", "`spec.port` is an integer or a string, it has no fields"],
    ["spec.items.name", "`spec.items` is an array, it has no fields"],
    ["spec.choice.c", "no field `c` in `spec.choice`"],
    ["metadata.lables.app", "no field `lables` in `metadata` (did you mean `labels`?)"],
    ["kind.x", "`kind` is a string, it has no fields"],
  ];
  for (const [path, problem] of cases) {
    assert.equal(fieldPathProblem(STRICT, path.split(".")), problem, path);
  }
});

Deno.test("a schema that keeps unknown fields at the top holds every path", () => {
  const loose: FieldSchema = { type: "object", "x-kubernetes-preserve-unknown-fields": true };
  assert.equal(fieldPathProblem(loose, ["spce", "size"]), undefined);
});

function fakeDeps(list: () => Promise<unknown>) {
  const warnings: string[] = [];
  let requests = 0;
  const deps = {
    client: {
      api: {
        list: () => {
          requests++;
          return list();
        },
      },
    },
    logger: { warning: (message: string) => warnings.push(message) },
    signal: new AbortController().signal,
  } as unknown as FieldCheckDeps;
  return { deps, warnings, requests: () => requests };
}

const WIDGETS: Resource = {
  group: "example.com",
  version: "v1",
  plural: "widgets",
  singular: "widget",
  kind: "Widget",
  namespaced: true,
  verbs: ["list", "watch", "patch"],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

Deno.test("checkFieldPaths() skips quietly what it cannot check, and reads nothing without fields", async () => {
  const typo = [{ id: "h/spec.sise", field: ["spec", "sise"] }];
  // The CRD cannot be listed (RBAC): no warning, no error.
  const forbidden = fakeDeps(() => Promise.reject(new Error("403 Forbidden")));
  await checkFieldPaths(forbidden.deps, WIDGETS, typo);
  assert.deepEqual(forbidden.warnings, []);
  // A built-in resource (no dot in the group): not even asked.
  const builtin = fakeDeps(() => Promise.resolve({ items: [] }));
  await checkFieldPaths(builtin.deps, { ...WIDGETS, group: "apps" }, typo);
  assert.equal(builtin.requests(), 0);
  // No handler with a field: not asked either.
  await checkFieldPaths(builtin.deps, WIDGETS, [{ id: "plain" }]);
  assert.equal(builtin.requests(), 0);
  // A CRD with the schema: one warning naming the handler, the path and the likely field.
  const crd = {
    spec: { versions: [{ name: "v1", schema: { openAPIV3Schema: STRICT } }] },
  };
  const found = fakeDeps(() => Promise.resolve({ items: [crd] }));
  await checkFieldPaths(found.deps, WIDGETS, [...typo, { id: "ok", field: ["spec", "size"] }]);
  assert.equal(found.warnings.length, 1);
  assert.match(
    found.warnings[0]!,
    /^Handler 'h\/spec\.sise' filters on field 'spec\.sise', which objects of widgets\.v1\.example\.com cannot have by their CRD's schema: no field `sise` in `spec` \(did you mean `size`\?\)\./,
  );
});
