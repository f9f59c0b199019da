import assert from "node:assert/strict";
import { closest } from "./suggest.ts";

Deno.test("closest() suggests likely typos and Kopf's snake_case names, nothing far off", () => {
  const known = ["field", "value", "labels", "initialDelay", "id", "old", "new"];
  assert.equal(closest("feild", known), "field"); // a swap of neighbours
  assert.equal(closest("lables", known), "labels");
  assert.equal(closest("initial_delay", known), "initialDelay");
  assert.equal(closest("vaule", known), "value");
  assert.equal(closest("colour", known), undefined);
  assert.equal(closest("ix", known), undefined); // too short to guess
  assert.equal(closest("olf", known), "old");
});
