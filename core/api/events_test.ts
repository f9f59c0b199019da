// Unit tests of the explicit Events API: which calls queue an Event under which settings.
import assert from "node:assert/strict";
import type { KubeApi } from "../client/api.ts";
import { EventPoster, withPoster } from "../engines/observability/posting.ts";
import { createSettings, type PostingSettings } from "../settings/settings.ts";
import type { KubeObject } from "../structs/objects.ts";
import { event, exception, info, warn } from "./events.ts";

const KEX: KubeObject = {
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  metadata: { name: "kex1", namespace: "ns", uid: "u1" },
};

async function queued(posting: Partial<PostingSettings>): Promise<number> {
  const poster = new EventPoster({} as unknown as KubeApi, createSettings({ posting }).posting);
  await withPoster(poster, () => {
    event(KEX, { type: "SomeType", reason: "R", message: "event" });
    info(KEX, { reason: "R", message: "info" });
    warn(KEX, { reason: "R", message: "warn" });
    exception(KEX, { error: new Error("boom") });
    return Promise.resolve();
  });
  return poster.pending;
}

Deno.test("event(), info(), warn(), exception() post with loggers off, the default (LOG-08, K26-01)", async () => {
  assert.equal(await queued({}), 4);
  assert.equal(await queued({ loggers: true }), 4);
});

Deno.test("info(), warn(), exception() obey settings.posting.level as in Kopf; event() does not (CFG-21)", async () => {
  assert.equal(await queued({ level: "debug" }), 4);
  assert.equal(await queued({ level: "warning" }), 3);
  assert.equal(await queued({ level: "error" }), 2);
  assert.equal(await queued({ level: "critical" }), 1);
});

Deno.test("explicit Events obey settings.posting.enabled (CFG-20)", async () => {
  assert.equal(await queued({ enabled: false }), 0);
});
