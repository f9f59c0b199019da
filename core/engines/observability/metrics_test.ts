import assert from "node:assert/strict";
import { RequestCounters } from "../../client/counters.ts";
import {
  HandlerChildrenRetry,
  HandlerRetriesError,
  TemporaryError,
} from "../../actions/execution.ts";
import { Exposition, validateExposition } from "../../../tests/_prometheus.ts";
import { MetricsEngine } from "./metrics.ts";
import { counter, gauge, histogram } from "./metrics_custom.ts";
import { combineObservers, NULL_OBSERVER, outcomeLabel } from "./observers.ts";

const R = "kopfexamples.v1.kopf.dev";

async function scrape(engine: MetricsEngine): Promise<Exposition> {
  const { text, contentType } = await engine.exposition();
  assert.match(contentType, /^text\/plain; version=0\.0\.4/);
  await validateExposition(text);
  return new Exposition(text);
}

Deno.test("MetricsEngine counts handler runs by outcome, retries and durations", async () => {
  const engine = new MetricsEngine({ process: false });
  const info = { resource: R, handler: "create_fn", kind: "change" as const, retry: 0 };
  await engine.handler(
    info,
    () => Promise.resolve({ kind: "temporary", error: new TemporaryError("x"), delay: 1 }),
  );
  await engine.handler(
    { ...info, retry: 1 },
    () => Promise.resolve({ kind: "success", result: 1 }),
  );
  await engine.handler(
    { ...info, retry: 2 },
    () => Promise.resolve({ kind: "permanent", error: new HandlerRetriesError("x") }),
  );
  const x = await scrape(engine);
  const labels = { resource: R, handler: "create_fn", kind: "change" };
  assert.equal(x.value("kopf_handler_runs_total", { ...labels, outcome: "temporary" }), 1);
  assert.equal(x.value("kopf_handler_runs_total", { ...labels, outcome: "success" }), 1);
  assert.equal(x.value("kopf_handler_runs_total", { ...labels, outcome: "retries-exceeded" }), 1);
  assert.equal(x.value("kopf_handler_retries_total", labels), 2);
  assert.equal(x.value("kopf_handler_duration_seconds", labels), 3);
});

Deno.test("MetricsEngine classifies cycles as controller-runtime does", async () => {
  const engine = new MetricsEngine({ process: false });
  const info = { resource: R };
  await engine.cycle(info, () => Promise.resolve({}));
  await engine.cycle(info, () => Promise.resolve({ delay: 0 }));
  await engine.cycle(info, () => Promise.resolve({ delay: 60, failed: true }));
  await engine.cycle(info, () => Promise.resolve({ delay: 5 }));
  await assert.rejects(engine.cycle(info, () => Promise.reject(new Error("boom"))));
  const x = await scrape(engine);
  const c = { controller: R };
  assert.equal(x.value("controller_runtime_reconcile_total", { ...c, result: "success" }), 1);
  assert.equal(x.value("controller_runtime_reconcile_total", { ...c, result: "requeue" }), 1);
  assert.equal(x.value("controller_runtime_reconcile_total", { ...c, result: "requeue_after" }), 1);
  assert.equal(x.value("controller_runtime_reconcile_total", { ...c, result: "error" }), 2);
  assert.equal(x.value("controller_runtime_reconcile_errors_total", c), 2);
  assert.equal(x.value("controller_runtime_reconcile_time_seconds", c), 5);
});

Deno.test("MetricsEngine counts requests from the client's counters, earlier ones included", async () => {
  const counters = new RequestCounters();
  counters.record({ verb: "list", resource: "kopfexamples", code: 200 });
  const engine = new MetricsEngine({ process: false });
  engine.attachClient(counters, "127.0.0.1:6443");
  counters.record({ verb: "patch", resource: "kopfexamples", code: 200 }, 0.02);
  counters.record({ verb: "patch", resource: "kopfexamples", code: 0 }, 0.5);
  let x = await scrape(engine);
  const host = { host: "127.0.0.1:6443" };
  assert.equal(x.value("rest_client_requests_total", { ...host, verb: "list", method: "GET" }), 1);
  assert.equal(x.value("rest_client_requests_total", { verb: "patch", code: "200" }), 1);
  assert.equal(x.value("rest_client_requests_total", { verb: "patch", code: "<error>" }), 1);
  assert.equal(
    x.value("rest_client_request_duration_seconds", { verb: "patch", method: "PATCH" }),
    2,
  );
  // Requests before attaching have no duration to show.
  assert.equal(x.value("rest_client_request_duration_seconds", { verb: "list" }), 0);
  engine.close();
  counters.record({ verb: "patch", resource: "kopfexamples", code: 200 });
  x = await scrape(engine);
  assert.equal(x.value("rest_client_requests_total", { verb: "patch", code: "200" }), 1);
});

