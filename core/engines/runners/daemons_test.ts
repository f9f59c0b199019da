import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import type { ResourceContext } from "../../intents/contexts.ts";
import type { SpawningHandler } from "../../intents/handlers.ts";
import { createSettings } from "../../settings/settings.ts";
import type { Resource } from "../../structs/resources.ts";
import { Spawner } from "./daemons.ts";

Deno.test("Spawner spawns nothing while peering pauses the operator, and spawns after the resume (K26-08)", async () => {
  const controller = new AbortController();
  const pause = { paused: true };
  let runs = 0;
  const handler = {
    kind: "spawning",
    spawn: "daemon",
    id: "dmn",
    fn: () => {
      runs++;
    },
  } as unknown as SpawningHandler;
  const spawner = new Spawner({
    api: {} as KubeApi,
    resource: { plural: "kopfexamples" } as Resource,
    settings: createSettings().background,
    logger: new Logger(["test"]),
    context: () => ({}) as ResourceContext,
    wake: () => {},
    signal: controller.signal,
    paused: pause,
  });
  const body = { metadata: { name: "a", uid: "u" } };
  // A cycle that began before the pause reaches its spawning step while paused.
  spawner.adjust([handler], body, { deleted: false, changed: false });
  assert.equal(spawner.size, 0, "not spawned while paused");
  pause.paused = false; // the resume's relist runs a cycle
  spawner.adjust([handler], body, { deleted: false, changed: false });
  assert.equal(spawner.size, 1, "spawned after the resume");
  controller.abort();
  await spawner.stopAll(1);
  assert.ok(runs <= 1);
});
