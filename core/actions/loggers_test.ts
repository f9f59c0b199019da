// Unit tests of the loggers' fast paths: what reaches LogTape and the listeners is unchanged,
// and isEnabledFor() is false only when a message would go nowhere.
import assert from "node:assert/strict";
import { configure, type LogRecord, reset } from "@logtape/logtape";
import { type LogEntry, Logger, type LogListener } from "./loggers.ts";

async function capture(lowestLevel: "debug" | "info" | "warning"): Promise<LogRecord[]> {
  const records: LogRecord[] = [];
  await configure({
    reset: true,
    sinks: { out: (record) => records.push(record) },
    loggers: [
      { category: ["kopf"], lowestLevel, sinks: ["out"] },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: [] },
    ],
  });
  return records;
}

const BODY = { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "ns", uid: "u" } };

Deno.test("Logger.log() hands LogTape the same record as before, category included", async () => {
  const records = await capture("debug");
  try {
    const entries: LogEntry[] = [];
    const root = new Logger(["kopf", "operator"], { listeners: [(e) => entries.push(e)] });
    const error = new Error("boom");
    root.forObject(BODY).error("failed", error);
    root.child(["kopf", "other"]).info("hello");
    assert.equal(records.length, 2);
    const [first, second] = records as [LogRecord, LogRecord];
    assert.deepEqual(first.category, ["kopf", "objects"]);
    assert.equal(first.level, "error");
    assert.deepEqual(first.message, ["failed"]);
    assert.equal(first.rawMessage, "failed");
    assert.deepEqual(first.properties, {
      object: { apiVersion: "v1", kind: "Pod", name: "p", uid: "u", namespace: "ns" },
      error,
    });
    assert.equal(typeof first.timestamp, "number");
    assert.deepEqual(second.category, ["kopf", "other"]);
    assert.equal(second.level, "info");
    assert.deepEqual(entries.map((e) => [e.level, e.message, e.local]), [
      ["error", "failed", false],
      ["info", "hello", false],
    ]);
  } finally {
    await reset();
  }
});

Deno.test("Logger.log() skips LogTape below its level but still feeds the listeners", async () => {
  const records = await capture("warning");
  try {
    const entries: LogEntry[] = [];
    const logger = new Logger(["kopf", "operator"], { listeners: [(e) => entries.push(e)] });
    logger.debug("d");
    logger.info("i");
    logger.warning("w");
    assert.deepEqual(records.map((r) => r.rawMessage), ["w"]);
    assert.deepEqual(entries.map((e) => e.message), ["d", "i", "w"]);
  } finally {
    await reset();
  }
});

Deno.test("Logger.isEnabledFor() is false only when neither LogTape nor a listener wants it", async () => {
  await capture("warning");
  try {
    const accepting: LogListener = Object.assign(() => {}, {
      accepts: (level: string, local: boolean) => !local && level !== "debug",
    });
    const quiet = new Logger(["kopf", "operator"], { listeners: [accepting] });
    assert.equal(quiet.isEnabledFor("debug"), false); // LogTape: warning+; listener: no debug
    assert.equal(quiet.isEnabledFor("info"), true); // the listener takes info
    assert.equal(quiet.forObject(BODY, { local: true }).isEnabledFor("info"), false);
    assert.equal(quiet.forObject(BODY, { local: true }).isEnabledFor("warning"), true); // LogTape
    // A listener without a predicate takes everything.
    const greedy = new Logger(["kopf", "operator"], { listeners: [() => {}] });
    assert.equal(greedy.forObject(BODY, { local: true }).isEnabledFor("debug"), true);
    // No listeners: LogTape decides.
    const bare = new Logger(["kopf", "operator"]);
    assert.equal(bare.isEnabledFor("debug"), false);
    assert.equal(bare.isEnabledFor("error"), true);
    await capture("debug");
    assert.equal(bare.isEnabledFor("debug"), true); // reconfiguration is seen at once
  } finally {
    await reset();
  }
});