Deno.test("MetricsEngine reads holdings at scrape time, replacing vanished series", async () => {
  const engine = new MetricsEngine({ process: false });
  let inventory = [
    { resource: R, streams: 2, objects: 5, workers: 1, pending: 3, daemons: 4, timers: 1 },
  ];
  engine.attach({ inventory: () => inventory, paused: () => true, indices: () => ({ by_x: 7 }) });
  let x = await scrape(engine);
  assert.equal(x.value("kopf_objects", { resource: R }), 5);
  assert.equal(x.value("kopf_watch_streams", { resource: R }), 2);
  assert.equal(x.value("workqueue_depth", { name: R }), 3);
  assert.equal(x.value("controller_runtime_active_workers", { controller: R }), 1);
  assert.equal(x.value("kopf_daemons_running", { resource: R }), 4);
  assert.equal(x.value("kopf_timers_running", { resource: R }), 1);
  assert.equal(x.value("kopf_paused"), 1);
  assert.equal(x.value("kopf_index_keys", { index: "by_x" }), 7);
  inventory = [];
  x = await scrape(engine);
  assert.deepEqual(x.series("kopf_objects"), []);
});

Deno.test("MetricsEngine counts queue, watch and Event observations", async () => {
  const engine = new MetricsEngine({ process: false });
  engine.queued(R);
  engine.queued(R);
  engine.dequeued(R, 0.3);
  engine.retried(R);
  engine.watchConnected(R, "initial");
  engine.watchConnected(R, "gone");
  engine.watchEvent(R, "ADDED");
  engine.eventPosted("Normal", 3);
  engine.eventsDropped(4);
  const x = await scrape(engine);
  assert.equal(x.value("workqueue_adds_total", { name: R }), 2);
  assert.equal(x.value("workqueue_queue_duration_seconds", { name: R }), 1);
  assert.equal(x.value("workqueue_retries_total", { name: R }), 1);
  assert.equal(x.value("kopf_watch_connections_total", { resource: R, reason: "gone" }), 1);
  assert.equal(x.value("kopf_watch_events_total", { resource: R, type: "ADDED" }), 1);
  assert.equal(x.value("kopf_k8s_events_posted_total", { type: "Normal" }), 1);
  assert.equal(x.value("kopf_k8s_events_aggregated_total"), 2);
  assert.equal(x.value("kopf_k8s_events_dropped_total"), 4);
});

Deno.test("MetricsEngine.state() gives leader election its controller-runtime name", async () => {
  const engine = new MetricsEngine({ process: false });
  engine.state("leader", 1, { name: "kopf" });
  engine.state("shards_owned", 3);
  engine.state("shards_owned", 2);
  const x = await scrape(engine);
  assert.equal(x.value("leader_election_master_status", { name: "kopf" }), 1);
  assert.equal(x.value("kopf_shards_owned"), 2);
  assert.throws(() => engine.state("no good", 1), /Prometheus name/);
});

Deno.test("MetricsEngine includes the process metrics when asked", async () => {
  const engine = new MetricsEngine();
  const x = await scrape(engine);
  assert.ok(x.value("process_resident_memory_bytes") > 0);
  assert.ok(x.value("process_start_time_seconds") > 1_600_000_000);
  assert.ok(x.has("process_cpu_seconds_total"));
  assert.ok(x.has("process_open_fds"));
  assert.ok(x.has("nodejs_eventloop_lag_seconds"));
});

Deno.test("authors' metrics are served by every engine; redeclaring returns the same one", async () => {
  const c = counter({ name: "test_obs_things_total", help: "Things.", labelNames: ["kind"] });
  assert.equal(counter({ name: "test_obs_things_total", help: "Again.", labelNames: ["kind"] }), c);
  c.inc(2, { kind: "a" });
  const g = gauge({ name: "test_obs_level", help: "Level." });
  g.set(5);
  g.dec();
  const h = histogram({ name: "test_obs_call_seconds", help: "Calls.", buckets: [0.1, 1] });
  h.observe(0.5);
  for (
    const engine of [new MetricsEngine({ process: false }), new MetricsEngine({ process: false })]
  ) {
    const x = await scrape(engine);
    assert.equal(x.value("test_obs_things_total", { kind: "a" }), 2);
    assert.equal(x.value("test_obs_level"), 4);
    assert.equal(x.value("test_obs_call_seconds"), 1);
  }
  assert.throws(
    () => gauge({ name: "test_obs_things_total", help: "x" }),
    /already declared as a counter/,
  );
  assert.throws(() => counter({ name: "9lives", help: "x" }), /not a Prometheus name/);
  assert.throws(
    () => counter({ name: "ok_total", help: "x", labelNames: ["bad-label"] }),
    /label name/,
  );
});

Deno.test("outcomeLabel() names timeouts, exhausted retries and waiting parents", () => {
  assert.equal(
    outcomeLabel({ kind: "temporary", error: new HandlerChildrenRetry(1), delay: 1 }),
    "waiting",
  );
  assert.equal(
    outcomeLabel({ kind: "permanent", error: new HandlerRetriesError("x") }),
    "retries-exceeded",
  );
  assert.equal(outcomeLabel({ kind: "ignored", error: new Error("x") }), "ignored");
});

Deno.test("combineObservers() wraps with the first outermost and fans out events", async () => {
  const order: string[] = [];
  const make = (name: string) => ({
    ...NULL_OBSERVER,
    cycle: async <R>(_: unknown, run: () => Promise<R>) => {
      order.push(`${name}>`);
      const r = await run();
      order.push(`<${name}`);
      return r;
    },
    queued: () => void order.push(`q${name}`),
  });
  const both = combineObservers([make("a"), make("b")]);
  await both.cycle({ resource: R }, () => Promise.resolve({}));
  both.queued(R);
  assert.deepEqual(order, ["a>", "b>", "<b", "<a", "qa", "qb"]);
  assert.equal(combineObservers([]), NULL_OBSERVER);
});
