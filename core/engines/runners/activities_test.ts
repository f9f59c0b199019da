// Unit tests of the activity runner (no cluster): a probe's result is served as JSON.
import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import type { ActivityHandler, HandlerFn } from "../../intents/handlers.ts";
import { createSettings } from "../../settings/settings.ts";
import { ActivityError, runActivity } from "./activities.ts";

function probe(id: string, fn: () => unknown): ActivityHandler {
  return {
    kind: "activity",
    activity: "probe",
    id,
    fn: fn as HandlerFn<never>,
    param: undefined,
    errors: undefined,
    timeout: undefined,
    retries: undefined,
    backoff: undefined,
  };
}

function run(handlers: ActivityHandler[], logs: LogEntry[] = []) {
  return runActivity({
    handlers,
    activity: "probe",
    memo: {},
    settings: createSettings(),
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    signal: AbortSignal.timeout(5_000),
  });
}

Deno.test("runActivity(): a probe's JSON result is collected by handler id", async () => {
  const results = await run([probe("count", () => ({ objects: 3, names: ["a"] }))]);
  assert.deepEqual(Object.fromEntries(results), { count: { objects: 3, names: ["a"] } });
});

Deno.test("runActivity(): a probe result JSON cannot carry fails the probe, naming the handler and the value", async () => {
  const logs: LogEntry[] = [];
  const error = await run([
    probe("ok", () => 1),
    probe("big", () => ({ total: 10n })),
    probe("mapped", () => new Map([["a", 1]])),
  ], logs).then(() => undefined, (e) => e);
  assert.ok(error instanceof ActivityError, String(error));
  assert.deepEqual([...error.outcomes.keys()].sort(), ["big", "mapped"]);
  assert.match(error.message, /'big': .*cannot be served as JSON by the liveness endpoint/);
  assert.match(error.outcomes.get("big")!.message, /BigInt/);
  assert.match(error.outcomes.get("mapped")!.message, /Map/);
  // One line per failed probe, naming it.
  const failed = logs.filter((e) => e.level === "error" || e.level === "critical");
  assert.equal(failed.filter((e) => e.message.includes("big")).length, 1);
});
