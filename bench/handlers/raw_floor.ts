/**
 * The raw floor: a minimal operator without the framework, for the benchmark's lower bound.
 *
 * It watches `kopfexamples` in one namespace with plain `fetch` (list, then watch with
 * bookmarks, re-listing on `410 Gone`) and makes only the writes strictly needed for the same
 * observable result as the framework's handlers (`kopf_ts.ts`):
 *
 * - an object without `status.create_fn` gets `status.create_fn = {message, started}`
 *   (with `BENCH_DELETE=1` the finalizer is added in the same patch): one write — on a CRD
 *   with a status subresource (`BENCH_STATUS_SUBRESOURCE=1`) the status goes to `/status`, so
 *   with a finalizer it is two (the finalizer first);
 * - a handled object whose `spec` differs from the last one seen gets
 *   `status.update_fn = {value, started}`: one write;
 * - with `BENCH_DELETE=1`, an object marked for deletion that carries the finalizer gets it
 *   removed: one write.
 *
 * It is NOT restart-safe and not a usable operator: the diff base (the last seen `spec`) lives
 * only in memory, so spec changes made while it is down are missed, and there are no retries
 * beyond conflicts, no Events, no error handling worth the name. It is the API server's own
 * limit for this workload, not an alternative.
 *
 * Only the connection (server, CA, token) is loaded with `core/client/config.ts`.
 *
 *   KUBECONFIG=… deno run -A bench/handlers/raw_floor.ts -n NAMESPACE
 * @module
 */
import { loadKubeconfig } from "../../core/client/config.ts";
import "./_memlog.ts";

const USER_AGENT = "kopf-bench-raw-floor";
const FINALIZER = "bench.kopf.dev/raw-floor";
const GROUP_VERSION = "kopf.dev/v1";
/** The resource of the CRD variant, and whether status is written through `/status`. */
const PLURAL = Deno.env.get("BENCH_PLURAL") ?? "kopfexamples";
const STATUS_SUBRESOURCE = Deno.env.get("BENCH_STATUS_SUBRESOURCE") === "1";

