import assert from "node:assert/strict";
import type { KubeObject } from "../structs/objects.ts";
import type { KubeApi } from "./api.ts";
import { ApiError } from "./errors.ts";
import type { ByteStream } from "./raw_stream.ts";
import { MalformedWatchLine, type RawWatchEvent, type WatcherEvent } from "./watch_events.ts";
import {
  CONNECTED,
  ENDED,
  INITIAL_WATCH_STATE,
  LISTED,
  READ,
  START,
  type WatchInput,
  type WatchRules,
  type WatchState,
  type WatchStep,
  watchStep,
} from "./watch_machine.ts";
import { WatchClientTimeoutError, WatchStalledError } from "./watch_options.ts";
import { watcher } from "./watching.ts";
import { WatchLineTooLongError } from "./watch_stream.ts";

const RULES: WatchRules = {
  initialStreaming: false,
  accept: undefined,
  maxDepth: undefined,
  reconnectBackoffMs: 100,
  backoff: { initialMs: 200, jitter: 0.5, random: () => 0 },
  request: { method: "GET", path: "watch configmaps", server: "https://k8s" },
};

function cm(name: string, resourceVersion: string, extra: Partial<KubeObject> = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: "ns", uid: `uid-${name}`, resourceVersion },
    ...extra,
  };
}

function line(type: RawWatchEvent["type"], object: KubeObject): WatchInput {
  return { type: "line", line: { type, object } };
}

/** An object nested `levels` deep below `spec`. */
function deep(name: string, levels: number): KubeObject {
  let nested: Record<string, unknown> = {};
  for (let i = 0; i < levels; i++) nested = { a: nested };
  return cm(name, "9", { spec: nested });
}

/** Runs the inputs from the state, returning every step. */
function run(
  state: WatchState,
  inputs: readonly WatchInput[],
  rules: WatchRules = RULES,
): WatchStep[] {
  const steps: WatchStep[] = [];
  for (const input of inputs) {
    const step = watchStep(state, input, rules);
    steps.push(step);
    state = step.state;
  }
  return steps;
}

/** A state watching from `resourceVersion`, connected. */
function watching(resourceVersion: string, extra: Partial<WatchState> = {}): WatchState {
  return { ...INITIAL_WATCH_STATE, phase: "watching", resourceVersion, reason: "end", ...extra };
}

Deno.test("watchStep: start without a position lists; the list's pages, then a watch from its resourceVersion", () => {
  const [start, page1, page2, listed, connected] = run(INITIAL_WATCH_STATE, [
    START,
    { type: "page", page: { items: [cm("a", "5")], metadata: { resourceVersion: "10" } } },
    { type: "page", page: { items: [cm("b", "7")], metadata: { resourceVersion: "11" } } },
    LISTED,
    CONNECTED,
  ]);
  assert.deepEqual(start!.emit, { type: "init" });
  assert.deepEqual(start!.action, { type: "list" });
  assert.equal(start!.state.phase, "listing");
  assert.deepEqual(page1!.emit, [{ type: "initApply", object: cm("a", "5") }]);
  assert.equal(page1!.action, READ);
  assert.deepEqual(page2!.emit, [{ type: "initApply", object: cm("b", "7") }]);
  assert.equal(page2!.state.resourceVersion, undefined, "no position until the list is done");
  assert.deepEqual(listed!.emit, { type: "initDone", resourceVersion: "11" });
  assert.deepEqual(listed!.action, {
    type: "watch",
    resourceVersion: "11",
    sendInitialEvents: false,
  });
  assert.equal(listed!.state.phase, "connecting");
  assert.deepEqual(connected!.emit, {
    type: "connected",
    resourceVersion: "11",
    reason: "initial",
  });
  assert.equal(connected!.state.phase, "watching");
  assert.equal(connected!.state.reason, "end", "the next request opens after this one ends");
});

Deno.test("watchStep: a list applies the client-side filter and refuses objects nested too deep", () => {
  const rules = { ...RULES, accept: (o: KubeObject) => o.metadata?.name !== "other", maxDepth: 5 };
  const [, page] = run(INITIAL_WATCH_STATE, [START, {
    type: "page",
    page: { items: [cm("a", "1"), cm("other", "2"), deep("deep", 10)] },
  }], rules);
  const events = page!.emit as WatcherEvent[];
  assert.deepEqual(events.map((e) => e.type), ["initApply", "refused"]);
  assert.match((events[1] as { reason: string }).reason, /"ns\/deep" nested deeper than 5/);
  assert.equal(page!.state.listedVersion, "", "a page without a resourceVersion keeps the last");
});

