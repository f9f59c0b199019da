import assert from "node:assert/strict";
import { formatTimestamp, orderRecord, parseTimestamp } from "./_records.ts";
// Produced by real Python Kopf (kopf==1.45.2) with tests/compat/kopf_formats.py; see there.
import KOPF from "../../tests/compat/kopf_formats.json" with { type: "json" };

Deno.test("formatTimestamp() matches Kopf's format_iso8601() at millisecond precision", () => {
  assert.equal(
    formatTimestamp(new Date(Date.UTC(2020, 1, 14, 16, 58, 25, 396))),
    KOPF.timestamps.milli,
  );
  assert.equal(formatTimestamp(new Date(Date.UTC(2020, 1, 14, 16, 58, 25))), KOPF.timestamps.whole);
});

Deno.test("parseTimestamp() reads current, legacy naive and other ISO 8601 forms", () => {
  const expected = Date.UTC(2020, 1, 14, 16, 58, 25, 396);
  for (
    const text of [
      KOPF.timestamps.micro,
      "2020-02-14T16:58:25.396364",
      "2020-02-14T16:58:25.396Z",
      "2020-02-14T18:58:25.396+02:00",
      "2020-02-14T15:58:25.396-0100",
      "2020-02-14 16:58:25,396999",
    ]
  ) {
    assert.equal(parseTimestamp(text)?.getTime(), expected, text);
  }
  assert.equal(parseTimestamp("2020-02-14T16:58")?.getTime(), Date.UTC(2020, 1, 14, 16, 58));
  assert.equal(parseTimestamp(null), null);
  assert.equal(parseTimestamp(undefined), null);
  assert.throws(() => parseTimestamp("yesterday"), RangeError);
});

Deno.test("orderRecord() puts fields in Kopf's order and drops undefined ones", () => {
  const ordered = orderRecord({
    message: null,
    retries: 1,
    started: "t",
    subrefs: ["b"],
    success: undefined,
  });
  assert.deepEqual(Object.keys(ordered), ["started", "retries", "message", "subrefs"]);
  assert.deepEqual(Object.keys(orderRecord({ extra: 1, started: "t" } as never)), [
    "started",
    "extra",
  ]);
});
