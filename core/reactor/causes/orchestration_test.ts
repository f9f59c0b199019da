import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { ApiError } from "../../client/errors.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import { createSettings } from "../../settings/settings.ts";
import { aborted } from "../../util/parts.ts";
import { operatorScope } from "../scope/scope.ts";
import { ORCHESTRATION_GROUPS, Orchestrator } from "./orchestration.ts";
import { sleep, until } from "../../util/_test_support.ts";

const ALL_PARTS = [
  "the watch streams",
  "the namespace following",
  "the CRD following",
  "the idle collector",
];

/**
 * An orchestrator over a fake client with no resources to serve: the namespace listing waits for
 * its stop (or is refused with 403), and the CRD following is what the test makes it.
 */
function fixture(init: {
  idleGcDelay?: number | null;
  namespaces?: readonly string[];
  scanningDisabled?: boolean;
  refuseNamespaces?: boolean;
  followDefinitions?: (signal: AbortSignal) => Promise<void>;
} = {}) {
  const controller = new AbortController();
  const logs: LogEntry[] = [];
  const events: string[] = [];
  const failures: unknown[] = [];
  const api = {
    http: { connection: { server: "https://fake" }, closeIdle: () => 0 },
    // deno-lint-ignore require-yield -- no namespace to list: it fails or waits for its stop
    async *listPages(_resource: unknown, options: { signal: AbortSignal }) {
      events.push("namespaces followed");
      if (init.refuseNamespaces) {
        throw new ApiError({
          code: 403,
          reason: "Forbidden",
          message: "namespaces is forbidden",
          request: { method: "GET", path: "/api/v1/namespaces", server: "https://fake" },
        });
      }
      await aborted(options.signal);
      events.push("namespaces stopped");
      throw options.signal.reason;
    },
  };
  const client = {
    api,
    http: api.http,
    discovery: {
      resources: () => Promise.resolve([]),
      onChange: () => () => {},
      followDefinitions: (signal: AbortSignal) => {
        events.push("CRDs followed");
        return (init.followDefinitions ?? aborted)(signal);
      },
    },
  } as unknown as KubeClient;
  const settings = createSettings({
    process: { idleGcDelay: init.idleGcDelay === undefined ? 0.05 : init.idleGcDelay },
  });
  if (init.scanningDisabled) settings.scanning.disabled = true;
  const scope = operatorScope({
    client,
    registry: new OperatorRegistry(),
    settings,
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    memo: {},
    namespaces: init.namespaces ?? ["team-*"],
    clusterwide: false,
    signal: controller.signal,
  });
  const orchestrator = new Orchestrator(scope, { onFailure: (error) => failures.push(error) });
  return { orchestrator, controller, settings, logs, events, failures };
}

/** Runs the orchestrator, noting when the run has settled. */
function started(orchestrator: Orchestrator) {
  const state = { settled: false };
  const run = orchestrator.run().finally(() => (state.settled = true));
  return { run, state };
}

Deno.test("Orchestrator: its parts start in order and stop at once, the stop waiting for each group in order", async () => {
  assert.deepEqual(ORCHESTRATION_GROUPS.map((g) => [g.name, g.told]), [
    ["intake", "at once"],
    ["streams", "at once"],
    ["idle", "at once"],
  ]);
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const { orchestrator, controller, events, failures } = fixture({
    // The CRD following keeps the stop waiting after its signal aborted.
    followDefinitions: async (signal) => {
      await aborted(signal);
      await held;
    },
  });
  assert.deepEqual(orchestrator.running(), []);
  const { run, state } = started(orchestrator);
  await until(() => orchestrator.running().length === 4, "all parts running");
  assert.deepEqual(orchestrator.running(), ALL_PARTS);
  await until(() => events.length === 2, "the namespace listing");
  assert.deepEqual(events, ["namespaces followed", "CRDs followed"]);

  controller.abort();
  // All told at once: the streams and the idle collector stopped while the intake still stops;
  // the run waits for the intake (the first group).
  await until(() => orchestrator.running().length === 1, "all but the CRD following stopped");
  assert.deepEqual(orchestrator.running(), ["the CRD following"]);
  assert.deepEqual(events, ["namespaces followed", "CRDs followed", "namespaces stopped"]);
  await sleep(50);
  assert.equal(state.settled, false);

  release();
  await run;
  assert.deepEqual(orchestrator.running(), []);
  assert.equal(orchestrator.problems(), undefined); // stopped parts are not missing
  assert.deepEqual(failures, []);
});

Deno.test("Orchestrator: a CRD following that ends on its own is logged and reported, the operator goes on", async () => {
  const { orchestrator, controller, logs, failures } = fixture({
    followDefinitions: () => Promise.reject(new Error("boom")),
  });
  const { run, state } = started(orchestrator);
  await until(() => orchestrator.problems() !== undefined, "the problem reported");
  assert.equal(orchestrator.problems(), "The CRD following is not running: it exited");
  assert.ok(
    logs.some((e) => e.level === "error" && e.message === "Stopped following CRDs: Error: boom"),
  );
  assert.deepEqual(orchestrator.running(), [
    "the watch streams",
    "the namespace following",
    "the idle collector",
  ]);
  await sleep(50);
  assert.equal(state.settled, false); // it does not stop the orchestration
  assert.deepEqual(failures, []);

  controller.abort();
  await run;
  assert.equal(orchestrator.problems(), "The CRD following is not running: it exited");
});

Deno.test("Orchestrator: namespaces that cannot be watched, or idle collection turned off, are no missing parts", async () => {
  const { orchestrator, controller, settings, logs } = fixture({
    namespaces: ["team-*", "default"],
    refuseNamespaces: true,
  });
  const { run } = started(orchestrator);
  await until(
    () => logs.some((e) => e.message.startsWith("Cannot watch namespaces")),
    "the fallback to the literal names",
  );
  settings.process.idleGcDelay = null; // the collector's next round ends it
  await sleep(150);
  assert.equal(orchestrator.problems(), undefined);
  assert.deepEqual(orchestrator.running(), ALL_PARTS); // both stay until the stop
  controller.abort();
  await run;
  assert.deepEqual(orchestrator.running(), []);
});

Deno.test("Orchestrator: no idle collector without idle collection, no following without scanning", async () => {
  for (
    const [init, parts] of [
      [{ idleGcDelay: null }, ALL_PARTS.slice(0, 3)],
      [{ scanningDisabled: true }, ["the watch streams", "the idle collector"]],
      [{ namespaces: ["default"] }, [
        "the watch streams",
        "the CRD following",
        "the idle collector",
      ]],
    ] as const
  ) {
    const { orchestrator, controller, events } = fixture(init);
    const { run } = started(orchestrator);
    await until(() => orchestrator.running().length === parts.length, `${parts}`);
    await sleep(20);
    assert.deepEqual(orchestrator.running(), parts, JSON.stringify(init));
    if ("scanningDisabled" in init) assert.deepEqual(events, []);
    controller.abort();
    await run;
  }
});
