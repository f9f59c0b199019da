import assert from "node:assert/strict";
import { getLogger, type LogRecord } from "@logtape/logtape";
import { configureLogging, formatRecord } from "./logging.ts";

const OBJECT = { apiVersion: "v1", kind: "ConfigMap", namespace: "ns1", name: "cm1", uid: "u1" };

function record(properties: Record<string, unknown> = {}): LogRecord {
  return {
    category: ["kopf", "objects"],
    level: "info",
    message: ["Handler 'create_fn' succeeded."],
    rawMessage: "Handler 'create_fn' succeeded.",
    timestamp: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
    properties,
  } as LogRecord;
}

Deno.test("log formats: full is '[timestamp] logger [LEVEL] message', plain the message only, json a record (LOG-01)", () => {
  const full = formatRecord(record(), { format: "full" });
  assert.match(
    full,
    /^\[2026-01-02 \d\d:04:05,678\] kopf\.objects\s+\[INFO\s*\] Handler 'create_fn' succeeded\.$/,
  );
  assert.equal(formatRecord(record(), { format: "plain" }), "Handler 'create_fn' succeeded.");
  const json = JSON.parse(formatRecord(record(), { format: "json" }));
  assert.equal(json.message, "Handler 'create_fn' succeeded.");
  assert.equal(json.severity, "info");
  assert.equal(json.timestamp, "2026-01-02T03:04:05.678Z");
});

Deno.test("log prefix: [namespace/name] on object messages in text, off in JSON unless asked; --no-log-prefix drops it (LOG-02)", () => {
  const about = record({ object: OBJECT });
  assert.equal(
    formatRecord(about, { format: "plain" }),
    "[ns1/cm1] Handler 'create_fn' succeeded.",
  );
  assert.equal(
    formatRecord(about, { format: "plain", prefix: false }),
    "Handler 'create_fn' succeeded.",
  );
  assert.equal(
    formatRecord(record({ object: { ...OBJECT, namespace: undefined } }), { format: "plain" }),
    "[cm1] Handler 'create_fn' succeeded.",
    "cluster-scoped: the name only",
  );
  assert.equal(
    JSON.parse(formatRecord(about, { format: "json" })).message,
    "Handler 'create_fn' succeeded.",
  );
  assert.equal(
    JSON.parse(formatRecord(about, { format: "json", prefix: true })).message,
    "[ns1/cm1] Handler 'create_fn' succeeded.",
  );
});

Deno.test("JSON log records carry the object reference under 'object' or the --log-refkey (LOG-03)", () => {
  const about = record({ object: OBJECT });
  assert.deepEqual(JSON.parse(formatRecord(about, { format: "json" })).object, OBJECT);
  const renamed = JSON.parse(formatRecord(about, { format: "json", refkey: "k8s" }));
  assert.deepEqual(renamed.k8s, OBJECT);
  assert.equal(renamed.object, undefined);
});

Deno.test("configureLogging() sets format and verbosity programmatically, like kopf.configure() (LOG-05, CFG-120)", async () => {
  const lines: string[] = [];
  await configureLogging({ format: "json", quiet: true, write: (line) => lines.push(line) });
  getLogger(["kopf", "test"]).info("hidden when quiet");
  getLogger(["kopf", "test"]).warn("shown");
  assert.deepEqual(lines.map((l) => JSON.parse(l).message), ["shown"]);
  lines.length = 0;
  await configureLogging({ format: "plain", verbose: true, write: (line) => lines.push(line) });
  getLogger(["kopf", "test"]).debug("debug with verbose");
  assert.deepEqual(lines, ["debug with verbose"]);
  await configureLogging({ write: () => {} });
});

Deno.test("text logs escape control characters of interpolated values; JSON logs stay exact", () => {
  const forged =
    "v\n[2026-01-02 03:04:05,678] kopf.objects         [INFO    ] Handler 'x' succeeded.";
  const hostile = (message: string, properties: Record<string, unknown> = {}) => ({
    ...record(properties),
    message: [message],
    rawMessage: message,
  });
  const line = formatRecord(hostile(`Value: ${forged}\r\x1b[2J\x07\x9b31m\x7f`), {
    format: "full",
  });
  assert.equal(line.split("\n").length, 1, line);
  assert.ok(
    line.endsWith(
      "Value: v\\n[2026-01-02 03:04:05,678] kopf.objects         [INFO    ] Handler 'x' succeeded." +
        "\\r\\x1b[2J\\x07\\x9b31m\\x7f",
    ),
    line,
  );
  assert.equal(formatRecord(hostile("tab\tstays"), { format: "plain" }), "tab\tstays");
  // The object prefix, too.
  const about = hostile("m", { object: { ...OBJECT, name: "a\nb" } });
  assert.equal(formatRecord(about, { format: "plain" }), "[ns1/a\\nb] m");
  // An exception's message is one line; its stack frames keep their lines.
  const error = new TypeError(`bad value ${forged}\x1b[31m`);
  const text = formatRecord(hostile("Handler failed.", { error }), { format: "plain" });
  const [first, second, ...frames] = text.split("\n");
  assert.equal(first, "Handler failed.");
  assert.equal(
    second,
    `TypeError: bad value v\\n[2026-01-02 03:04:05,678] kopf.objects         [INFO    ] Handler 'x' succeeded.\\x1b[31m`,
  );
  assert.ok(frames.length > 0 && frames.every((f) => /^\s+at /.test(f)), frames.join("|"));
  // A non-Error thrown value.
  assert.equal(
    formatRecord(hostile("m", { error: "x\ny" }), { format: "plain" }),
    "m\nx\\ny",
  );
  // JSON already escapes: the values stay as they were.
  const json = JSON.parse(formatRecord(hostile(`Value: ${forged}`), { format: "json" }));
  assert.equal(json.message, `Value: ${forged}`);
});

Deno.test("text logs leave messages without control characters byte-identical", () => {
  const message = "Handler 'create_fn' succeeded. é ✓ \"quoted\" \\n literal";
  const about = { ...record({ object: OBJECT }), message: [message], rawMessage: message };
  assert.equal(formatRecord(about, { format: "plain" }), `[ns1/cm1] ${message}`);
});
