import assert from "node:assert/strict";
import { toTable } from "./discovery.ts";
import type { ResourceDef } from "./types.ts";

const WIDGETS: ResourceDef = {
  group: "example.com",
  versions: ["v1"],
  plural: "widgets",
  singular: "widget",
  kind: "Widget",
  listKind: "WidgetList",
  namespaced: true,
  shortNames: [],
  categories: [],
  subresources: [],
  generation: true,
};
const OBJECT = {
  apiVersion: "example.com/v1",
  kind: "Widget",
  metadata: { name: "w", creationTimestamp: new Date().toISOString() },
  spec: { size: "small" },
};

Deno.test("a table of a CRD with printer columns has them only, its own Age included, as kube-apiserver's", () => {
  const def: ResourceDef = {
    ...WIDGETS,
    columns: {
      v1: [
        { name: "Size", type: "string", jsonPath: ".spec.size" },
        { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
      ],
    },
  };
  const table = toTable(def, "v1", [OBJECT], {}) as {
    columnDefinitions: { name: string }[];
    rows: { cells: unknown[] }[];
  };
  assert.deepEqual(table.columnDefinitions.map((c) => c.name), ["Name", "Size", "Age"]);
  assert.equal(table.rows[0]!.cells.length, 3);
  assert.equal(table.rows[0]!.cells[1], "small");
});

Deno.test("a table of a CRD without printer columns has Name and Age", () => {
  const table = toTable(WIDGETS, "v1", [OBJECT], {}) as {
    columnDefinitions: { name: string }[];
    rows: { cells: unknown[] }[];
  };
  assert.deepEqual(table.columnDefinitions.map((c) => c.name), ["Name", "Age"]);
  assert.equal(table.rows[0]!.cells.length, 2);
});