Deno.test("watchStep: a streaming list watches with sendInitialEvents; its bookmark ends the initial events and gives the position", () => {
  const rules = { ...RULES, initialStreaming: true };
  const end = {
    ...cm("", "20"),
    metadata: { resourceVersion: "20", annotations: { "k8s.io/initial-events-end": "true" } },
  };
  const steps = run(INITIAL_WATCH_STATE, [
    START,
    CONNECTED,
    line("ADDED", cm("a", "3")),
    line("MODIFIED", cm("a", "4")), // not part of the initial events: ignored
    line("BOOKMARK", { metadata: { resourceVersion: "15" } }), // an ordinary bookmark: ignored
    line("BOOKMARK", end),
    line("MODIFIED", cm("a", "21")),
  ], rules);
  const [start, connected, added, modified, bookmark, ended, after] = steps;
  assert.deepEqual(start!.emit, { type: "init" });
  assert.deepEqual(start!.action, {
    type: "watch",
    resourceVersion: undefined,
    sendInitialEvents: true,
  });
  assert.deepEqual(connected!.emit, { type: "connected", resourceVersion: "", reason: "initial" });
  assert.deepEqual(added!.emit, { type: "initApply", object: cm("a", "3") });
  assert.equal(added!.state.resourceVersion, undefined, "objects' versions are not a position");
  assert.equal(modified!.emit, undefined);
  assert.equal(bookmark!.emit, undefined);
  assert.equal(bookmark!.state.resourceVersion, undefined);
  assert.deepEqual(ended!.emit, { type: "initDone", resourceVersion: "20" });
  assert.equal(ended!.state.streaming, false);
  assert.deepEqual(after!.emit, { type: "apply", object: cm("a", "21"), raw: "MODIFIED" });
  assert.equal(after!.state.resourceVersion, "21");
});

Deno.test("watchStep: watch events become apply/delete/bookmark and move the position; filtered ones move it too", () => {
  const rules = { ...RULES, accept: (o: KubeObject) => o.metadata?.name !== "other", maxDepth: 5 };
  const [added, modified, filtered, deleted, bookmark, bare, tooDeep, deepGone] = run(
    watching("10"),
    [
      line("ADDED", cm("a", "11")),
      line("MODIFIED", cm("a", "12")),
      line("MODIFIED", cm("other", "13")),
      line("DELETED", cm("a", "14")),
      line("BOOKMARK", { metadata: { resourceVersion: "15" } }),
      line("BOOKMARK", { metadata: {} }),
      line("MODIFIED", deep("d", 10)),
      line("DELETED", deep("d", 10)),
    ],
    rules,
  );
  assert.deepEqual(added!.emit, { type: "apply", object: cm("a", "11"), raw: "ADDED" });
  assert.equal(added!.state.resourceVersion, "11");
  assert.deepEqual(modified!.emit, { type: "apply", object: cm("a", "12"), raw: "MODIFIED" });
  assert.equal(filtered!.emit, undefined);
  assert.equal(filtered!.state.resourceVersion, "13");
  assert.deepEqual(deleted!.emit, { type: "delete", object: cm("a", "14") });
  assert.deepEqual(bookmark!.emit, { type: "bookmark", resourceVersion: "15" });
  assert.deepEqual(bare!.emit, { type: "bookmark", resourceVersion: "15" });
  assert.equal(bare!.state, bookmark!.state, "nothing changed: the same state object");
  assert.equal((tooDeep!.emit as WatcherEvent).type, "refused");
  const gone = deepGone!.emit as { type: string; object: KubeObject };
  assert.equal(gone.type, "delete", "a refused object's deletion is still reported");
  assert.deepEqual(gone.object, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: deep("d", 0).metadata,
  });
  for (const step of [added, modified, filtered, deleted, bookmark, bare, tooDeep, deepGone]) {
    assert.equal(step!.action, READ);
  }
});

Deno.test("watchStep: a line that is not a usable event is skipped; the stream goes on", () => {
  const [notJson, noName] = run(watching("10"), [
    { type: "line", line: new MalformedWatchLine(42) },
    line("ADDED", { metadata: {} }),
  ]);
  assert.deepEqual(notJson!.emit, {
    type: "skipped",
    reason: "a line that is not JSON (42 characters)",
  });
  assert.match((noName!.emit as { reason: string }).reason, /without metadata.name/);
  assert.equal(noName!.action, READ);
  assert.equal(noName!.state.resourceVersion, "10");
});

