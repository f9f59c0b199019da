import assert from "node:assert/strict";
import { concatBytes } from "./bytes.ts";

Deno.test("concatBytes() joins chunks in order; a lone whole chunk is returned as it is", () => {
  const a = new Uint8Array([1, 2]), b = new Uint8Array([]), c = new Uint8Array([3]);
  assert.deepEqual([...concatBytes([a, b, c])], [1, 2, 3]);
  assert.deepEqual([...concatBytes([a, c], 3)], [1, 2, 3]);
  assert.equal(concatBytes([a]), a);
  assert.deepEqual([...concatBytes([])], []);
});
