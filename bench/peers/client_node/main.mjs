// @ts-check
/**
 * The client-node contender of bench/run.ts: the benchmark's three handlers written as a
 * TypeScript/JavaScript author writes an operator without a framework, on
 * `@kubernetes/client-node` (pinned in package.json): its `makeInformer` (list, then watch, with
 * every object cached in full) feeding a per-object work queue served by a fixed number of
 * workers (`BENCH_CN_WORKERS`, 16 unless set) — a key is queued at most once and never handled
 * twice at a time; a change arriving meanwhile queues it again, and the worker reads the
 * newest version from the informer's cache.
 *
 * The writes per object are those of kopf-ts in the same persistence mode (see
 * `bench/peers/controller_runtime/main.go`, which does the same in Go): the diff base (spec,
 * labels, annotations but its own, as compact JSON) in an annotation, or with
 * `BENCH_PERSISTENCE=status` in `status.kopf.last-handled-configuration`; `status.create_fn`
 * when there is no diff base yet, `status.update_fn` when it differs; with `BENCH_DELETE=1` a
 * finalizer added by a patch of its own and removed by one after the delete handler. All writes
 * are JSON merge patches (`setHeaderOptions('Content-Type', PatchStrategy.MergePatch)`).
 *
 * Every handler run is appended to `$BENCH_RUNLOG`. No Events, no progress records.
 * Run by Node (plain JavaScript: Node 20 runs no TypeScript), with the package installed by
 * `tools/bench-peers.sh` into a cache outside the repository, named by `BENCH_CLIENT_NODE_DIR`:
 *
 *   BENCH_CLIENT_NODE_DIR=… KUBECONFIG=… node bench/peers/client_node/main.mjs -n NAMESPACE
 * @module
 */