interface Obj {
  metadata: {
    name: string;
    uid: string;
    resourceVersion: string;
    deletionTimestamp?: string;
    finalizers?: string[];
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

interface State {
  /** The last spec seen (JSON) — the in-memory diff base. */
  spec: string | undefined;
  /** Whether a write for this object is in flight. */
  busy: boolean;
  /** The newest version that arrived while busy. */
  pending: Obj | undefined;
  /** The resourceVersion of our last write: older versions arriving later are stale. */
  written: number;
}

function parseArgs(args: string[]): string {
  for (let i = 0; i < args.length; i++) {
    if ((args[i] === "-n" || args[i] === "--namespace") && args[i + 1]) return args[i + 1]!;
  }
  throw new Error("usage: raw_floor.ts -n NAMESPACE");
}

const namespace = parseArgs(Deno.args);
const deleteEnabled = Deno.env.get("BENCH_DELETE") === "1";
const runlogPath = Deno.env.get("BENCH_RUNLOG");
const runlog = runlogPath
  ? Deno.openSync(runlogPath, { create: true, append: true, write: true })
  : undefined;
const encoder = new TextEncoder();
const record = (handler: string, name: string, started: number) =>
  runlog?.writeSync(encoder.encode(`${handler} ${name} ${started}\n`));

const connection = await loadKubeconfig(
  Deno.env.get("KUBECONFIG") ? { paths: [Deno.env.get("KUBECONFIG")!] } : {},
);
const http = Deno.createHttpClient({
  ...(connection.caPem ? { caCerts: [connection.caPem] } : {}),
});
const auth = await connection.credentials.headers();
const base = `${connection.server}/apis/${GROUP_VERSION}/namespaces/${namespace}/${PLURAL}`;
const stop = new AbortController();
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.addSignalListener(signal, () => {
    stop.abort();
    setTimeout(() => Deno.exit(0), 2_000); // open streams must not delay the exit
  });
}

async function request(
  method: string,
  url: string,
  body?: unknown,
  contentType = "application/merge-patch+json",
): Promise<Response> {
  return await fetch(url, {
    method,
    client: http,
    signal: AbortSignal.any([stop.signal, AbortSignal.timeout(60_000)]),
    headers: {
      ...auth,
      "User-Agent": USER_AGENT,
      Accept: "application/json",
      ...(body === undefined ? {} : { "Content-Type": contentType }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const states = new Map<string, State>();

function stateOf(obj: Obj): State {
  let state = states.get(obj.metadata.uid);
  if (!state) {
    state = { spec: undefined, busy: false, pending: undefined, written: 0 };
    states.set(obj.metadata.uid, state);
  }
  return state;
}

/**
 * Writes a change: one merge patch, or on a CRD with a status subresource the status through
 * `/status` (and anything else, e.g. a finalizer, in a patch of the object before it).
 */
async function patch(obj: Obj, body: Record<string, unknown>): Promise<Obj | undefined> {
  if (!STATUS_SUBRESOURCE || body["status"] === undefined) return await send(obj, body, "");
  const { status, ...rest } = body;
  if (Object.keys(rest).length) {
    const fresh = await send(obj, rest, "");
    if (fresh) return fresh;
  }
  return await send(obj, { status }, "/status");
}

/** Sends one merge patch; on a conflict (stale resourceVersion) returns the fresh object. */
async function send(
  obj: Obj,
  body: Record<string, unknown>,
  subresource: "" | "/status",
): Promise<Obj | undefined> {
  const url = `${base}/${obj.metadata.name}${subresource}`;
  const response = await request("PATCH", url, body);
  if (response.ok) {
    const written = await response.json() as Obj;
    stateOf(obj).written = Number(written.metadata.resourceVersion);
    return undefined;
  }
  if (response.status === 404) {
    await response.body?.cancel();
    return undefined;
  }
  const text = await response.text();
  if (response.status === 409) {
    const fresh = await request("GET", `${base}/${obj.metadata.name}`);
    if (fresh.status === 404) {
      await fresh.body?.cancel();
      return undefined;
    }
    return await fresh.json() as Obj;
  }
  console.error(`PATCH ${obj.metadata.name}: HTTP ${response.status}: ${text.slice(0, 200)}`);
  return undefined;
}

/** Makes the one write this version of the object needs, if any; returns a retry object. */
async function reconcile(obj: Obj, state: State): Promise<Obj | undefined> {
  const name = obj.metadata.name;
  const finalizers = obj.metadata.finalizers ?? [];
  const hasFinalizer = finalizers.includes(FINALIZER);
  if (obj.metadata.deletionTimestamp) {
    if (!hasFinalizer) return undefined;
    record("delete", name, Date.now());
    return await patch(obj, {
      metadata: {
        resourceVersion: obj.metadata.resourceVersion,
        finalizers: finalizers.filter((f) => f !== FINALIZER),
      },
    });
  }
  const spec = JSON.stringify(obj.spec ?? {});
  const needsFinalizer = deleteEnabled && !hasFinalizer;
  const finalizerPatch = needsFinalizer
    ? {
      metadata: {
        resourceVersion: obj.metadata.resourceVersion,
        finalizers: [...finalizers, FINALIZER],
      },
    }
    : {};
  if (!obj.status?.["create_fn"]) {
    const started = Date.now();
    record("create", name, started);
    state.spec = spec;
    return await patch(obj, {
      ...finalizerPatch,
      status: { create_fn: { message: "hello", started } },
    });
  }
  if (state.spec === undefined) { // first sight of a handled object: it becomes the diff base
    state.spec = spec;
    return needsFinalizer ? await patch(obj, finalizerPatch) : undefined;
  }
  if (state.spec !== spec) {
    const started = Date.now();
    record("update", name, started);
    state.spec = spec;
    return await patch(obj, {
      ...finalizerPatch,
      status: { update_fn: { value: obj.spec?.["value"] ?? null, started } },
    });
  }
  return needsFinalizer ? await patch(obj, finalizerPatch) : undefined;
}

/** Serialises the work per object: the newest version arriving meanwhile is processed next. */
function process(obj: Obj): void {
  const state = stateOf(obj);
  if (Number(obj.metadata.resourceVersion) < state.written) return; // stale: we wrote a newer one
  if (state.busy) {
    state.pending = obj;
    return;
  }
  state.busy = true;
  (async () => {
    let next: Obj | undefined = obj;
    while (next && !stop.signal.aborted) {
      const current: Obj = next;
      try {
        next = await reconcile(current, state) ?? state.pending;
        // A version older than our own last write is stale (it was queued meanwhile).
        if (
          next && next === state.pending && Number(next.metadata.resourceVersion) < state.written
        ) {
          next = undefined;
        }
      } catch (error) {
        if (!stop.signal.aborted) console.error(`${current.metadata.name}: ${error}`);
        next = state.pending;
      }
      state.pending = undefined;
    }
    state.busy = false;
  })();
}

async function listAndWatch(): Promise<void> {
  while (!stop.signal.aborted) {
    const listed = await request("GET", base);
    if (!listed.ok) throw new Error(`list: HTTP ${listed.status}: ${await listed.text()}`);
    const list = await listed.json() as { metadata: { resourceVersion: string }; items: Obj[] };
    for (const item of list.items) process(item);
    let rv = list.metadata.resourceVersion;
    // Watch until the stream fails with 410 Gone (then re-list) or the operator stops.
    for (let gone = false; !gone && !stop.signal.aborted;) {
      const url = `${base}?watch=true&allowWatchBookmarks=true&timeoutSeconds=300` +
        `&resourceVersion=${rv}`;
      const response = await fetch(url, {
        client: http,
        signal: stop.signal,
        headers: { ...auth, "User-Agent": USER_AGENT, Accept: "application/json" },
      });
      if (!response.ok || !response.body) {
        await response.body?.cancel();
        gone = true;
        break;
      }
      let buffer = "";
      const decoder = new TextDecoder();
      try {
        for await (const chunk of response.body) {
          buffer += decoder.decode(chunk, { stream: true });
          let newline;
          while ((newline = buffer.indexOf("\n")) >= 0) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + 1);
            if (!line.trim()) continue;
            const event = JSON.parse(line) as { type: string; object: Obj & { code?: number } };
            if (event.type === "ERROR") {
              gone = true;
              break;
            }
            rv = event.object.metadata.resourceVersion;
            if (event.type === "ADDED" || event.type === "MODIFIED") process(event.object);
            if (event.type === "DELETED") states.delete(event.object.metadata.uid);
          }
          if (gone) break;
        }
      } catch (error) {
        if (stop.signal.aborted) return;
        console.error(`watch: ${error}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
}

try {
  await listAndWatch();
} catch (error) {
  if (!stop.signal.aborted) {
    console.error(`raw floor failed: ${error}`);
    Deno.exit(1);
  }
}
http.close();
Deno.exit(0);
