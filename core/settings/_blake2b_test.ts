import assert from "node:assert/strict";
import { blake2b } from "./_blake2b.ts";

// Vectors from Python's hashlib: hashlib.blake2b(data, digest_size=n).hexdigest().
const VECTORS: readonly [data: string, size: number, hex: string][] = [
  ["", 4, "1271cf25"],
  ["abc", 4, "63906248"],
  ["a".repeat(127), 4, "d52a9199"],
  ["a".repeat(128), 4, "12cabd16"],
  ["a".repeat(129), 4, "55ada03e"],
  ["x".repeat(300), 4, "b12499e1"],
  ["", 64, "786a02f742015903c6c6fd852552d272"],
  ["abc", 64, "ba80a53f981c4d0d6a2797b69f12f6e9"],
  ["a".repeat(129), 64, "55e6e0eb418149a8af92fd9ddc992547"],
];

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

Deno.test("blake2b() matches hashlib for short, block-sized and multi-block inputs", () => {
  for (const [data, size, expected] of VECTORS) {
    const digest = blake2b(new TextEncoder().encode(data), size);
    assert.equal(digest.length, size);
    assert.equal(hex(digest).slice(0, expected.length), expected, `${data.length} bytes`);
  }
});

Deno.test("blake2b() rejects digest sizes outside 1..64", () => {
  assert.throws(() => blake2b(new Uint8Array(), 0), RangeError);
  assert.throws(() => blake2b(new Uint8Array(), 65), RangeError);
});
