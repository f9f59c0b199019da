import assert from "node:assert/strict";
import { dumpCompact } from "./_pyjson.ts";

// Expected strings printed by Python 3.11: json.dumps(value, separators=(',', ':')).
Deno.test("dumpCompact() prints floats as Python's repr does", () => {
  const floats = [
    0.5,
    1e-05,
    0.0001,
    123.456,
    1e+21,
    1.5e-07,
    -2.5,
    1e22,
    1.7976931348623157e308,
    5e-324,
    0.1,
    1 / 3,
    -1e-5,
    123456789.123,
  ];
  assert.equal(
    dumpCompact(floats),
    "[0.5,1e-05,0.0001,123.456,1e+21,1.5e-07,-2.5,1e+22,1.7976931348623157e+308,5e-324,0.1," +
      "0.3333333333333333,-1e-05,123456789.123]",
  );
});

Deno.test("dumpCompact() prints integral numbers below 1e21 as integers", () => {
  assert.equal(
    dumpCompact([0, -1, 123456789012, 9007199254740991, 1e17, -0]),
    "[0,-1,123456789012,9007199254740991,100000000000000000,0]",
  );
});

Deno.test("dumpCompact() escapes like ensure_ascii=True", () => {
  assert.equal(
    dumpCompact(["\x00\x1f\x7f\x80\u2028\ud800 \u{1F600}"]),
    '["\\u0000\\u001f\\u007f\\u0080\\u2028\\ud800 \\ud83d\\ude00"]',
  );
  assert.equal(dumpCompact('"\\\n\r\t\b\f/'), '"\\"\\\\\\n\\r\\t\\b\\f/"');
});

Deno.test("dumpCompact() keeps key order, skips undefined keys, uses no spaces", () => {
  assert.equal(
    dumpCompact({ b: 1, a: [true, false, null], c: undefined, d: {} }),
    '{"b":1,"a":[true,false,null],"d":{}}',
  );
  assert.equal(dumpCompact([undefined]), "[null]");
});

// The fast paths (printable-ASCII strings through JSON.stringify, objects without part arrays)
// against the character-by-character implementation they replaced, on generated values.

function referenceDump(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "boolean":
    case "number":
    case "bigint":
      return dumpCompact(value); // numbers are not on the fast path: the same code either way
    case "string":
      return referenceQuote(value);
  }
  if (Array.isArray(value)) return `[${value.map(referenceDump).join(",")}]`;
  const parts: string[] = [];
  for (const [key, item] of Object.entries(value as object)) {
    if (item !== undefined) parts.push(`${referenceQuote(key)}:${referenceDump(item)}`);
  }
  return `{${parts.join(",")}}`;
}

function referenceQuote(text: string): string {
  const escapes: Record<string, string> = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
  };
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const code = text.charCodeAt(i);
    if (escapes[ch] !== undefined) out += escapes[ch];
    else if (code < 0x20 || code >= 0x7f) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out + '"';
}

function prng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = [
  "a",
  "Z",
  "0",
  " ",
  "~",
  '"',
  "\\",
  "/",
  "\n",
  "\x00",
  "\x1f",
  "\x7f",
  "\x80",
  "é",
  "\u2028",
  "\ud800",
  "😀",
  "{",
  "}",
  ":",
  ",",
];

function randomText(random: () => number): string {
  let text = "";
  for (let i = Math.floor(random() * 8); i > 0; i--) {
    text += ALPHABET[Math.floor(random() * ALPHABET.length)];
  }
  return text;
}

function randomValue(random: () => number, depth = 0): unknown {
  const pick = random();
  if (depth > 3 || pick < 0.4) {
    const scalars = [null, undefined, true, false, 0, 42, -7, 0.5, 1e-7, 1e22, randomText(random)];
    return scalars[Math.floor(random() * scalars.length)];
  }
  if (pick < 0.6) {
    return Array.from({ length: Math.floor(random() * 4) }, () => randomValue(random, depth + 1));
  }
  const value: Record<string, unknown> = {};
  for (let i = Math.floor(random() * 5); i > 0; i--) {
    value[randomText(random)] = randomValue(random, depth + 1);
  }
  return value;
}

Deno.test("dumpCompact() agrees with the character-by-character implementation", () => {
  const random = prng(7);
  for (let i = 0; i < 2000; i++) {
    const value = randomValue(random);
    assert.equal(dumpCompact(value), referenceDump(value), JSON.stringify(value));
  }
  for (let code = 0; code < 0x3000; code++) {
    const text = `a${String.fromCharCode(code)}b`;
    assert.equal(dumpCompact(text), referenceQuote(text));
    assert.equal(
      dumpCompact({ [text]: text }),
      `{${referenceQuote(text)}:${referenceQuote(text)}}`,
    );
  }
});
