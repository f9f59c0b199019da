import assert from "node:assert/strict";
import { createSettings } from "../settings/settings.ts";
import { Emulator } from "../../kits/emulator/mod.ts";
import { KubeClient } from "./client.ts";
import { loadKubeconfig } from "./config.ts";
import { CONFIGMAPS } from "./_test_support.ts";
import { isRoutineSilence, watcher, watchingOptions, WatchStalledError } from "./watching.ts";

Deno.test("watchingOptions() converts settings.watching to the watcher's milliseconds (CFG-40, CFG-42, K26-03)", () => {
  const { watching } = createSettings();
  assert.deepEqual(watchingOptions(watching), {
    serverTimeoutSeconds: 300,
    inactivityTimeoutMs: 90_000, // above kube-apiserver's bookmark period (~60 s), with margin
    reconnectBackoffMs: 100,
    connectTimeoutMs: undefined, // the client's connect timeout, then its request timeout
    clientTimeoutMs: undefined, // no limit
    maxDepth: 1000, // deeper objects are refused at the door
  });
  watching.maxDepth = Infinity;
  assert.equal("maxDepth" in watchingOptions(watching), false, "Infinity: no limit");
  watching.connectTimeout = 2.5;
  watching.clientTimeout = 30;
  watching.serverTimeout = null;
  const options = watchingOptions(watching);
  assert.equal(options.connectTimeoutMs, 2_500);
  assert.equal(options.clientTimeoutMs, 30_000);
  assert.equal(options.serverTimeoutSeconds, null); // none sent (the server's default)
});

Deno.test("a watch stream's first silence is routine (INFO), a second in a row is not (WARNING)", {
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  // No bookmarks within the test: the stream stays silent past the (short) inactivity timeout.
  await using emulator = await Emulator.start({ bookmarkIntervalMs: 600_000 });
  using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
  const controller = new AbortController();
  const errors: Error[] = [];
  for await (
    const event of watcher(client.api, CONFIGMAPS, {
      namespace: "default",
      inactivityTimeoutMs: 300,
      signal: controller.signal,
    })
  ) {
    if (event.type === "error") errors.push(event.error);
    if (errors.length === 2) controller.abort();
  }
  const [first, second] = errors;
  assert.ok(first instanceof WatchStalledError && first.connected, String(first));
  assert.match(first.message, /silent for 300 ms \(no events, no bookmarks/);
  assert.equal(isRoutineSilence(first), true);
  assert.ok(second instanceof WatchStalledError && second.repeated, String(second));
  assert.equal(isRoutineSilence(second), false);
  assert.equal(isRoutineSilence(new Error("connection refused")), false);
});
