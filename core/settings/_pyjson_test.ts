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
