import assert from "node:assert/strict";
import { createSettings } from "../settings/settings.ts";
import { watchingOptions } from "./watching.ts";

Deno.test("watchingOptions() converts settings.watching to the watcher's milliseconds (CFG-40, CFG-42, K26-03)", () => {
  const { watching } = createSettings();
  assert.deepEqual(watchingOptions(watching), {
    serverTimeoutSeconds: 300,
    inactivityTimeoutMs: 70_000, // Kopf 1.44+ (K26-03)
    reconnectBackoffMs: 100,
    connectTimeoutMs: undefined, // the client's connect timeout, then its request timeout
    clientTimeoutMs: undefined, // no limit
  });
  watching.connectTimeout = 2.5;
  watching.clientTimeout = 30;
  watching.serverTimeout = null;
  const options = watchingOptions(watching);
  assert.equal(options.connectTimeoutMs, 2_500);
  assert.equal(options.clientTimeoutMs, 30_000);
  assert.equal(options.serverTimeoutSeconds, null); // none sent (the server's default)
});
