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