Deno.test("watchStep: 410 Gone relists at once without an error, from an ERROR event or an answer", () => {
  for (
    const input of [
      line("ERROR", { code: 410, reason: "Expired", message: "too old" } as KubeObject),
      {
        type: "failed",
        error: new ApiError({ code: 410, reason: "Gone", message: "", request: RULES.request }),
      } as const,
    ]
  ) {
    const step = watchStep(watching("10", { failures: 2 }), input, RULES);
    assert.deepEqual(step.emit, { type: "init" });
    assert.deepEqual(step.action, { type: "list" });
    assert.equal(step.state.resourceVersion, undefined);
    assert.equal(step.state.reason, "gone");
  }
  // A failure while connecting, with a streaming list: the streaming list again.
  const connecting = {
    ...INITIAL_WATCH_STATE,
    phase: "connecting",
    resourceVersion: "10",
  } as const;
  const expired = new ApiError({
    code: 500,
    reason: "Expired",
    message: "",
    request: RULES.request,
  });
  const step = watchStep(connecting, { type: "failed", error: expired }, {
    ...RULES,
    initialStreaming: true,
  });
  assert.deepEqual(step.action, {
    type: "watch",
    resourceVersion: undefined,
    sendInitialEvents: true,
  });
});

Deno.test("watchStep: other failures are reported and retried after a growing backoff (or Retry-After); an event resets it", () => {
  const status = { code: 500, reason: "InternalError", message: "etcd" } as KubeObject;
  const [first, , , second, , , , afterEvent] = run(watching("10"), [
    line("ERROR", status),
    START,
    CONNECTED,
    { type: "failed", error: new TypeError("connection reset") },
    START,
    CONNECTED,
    line("ADDED", cm("a", "11")),
    { type: "failed", error: new Error("again") },
  ]);
  const error = first!.emit as { type: string; error: ApiError; retryInMs: number };
  assert.equal(error.type, "error");
  assert.equal(error.error.code, 500);
  assert.match(error.error.message, /etcd \[GET watch configmaps\]/);
  assert.equal(error.retryInMs, 200);
  assert.deepEqual(first!.action, { type: "wait", ms: 200 });
  assert.equal(first!.state.phase, "idle");
  assert.equal(first!.state.reason, "error");
  assert.equal(first!.state.resourceVersion, "10", "the position is kept");
  assert.deepEqual(second!.action, { type: "wait", ms: 400 });
  assert.deepEqual(afterEvent!.action, { type: "wait", ms: 200 }, "an event resets the backoff");
  // Jitter from the injected source: up to half the delay off.
  const jittered = watchStep(watching("10"), { type: "failed", error: new Error("x") }, {
    ...RULES,
    backoff: { initialMs: 200, jitter: 0.5, random: () => 1 },
  });
  assert.deepEqual(jittered.action, { type: "wait", ms: 100 });
  // A 429 waits as long as the server asks.
  const busy = new ApiError({
    code: 429,
    reason: "TooManyRequests",
    message: "",
    request: RULES.request,
    retryAfterMs: 3000,
  });
  const step = watchStep(watching("10"), { type: "failed", error: busy }, RULES);
  assert.deepEqual(step.action, { type: "wait", ms: 3000 });
  assert.equal(step.state.failures, 1);
  // A line over the cap (16 MiB) closed the stream: reported, retried after the backoff.
  const long = watchStep(watching("10"), {
    type: "failed",
    error: new WatchLineTooLongError(16 * 1024 * 1024, "configmaps"),
  }, RULES);
  assert.ok((long.emit as { error: Error }).error instanceof WatchLineTooLongError);
  assert.deepEqual(long.action, { type: "wait", ms: 200 });
  assert.equal(long.state.reason, "error");
  assert.equal(long.state.resourceVersion, "10", "resumed from the position, not relisted");
  // Not an Error: wrapped.
  const odd = watchStep(watching("10"), { type: "failed", error: "boom" }, RULES);
  assert.equal((odd.emit as { error: Error }).error.message, "boom");
});

Deno.test("watchStep: silence reconnects at once; the first silence of an answered stream is routine, a repeated one is not", () => {
  const [first, start, connected, second, , , line1, third] = run(watching("10"), [
    { type: "failed", error: new WatchStalledError(90_000) },
    START,
    CONNECTED,
    { type: "failed", error: new WatchStalledError(90_000) },
    START,
    CONNECTED,
    line("BOOKMARK", { metadata: { resourceVersion: "11" } }),
    { type: "failed", error: new WatchStalledError(90_000) },
  ]);
  const stalled = (step: WatchStep) => (step.emit as unknown as { error: WatchStalledError }).error;
  assert.deepEqual(first!.action, { type: "wait", ms: 0 });
  assert.equal(stalled(first!).connected, true);
  assert.equal(stalled(first!).repeated, false);
  assert.equal(first!.state.silent, true);
  assert.equal(first!.state.reason, "stall");
  assert.equal(first!.state.failures, 0, "a stall does not grow the backoff");
  assert.deepEqual(start!.action, {
    type: "watch",
    resourceVersion: "10",
    sendInitialEvents: false,
  });
  assert.deepEqual(connected!.emit, { type: "connected", resourceVersion: "10", reason: "stall" });
  assert.equal(stalled(second!).repeated, true);
  assert.equal(line1!.state.silent, false);
  assert.equal(stalled(third!).repeated, false, "something arrived since");
  // A request never answered: not connected, whatever came before.
  const connecting = {
    ...INITIAL_WATCH_STATE,
    phase: "connecting",
    resourceVersion: "10",
  } as const;
  const unanswered = watchStep(connecting, {
    type: "failed",
    error: new WatchStalledError(90_000),
  }, RULES);
  assert.equal(stalled(unanswered).connected, false);
  assert.deepEqual(unanswered.action, { type: "wait", ms: 0 });
});

