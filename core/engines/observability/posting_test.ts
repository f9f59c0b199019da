// Unit tests of the Events poster's message shortening and filtering; nothing is posted here
// (the queue is inspected through `pending`, and `run()`/`flush()` are never called).
import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import type { KubeApi } from "../../client/api.ts";
import { createSettings, type PostingSettings } from "../../settings/settings.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { EventPoster, shortenMessage } from "./posting.ts";

const NO_API = {} as unknown as KubeApi;
const KEX: KubeObject = {
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  metadata: { name: "kex1", namespace: "ns", uid: "u1" },
};

function setup(posting: Partial<PostingSettings> = {}) {
  const settings = createSettings({ posting }).posting;
  const poster = new EventPoster(NO_API, settings);
  const root = new Logger(["kopf"], { listeners: [poster.listener] });
  return { settings, poster, root, objectLogger: root.forObject(KEX) };
}

// --- shortenMessage ----------------------------------------------------------------------------

Deno.test("shortenMessage() keeps messages up to 1024 characters (LOG-14, SUB-70)", () => {
  assert.equal(shortenMessage(""), "");
  assert.equal(shortenMessage("short"), "short");
  const exact = "x".repeat(1024);
  assert.equal(shortenMessage(exact), exact);
});

Deno.test("shortenMessage() cuts the middle of longer messages to 1024 characters (LOG-14, SUB-70)", () => {
  for (const length of [1025, 1500, 10_000]) {
    const message = Array.from({ length }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
    const short = shortenMessage(message);
    assert.equal(short.length, 1024, `for ${length}`);
    const cut = short.indexOf("...");
    assert.ok(cut > 0, "has the infix");
    const head = short.slice(0, cut);
    const tail = short.slice(cut + 3);
    assert.equal(head.length + tail.length, 1021);
    assert.ok(Math.abs(head.length - tail.length) <= 1, "cut in the middle");
    assert.ok(message.startsWith(head));
    assert.ok(message.endsWith(tail));
  }
});

// --- listener filtering ----------------------------------------------------------------------------

Deno.test("EventPoster.listener queues no log messages by default: settings.posting.loggers is off, as in Kopf 1.44+ (K26-01)", () => {
  const { poster, settings, objectLogger, root } = setup();
  assert.equal(settings.loggers, false);
  assert.equal(settings.enabled, true);
  for (const level of ["debug", "info", "warning", "error", "critical"] as const) {
    objectLogger.log(level, level);
    assert.equal(poster.listener.accepts!(level, false), false);
  }
  root.forObject(KEX).exception("exception", new Error("x"));
  assert.equal(poster.pending, 0);
  poster.enqueue({
    ref: { kind: "KopfExample", name: "kex1" },
    type: "Normal",
    reason: "R",
    message: "explicit",
  });
  assert.equal(poster.pending, 1, "explicit Events are still posted");
  settings.loggers = true; // read live
  objectLogger.info("info");
  assert.equal(poster.pending, 2);
});

Deno.test("EventPoster.listener queues object messages at info and above with loggers on (LOG-07, CFG-21)", () => {
  const { poster, objectLogger } = setup({ loggers: true });
  objectLogger.debug("debug");
  assert.equal(poster.pending, 0);
  objectLogger.info("info");
  assert.equal(poster.pending, 1);
  objectLogger.warning("warning");
  objectLogger.error("error");
  objectLogger.exception("exception", new Error("x"));
  objectLogger.log("critical", "critical");
  assert.equal(poster.pending, 5);
});

Deno.test("EventPoster.listener honours the level threshold, read live (CFG-21, LOG-07)", () => {
  const { poster, settings, objectLogger } = setup({ level: "warning", loggers: true });
  objectLogger.info("info");
  assert.equal(poster.pending, 0);
  objectLogger.warning("warning");
  assert.equal(poster.pending, 1);
  settings.level = "debug";
  objectLogger.debug("debug");
  assert.equal(poster.pending, 2);
  settings.level = "error";
  objectLogger.warning("warning again");
  assert.equal(poster.pending, 2);
});

Deno.test("EventPoster.listener skips local object loggers (HK-EVT-02, LOG-06)", () => {
  const { poster, root } = setup({ loggers: true });
  const local = root.forObject(KEX, { local: true });
  local.info("from an event handler");
  local.error("failure of an event handler");
  assert.equal(poster.pending, 0);
  root.forObject(KEX).info("not local");
  assert.equal(poster.pending, 1);
});

Deno.test("EventPoster.listener skips messages not about an object (LOG-07)", () => {
  const { poster, root } = setup({ loggers: true });
  root.info("operator-level");
  root.child(["kopf", "activities"]).error("activity");
  assert.equal(poster.pending, 0);
});

Deno.test("EventPoster.listener drops messages about Event objects (LOG-12, SUB-70)", () => {
  const { poster, root } = setup({ loggers: true });
  const coreEvent = { apiVersion: "v1", kind: "Event", metadata: { name: "e1", namespace: "ns" } };
  const newEvent = { ...coreEvent, apiVersion: "events.k8s.io/v1" };
  root.forObject(coreEvent).info("about a core event");
  root.forObject(newEvent).info("about an events.k8s.io event");
  assert.equal(poster.pending, 0);
  const lookalike = { ...coreEvent, apiVersion: "example.com/v1" };
  root.forObject(lookalike).info("about a custom Event kind");
  assert.equal(poster.pending, 1);
});

Deno.test("EventPoster queues nothing when posting is disabled, read live (CFG-20, CFG-22)", () => {
  const { poster, settings, objectLogger } = setup({ enabled: false, loggers: true });
  objectLogger.error("error");
  poster.enqueue({
    ref: { kind: "KopfExample", name: "kex1" },
    type: "Normal",
    reason: "R",
    message: "m",
  });
  assert.equal(poster.pending, 0);
  settings.enabled = true;
  objectLogger.error("error");
  assert.equal(poster.pending, 1);
});

Deno.test("EventPoster.enqueue() queues explicit events but not events about Events (LOG-08, LOG-12)", () => {
  const { poster } = setup();
  poster.enqueue({
    ref: { apiVersion: "kopf.dev/v1", kind: "KopfExample", name: "kex1" },
    type: "Normal",
    reason: "SomeReason",
    message: "explicit",
  });
  assert.equal(poster.pending, 1);
  poster.enqueue({
    ref: { apiVersion: "v1", kind: "Event", name: "e1" },
    type: "Normal",
    reason: "SomeReason",
    message: "dropped",
  });
  assert.equal(poster.pending, 1);
});

Deno.test("EventPoster.listener.accepts() agrees with what the listener queues (live settings)", () => {
  const { settings, poster, root } = setup();
  const accepts = poster.listener.accepts!;
  const levels = ["debug", "info", "warning", "error", "critical"] as const;
  for (const loggers of [true, false]) {
    for (const enabled of [true, false]) {
      for (const minimum of levels) {
        Object.assign(settings, { loggers, enabled, level: minimum });
        for (const level of levels) {
          for (const local of [false, true]) {
            const before = poster.pending;
            root.forObject(KEX, { local }).log(level, "message");
            const queued = poster.pending > before;
            const what = `${loggers} ${enabled} ${minimum} ${level} ${local}`;
            assert.equal(accepts(level, local), queued, what);
          }
        }
      }
    }
  }
});
