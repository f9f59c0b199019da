import assert from "node:assert/strict";
import { fnv1a64, fnv1a64Hex } from "./fnv1a.ts";

Deno.test("fnv1a64() matches the published FNV-1a 64-bit test vectors", () => {
  assert.equal(fnv1a64(""), 0xcbf29ce484222325n);
  assert.equal(fnv1a64("a"), 0xaf63dc4c8601ec8cn);
  assert.equal(fnv1a64("foobar"), 0x85944171f73967e8n);
});

Deno.test("fnv1a64Hex() pads to 16 lower-case digits", () => {
  assert.equal(fnv1a64Hex(""), "cbf29ce484222325");
  assert.match(fnv1a64Hex("3b5e0ee6-0d9e-4b7b-9d63-3b4f8f2b4a11"), /^[0-9a-f]{16}$/);
});

Deno.test("fnv1a64() hashes UTF-8 bytes, not UTF-16 code units", () => {
  assert.notEqual(fnv1a64("é"), fnv1a64("\u00e9".normalize("NFD")));
  assert.equal(fnv1a64("é"), fnv1a64(String.fromCharCode(0xe9)));
});
