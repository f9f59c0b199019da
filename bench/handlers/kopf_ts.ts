/**
 * The benchmark's handlers for this framework: the same three handlers as `kopf_py.py`.
 *
 * - `create_fn` returns `{message, started}` → `status.create_fn` (`started`: ms since the epoch
 *   when the handler began, for the creation-to-handler latency);
 * - `update_fn` returns `{value, started}` → `status.update_fn` (`value`: `spec.value`);
 * - `delete_fn` (only with `BENCH_DELETE=1`, so that the other scenarios run without finalizers).
 *
 * Every run is appended to `$BENCH_RUNLOG` (one line per handler run) so that the harness can
 * count handler runs independently of what reaches the API server. With `BENCH_NO_EVENTS=1`
 * (the harness's opt-in `kopf-ts-noevents` contender) posting of Events is switched off; with
 * `BENCH_LOGGERS=1` (`kopf-ts-logs-on`) log messages are posted as Events too; with
 * `BENCH_PERSISTENCE=status` (the `kopf-ts-status` contender) the framework's state is kept in
 * `status` instead of annotations. `BENCH_PLURAL` names the resource of the CRD variant.
 *
 *   deno run -A cli.ts run bench/handlers/kopf_ts.ts -n NAMESPACE --standalone -q
 * @module
 */
import { on, StatusFirstDiffBaseStorage, StatusFirstProgressStorage } from "../../mod.ts";
import "./_memlog.ts";

/** The resource of the CRD variant (`kopfexamples`: no status subresource). */
const plural = Deno.env.get("BENCH_PLURAL") ?? "kopfexamples";

const runlogPath = Deno.env.get("BENCH_RUNLOG");
const runlog = runlogPath
  ? Deno.openSync(runlogPath, { create: true, append: true, write: true })
  : undefined;
const encoder = new TextEncoder();

function record(handler: string, name: string | undefined, started: number): void {
  runlog?.writeSync(encoder.encode(`${handler} ${name} ${started}\n`));
}

on.create(plural, function create_fn({ name }) {
  const started = Date.now();
  record("create", name, started);
  return { message: "hello", started };
});

on.update(plural, function update_fn({ name, spec }) {
  const started = Date.now();
  record("update", name, started);
  return { value: spec["value"] ?? null, started };
});

// `BENCH_MAX_WORKERS=N`: at most N processing cycles at once (`settings.execution.maxWorkers`).
const maxWorkers = Number(Deno.env.get("BENCH_MAX_WORKERS") ?? 0);
if (maxWorkers > 0) {
  on.startup(function bounded({ settings }) {
    settings.execution.maxWorkers = maxWorkers;
  });
}

// `BENCH_ADMISSION=N`: `settings.queueing.admissionLimit` (0: unlimited, as before it existed).
const admission = Deno.env.get("BENCH_ADMISSION");
if (admission !== undefined) {
  on.startup(function admission_limit({ settings }) {
    settings.queueing.admissionLimit = Number(admission) || null;
  });
}

// `BENCH_LISTING_BACKLOG=N`: `settings.queueing.listingBacklog` (0: the listing read at once).
const listingBacklog = Deno.env.get("BENCH_LISTING_BACKLOG");
if (listingBacklog !== undefined) {
  on.startup(function listing_backlog({ settings }) {
    settings.queueing.listingBacklog = Number(listingBacklog) || null;
  });
}

// `BENCH_BURST_GC=N`: `settings.process.burstGcCycles` (0: no collection within a burst).
const burstGc = Deno.env.get("BENCH_BURST_GC");
if (burstGc !== undefined) {
  on.startup(function burst_gc({ settings }) {
    settings.process.burstGcCycles = Number(burstGc) || null;
  });
}

// `BENCH_PAGE_OUT=S`: `settings.process.pageOutDelay` (`off`: never; `kopf run` sets 0.5).
const pageOut = Deno.env.get("BENCH_PAGE_OUT");
if (pageOut !== undefined) {
  on.startup(function page_out({ settings }) {
    settings.process.pageOutDelay = pageOut === "off" ? null : Number(pageOut);
  });
}

// `BENCH_BURST_PAGE_OUT=N`: `settings.process.burstPageOutCycles` (0: only at start-up and idle).
const burstPageOut = Deno.env.get("BENCH_BURST_PAGE_OUT");
if (burstPageOut !== undefined) {
  on.startup(function burst_page_out({ settings }) {
    settings.process.burstPageOutCycles = Number(burstPageOut) || null;
  });
}

// `BENCH_IDLE_TIMEOUT=S`: `settings.queueing.idleTimeout` (seconds an idle worker waits).
const idleTimeout = Deno.env.get("BENCH_IDLE_TIMEOUT");
if (idleTimeout !== undefined) {
  on.startup(function idle_timeout({ settings }) {
    settings.queueing.idleTimeout = Number(idleTimeout);
  });
}

// `BENCH_MAX_CONNECTIONS=N`: `settings.networking.maxConnections` (a diagnostic).
const connections = Number(Deno.env.get("BENCH_MAX_CONNECTIONS") ?? 0);
if (connections > 0) {
  on.startup(function max_connections({ settings }) {
    settings.networking.maxConnections = connections;
  });
}

// `BENCH_CHUNK_SIZE=N`: `settings.watching.chunkSize` (0: the initial list in one request).
const chunkSize = Deno.env.get("BENCH_CHUNK_SIZE");
if (chunkSize !== undefined) {
  on.startup(function chunk_size({ settings }) {
    settings.watching.chunkSize = Number(chunkSize) || null;
  });
}

// `BENCH_INITIAL_STREAMING=1`: `settings.watching.initialStreaming` (a streaming list).
if (Deno.env.get("BENCH_INITIAL_STREAMING") === "1") {
  on.startup(function initial_streaming({ settings }) {
    settings.watching.initialStreaming = true;
  });
}

if (Deno.env.get("BENCH_NO_EVENTS") === "1") {
  on.startup(function no_events({ settings }) {
    settings.posting.enabled = false;
  });
}

if (Deno.env.get("BENCH_LOGGERS") === "1") {
  on.startup(function log_events({ settings }) {
    settings.posting.loggers = true;
  });
}

if (Deno.env.get("BENCH_PERSISTENCE") === "status") {
  on.startup(function state_in_status({ settings }) {
    settings.persistence.progressStorage = new StatusFirstProgressStorage();
    settings.persistence.diffbaseStorage = new StatusFirstDiffBaseStorage();
  });
}

if (Deno.env.get("BENCH_DELETE") === "1") {
  on.delete(plural, function delete_fn({ name }) {
    record("delete", name, Date.now());
  });
}

// bench/scale_out.ts: shorter Lease timings for sharded replicas ("duration,deadline,retry").
const lease = Deno.env.get("BENCH_LEASE");
if (lease) {
  on.startup(function lease_timings({ settings }) {
    const [leaseDuration, renewDeadline, retryPeriod] = lease.split(",").map(Number);
    Object.assign(settings.sharding, { leaseDuration, renewDeadline, retryPeriod });
  });
}
