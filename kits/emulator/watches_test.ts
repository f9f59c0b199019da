import assert from "node:assert/strict";
import { KubeClient } from "../../core/client/client.ts";
import { loadKubeconfig } from "../../core/client/config.ts";
import { Emulator } from "./mod.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "periodic bookmarks come also on a resource nothing changes, as kube-apiserver's",
  opts,
  async () => {
    await using emulator = await Emulator.start({ bookmarkIntervalMs: 100 });
    using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    const secrets = { group: "", version: "v1", plural: "secrets", namespaced: true };
    const { resourceVersion } = await client.api.list(secrets, { namespace: "default" });
    const response = await client.api.watch(secrets, {
      namespace: "default",
      resourceVersion,
      allowBookmarks: true,
    });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    const bound = setTimeout(() => reader.cancel().catch(() => {}), 10_000);
    try {
      const { value } = await reader.read(); // no write anywhere: only a bookmark can come
      assert.ok(value, "no bookmark within 10 s (the interval is 0.1 s)");
      assert.equal(JSON.parse(value.split("\n")[0]!).type, "BOOKMARK");
    } finally {
      clearTimeout(bound);
      await reader.cancel().catch(() => {});
    }
  },
);