import { appendFileSync, openSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const GROUP = "kopf.dev";
const VERSION = "v1";
const FINALIZER = "bench.kopf.dev/client-node";
const DIFF_BASE_KEY = "bench.kopf.dev/last-handled-configuration";
const DIFF_BASE_FIELD = "last-handled-configuration"; // under status.kopf

const args = process.argv.slice(2);
const nsIndex = args.findIndex((a) => a === "-n" || a === "--namespace");
const namespace = nsIndex >= 0 ? args[nsIndex + 1] : undefined;
const installed = process.env["BENCH_CLIENT_NODE_DIR"];
if (!namespace || !installed) {
  console.error("usage: BENCH_CLIENT_NODE_DIR=DIR node main.mjs -n NAMESPACE");
  process.exit(2);
}
const workers = Number(process.env["BENCH_CN_WORKERS"] ?? 16);
if (!Number.isInteger(workers) || workers < 1) {
  console.error(
    `error: BENCH_CN_WORKERS=${process.env["BENCH_CN_WORKERS"]}: expected a positive integer`,
  );
  process.exit(2);
}
const plural = process.env["BENCH_PLURAL"] || "kopfexamples";
const statusSubresource = process.env["BENCH_STATUS_SUBRESOURCE"] === "1";
const inStatus = process.env["BENCH_PERSISTENCE"] === "status";
const withDelete = process.env["BENCH_DELETE"] === "1";
const runlogPath = process.env["BENCH_RUNLOG"];
const runlog = runlogPath ? openSync(runlogPath, "a") : undefined;

/** @param {string} handler @param {string} name @param {number} started */
function record(handler, name, started) {
  if (runlog !== undefined) appendFileSync(runlog, `${handler} ${name} ${started}\n`);
}

// The package lives in the cache made by tools/bench-peers.sh, not next to this file.
const require = createRequire(join(installed, "package.json"));
const k8s = await import(pathToFileURL(require.resolve("@kubernetes/client-node")).href);

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const api = kc.makeApiClient(k8s.CustomObjectsApi);
const mergePatch = k8s.setHeaderOptions("Content-Type", k8s.PatchStrategy.MergePatch);
const where = { group: GROUP, version: VERSION, namespace, plural };

const informer = k8s.makeInformer(
  kc,
  `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${plural}`,
  () => api.listNamespacedCustomObject(where),
);

/**
 * @typedef {{
 *   metadata: {
 *     name: string; resourceVersion?: string; deletionTimestamp?: string;
 *     finalizers?: string[]; labels?: Record<string, string>;
 *     annotations?: Record<string, string>;
 *   };
 *   spec?: Record<string, unknown>;
 *   status?: Record<string, unknown>;
 * }} Obj
 */

/** The essence as Kopf defines it: spec, labels, annotations but the diff base's own. @param {Obj} obj */
function essence(obj) {
  /** @type {Record<string, unknown>} */
  const meta = {};
  if (obj.metadata.labels && Object.keys(obj.metadata.labels).length) {
    meta["labels"] = obj.metadata.labels;
  }
  const annotations = Object.fromEntries(
    Object.entries(obj.metadata.annotations ?? {}).filter(([k]) =>
      k !== DIFF_BASE_KEY && k !== "kubectl.kubernetes.io/last-applied-configuration"
    ),
  );
  if (Object.keys(annotations).length) meta["annotations"] = annotations;
  return JSON.stringify({
    ...(Object.keys(meta).length ? { metadata: meta } : {}),
    ...(obj.spec !== undefined ? { spec: obj.spec } : {}),
  });
}

/** @param {Obj} obj @returns {string | undefined} */
function diffBase(obj) {
  if (inStatus) {
    const kopf = /** @type {Record<string, unknown> | undefined} */ (obj.status?.["kopf"]);
    const value = kopf?.[DIFF_BASE_FIELD];
    return typeof value === "string" ? value : undefined;
  }
  const value = obj.metadata.annotations?.[DIFF_BASE_KEY];
  return value?.endsWith("\n") ? value.slice(0, -1) : value; // stored as Kopf stores it
}

/** @param {string} name @param {unknown} body */
const patchObject = (name, body) =>
  api.patchNamespacedCustomObject({ ...where, name, body }, mergePatch);
/** @param {string} name @param {unknown} body */
const patchStatus = (name, body) =>
  statusSubresource
    ? api.patchNamespacedCustomObjectStatus({ ...where, name, body }, mergePatch)
    : patchObject(name, body);

/** One step for the newest cached version of an object; at most one write sequence. @param {string} name */
async function reconcile(name) {
  /** @type {Obj | undefined} */
  const obj = informer.get(name, namespace);
  if (!obj) return;
  const finalizers = obj.metadata.finalizers ?? [];
  const hasFinalizer = finalizers.includes(FINALIZER);
  if (obj.metadata.deletionTimestamp) {
    if (!hasFinalizer) return;
    record("delete", name, Date.now());
    await patchObject(name, {
      metadata: {
        resourceVersion: obj.metadata.resourceVersion,
        finalizers: finalizers.filter((f) => f !== FINALIZER),
      },
    });
    return;
  }
  if (withDelete && !hasFinalizer) {
    // Its own patch; the event of that patch queues the object again.
    await patchObject(name, {
      metadata: {
        resourceVersion: obj.metadata.resourceVersion,
        finalizers: [...finalizers, FINALIZER],
      },
    });
    return;
  }
  const current = essence(obj);
  const stored = diffBase(obj);
  const started = Date.now();
  /** @type {Record<string, unknown>} */
  let status;
  if (stored === undefined) {
    record("create", name, started);
    status = { create_fn: { message: "hello", started } };
  } else if (stored !== current) {
    record("update", name, started);
    status = { update_fn: { value: obj.spec?.["value"] ?? null, started } };
  } else {
    return; // our own write, or a change of status: nothing to do
  }
  if (inStatus) {
    await patchStatus(name, { status: { ...status, kopf: { [DIFF_BASE_FIELD]: current } } });
    return;
  }
  const annotations = { [DIFF_BASE_KEY]: `${current}\n` };
  if (!statusSubresource) {
    await patchObject(name, { metadata: { annotations }, status });
    return;
  }
  // The annotation before the status, so that a step caused by the first write already finds it.
  await patchObject(name, { metadata: { annotations } });
  await patchStatus(name, { status });
}

// The work queue: keys waiting, keys being handled, keys changed while being handled.
/** @type {Set<string>} */
const queued = new Set();
/** @type {Set<string>} */
const active = new Set();
/** @type {Set<string>} */
const dirty = new Set();
/** @type {Map<string, number>} */
const failures = new Map();
/** @type {(() => void)[]} */
const idle = [];
let stopping = false;

/** @param {string} name */
function enqueue(name) {
  if (active.has(name)) {
    dirty.add(name);
    return;
  }
  if (queued.has(name)) return;
  queued.add(name);
  idle.pop()?.();
}

async function worker() {
  while (!stopping) {
    const next = queued.values().next();
    if (next.done) {
      await new Promise((resolve) => idle.push(() => resolve(undefined)));
      continue;
    }
    const name = next.value;
    queued.delete(name);
    active.add(name);
    try {
      await reconcile(name);
      failures.delete(name);
    } catch (error) {
      const code = /** @type {{ code?: number }} */ (error).code;
      if (code !== 404) {
        // Conflicts and errors: again after a per-object backoff (5 ms doubling up to 10 s).
        const count = (failures.get(name) ?? 0) + 1;
        failures.set(name, count);
        if (code !== 409) console.error(`${name}: ${error}`);
        setTimeout(() => enqueue(name), Math.min(10_000, 5 * 2 ** (count - 1)));
      }
    } finally {
      active.delete(name);
      if (dirty.delete(name)) enqueue(name);
    }
  }
}

/** @param {Obj} obj */
const changed = (obj) => enqueue(obj.metadata.name);
informer.on("add", changed);
informer.on("update", changed);
informer.on("delete", (/** @type {Obj} */ obj) => failures.delete(obj.metadata.name));
informer.on("error", (/** @type {unknown} */ error) => {
  // The informer stops on errors other than 410 Gone: start it again, as its docs show.
  if (stopping) return;
  console.error(`informer: ${error}`);
  setTimeout(() => informer.start(), 1_000);
});

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    stopping = true;
    informer.stop().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  });
}

for (let i = 0; i < workers; i++) {
  worker().catch((error) => {
    console.error(`worker: ${error}`);
    process.exit(1);
  });
}
await informer.start();
