// The operator's scope: built once from the operator's parts, handed to the cycle's phases, and
// a leaf phase runs with a literal of only the two parts it reads.
import assert from "node:assert/strict";
import { allAtOnce } from "../../actions/lifecycles.ts";
import { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import { createSettings } from "../../settings/settings.ts";
import { Patch } from "../../structs/patches.ts";
import { AdmissionGate } from "../../util/gate.ts";
import { Semaphore } from "../../util/semaphore.ts";
import {
  changingHandler,
  FakeApi,
  FakeClock,
  memoryOf,
  objectOf,
  RESOURCE,
} from "../causes/cycle/_test_support.ts";
import { detectCause } from "../causes/cycle/causation.ts";
import { executeHandlers } from "../causes/cycle/execution.ts";
import { openCycle } from "../causes/cycle/opening.ts";
import { applyOutcomes } from "../causes/cycle/outcomes.ts";
import { selectHandlers } from "../causes/cycle/selection.ts";
import { operatorScope, resourceScope } from "./scope.ts";

function parts(settings = createSettings()) {
  const api = new FakeApi();
  return {
    api,
    parts: {
      client: {} as KubeClient,
      api: api.api,
      registry: new OperatorRegistry(),
      settings,
      logger: new Logger(["kopf", "test"]),
      memo: { shared: 1 },
      namespaces: [],
      clusterwide: true,
      signal: new AbortController().signal,
    },
  };
}

Deno.test("operatorScope(): the given parts, and the limiter, gate, indices and readiness made once from them", () => {
  const { parts: given } = parts(
    createSettings({ execution: { maxWorkers: 3 }, queueing: { admissionLimit: 5 } }),
  );
  const scope = operatorScope(given);
  assert.equal(scope.api, given.api);
  assert.equal(scope.memo, given.memo);
  assert.ok(scope.limiter instanceof Semaphore);
  assert.ok(scope.gate instanceof AdmissionGate);
  assert.deepEqual(Object.keys(scope.indexers.indices), []);
  assert.equal(scope.readiness.ready, false, "opened by the orchestrator once streams listed");
  assert.equal(scope.shared, undefined, "no reconcile handler: no shared cache");
  assert.equal(typeof scope.lifecycle, "function", "the default lifecycle");

  const unlimited = operatorScope(
    parts(createSettings({ execution: { maxWorkers: 0 }, queueing: { admissionLimit: 0 } })).parts,
  );
  assert.equal(unlimited.limiter, undefined);
  assert.equal(unlimited.gate, undefined);

  const handlers = { changing: [], watching: [], spawning: [], indexing: [] };
  const stream = new AbortController();
  const resource = resourceScope(scope, RESOURCE, handlers, stream.signal);
  assert.equal(resource.resource, RESOURCE);
  assert.equal(resource.signal, stream.signal, "the stream's own signal");
  assert.equal(resource.indexers, scope.indexers, "one set of indices for the operator");
  assert.equal(resourceScope(scope, RESOURCE, handlers).signal, scope.signal);
});

Deno.test("one scope for the cycle's phases; a leaf phase runs with a literal of the two parts it reads", async () => {
  const { parts: given, api } = parts();
  const clock = new FakeClock();
  const calls: string[] = [];
  const changing = [
    changingHandler("a", "create", () => void calls.push("a")),
    changingHandler("b", "create", () => void calls.push("b")),
  ];
  const scope = operatorScope({ ...given, lifecycle: allAtOnce, now: clock.now });
  const stream = resourceScope(scope, RESOURCE, {
    changing,
    watching: [],
    spawning: [],
    indexing: [],
  });
  const body = api.put(objectOf());
  const cycle = openCycle(stream, memoryOf(), { type: "ADDED", body }, new Patch());
  assert.equal(detectCause(stream, cycle), undefined);
  assert.equal(selectHandlers(stream, cycle), undefined);
  await executeHandlers({ ...stream, gate: undefined }, cycle);
  assert.deepEqual(calls, ["a", "b"]);

  // applyOutcomes reads only the changing handlers and the settings (the clock is optional).
  const end = applyOutcomes({ changing, settings: scope.settings }, cycle);
  assert.deepEqual(end, { delay: undefined });
  assert.equal(cycle.memory.handledOnce, true, "the cause is complete");
  assert.ok(cycle.patch.body, "the diff-base is in the cycle's patch");
});