Deno.test("watchStep: a stream ended by the server or by the client-side timeout resumes from the position after the pause", () => {
  const [ended, start, connected] = run(watching("12"), [ENDED, START, CONNECTED]);
  assert.equal(ended!.emit, undefined);
  assert.deepEqual(ended!.action, { type: "wait", ms: 100 });
  assert.deepEqual(start!.action, {
    type: "watch",
    resourceVersion: "12",
    sendInitialEvents: false,
  });
  assert.deepEqual(connected!.emit, { type: "connected", resourceVersion: "12", reason: "end" });
  const timeout = new WatchClientTimeoutError(30_000);
  const cut = watchStep(watching("12"), { type: "failed", error: timeout }, RULES);
  assert.equal(cut.emit, undefined, "not an error once connected");
  assert.deepEqual(cut.action, { type: "wait", ms: 100 });
  // Before any answer, the client-side timeout is a stall: reported, retried at once.
  const connecting = {
    ...INITIAL_WATCH_STATE,
    phase: "connecting",
    resourceVersion: "12",
  } as const;
  const early = watchStep(connecting, { type: "failed", error: timeout }, RULES);
  assert.equal((early.emit as { error: Error }).error, timeout);
  assert.deepEqual(early.action, { type: "wait", ms: 0 });
  assert.equal(early.state.reason, "stall");
});

// The driver on a fake API: the order of requests and events, no network, no timers beyond 0 ms.
Deno.test("watcher() drives the steps: list, watch, an ERROR 410 ends the request and relists, a normal end resumes", async () => {
  const encoder = new TextEncoder();
  const controller = new AbortController();
  const requests: string[] = [];
  const closed: number[] = [];
  const bodies = [
    [
      { type: "ADDED", object: cm("b", "21") },
      { type: "ERROR", object: { code: 410, reason: "Expired", message: "too old" } },
      { type: "MODIFIED", object: cm("b", "22") }, // after the ERROR: never read
    ],
    [{ type: "BOOKMARK", object: { metadata: { resourceVersion: "40" } } }],
  ];
  let lists = 0;
  const api = {
    http: { connection: { server: "https://k8s" } },
    async *listPages() {
      lists++;
      yield { items: [cm("a", "5")], metadata: { resourceVersion: "20" } };
      yield {
        items: lists === 1 ? [] : [cm("b", "30")],
        metadata: { resourceVersion: `${lists}0` },
      };
    },
    watchBytes(_: unknown, options: { resourceVersion?: string }) {
      requests.push(options.resourceVersion ?? "");
      const body = bodies.shift();
      if (!body) {
        controller.abort();
        return Promise.reject(new Error("stopped"));
      }
      const n = requests.length;
      let sent = false;
      const stream: ByteStream = {
        read: () => {
          if (sent) return Promise.resolve(null);
          sent = true;
          return Promise.resolve(encoder.encode(body.map((e) => JSON.stringify(e)).join("\n")));
        },
        close: () => void closed.push(n),
      };
      return Promise.resolve(stream);
    },
  } as unknown as KubeApi;
  const events: string[] = [];
  const resource = { group: "", version: "v1", plural: "configmaps", namespaced: true };
  for await (
    const event of watcher(api, resource, { reconnectBackoffMs: 0, signal: controller.signal })
  ) {
    const e = event as { type: string; object?: KubeObject; resourceVersion?: string };
    events.push([e.type, e.object?.metadata?.name ?? e.resourceVersion ?? ""].join(" "));
  }
  assert.deepEqual(events, [
    "init ",
    "initApply a",
    "initDone 10",
    "connected 10",
    "apply b",
    "init ",
    "initApply a",
    "initApply b",
    "initDone 20",
    "connected 20",
    "bookmark 40",
  ]);
  assert.deepEqual(requests, ["10", "20", "40"]);
  assert.deepEqual(closed, [1, 2], "each watch body closed");
});
