/**
 * The twin test: the same operator in the real Python Kopf (the pinned release, see
 * tools/python-kopf.sh; handlers in tests/compat/python/twin_handlers.py) and in this project,
 * side by side on one control plane, on Kopf's example CRD with the status subresource
 * (tests/fixtures/status-crd.yaml). Both get the same changes (three creations, one of them with
 * a temporary error and a 2 s delay, a spec change, a field change, a deletion) and must leave
 * the same observable state: status keys and values, `kopf.zalando.org/*` annotations,
 * finalizers, Events, handler runs (from Kopf's output and from ours) and the handlers' outcome
 * log lines.
 *
 * Separation: one CRD, two namespaces, each operator restricted to its own (`-n`), so that the
 * objects, annotations and Events are byte-for-byte comparable without renaming groups or kinds;
 * neither operator sees the other's objects. Remaining differences are listed in docs/parity.md
 * (section "Kopf after the seed documentation", the twin rows).
 * @module
 */

import assert from "node:assert/strict";
import { TemporaryError } from "../core/actions/execution.ts";
import { info } from "../core/api/events.ts";
import { on } from "../core/api/on.ts";
import type { KubeClient } from "../core/client/client.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import type { LogEntry } from "../core/actions/loggers.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  applyCrds,
  eventually,
  LAST_HANDLED,
  STATUS_CRD,
  STATUS_EXAMPLES,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";
import { PYTHON_KOPF, runPythonKopf, TWIN_HANDLERS } from "./_kopf.ts";

const opts = { sanitizeOps: false, sanitizeResources: false, ignore: !PYTHON_KOPF.available };
const RESOURCE = "kopfstatusexamples";

/** The same operator as twin_handlers.py; every run is recorded as a `TWIN …` marker. */
function twinHandlers(markers: string[]) {
  return (registry: OperatorRegistry) => {
    const marker = (id: string, name: string | undefined, retry: number) =>
      markers.push(`TWIN ${id} ${name} retry=${retry}`);
    on.create(RESOURCE, { registry, id: "create_fn" }, ({ spec, name, retry, patch, body }) => {
      marker("create_fn", name, retry);
      if (spec.mode === "retry" && retry === 0) throw new TemporaryError("not yet", { delay: 2 });
      patch.status.phase = "created";
      patch.fns.push((raw) => {
        const items = ((raw.status ??= {}) as { items?: string[] }).items ??= [];
        if (!items.includes("from-fn")) items.push("from-fn");
      });
      info(body, { reason: "TwinCreated", message: `created ${name} at retry ${retry}` });
      return { message: `created ${name}`, retry };
    });
    on.update(
      RESOURCE,
      { registry, id: "update_fn", backoff: 1 },
      ({ spec, name, retry, patch }) => {
        marker("update_fn", name, retry);
        if (retry === 0) throw new Error("boom");
        patch.status.phase = "updated";
        const size = (spec.size as number | undefined) ?? null;
        patch.status.size = size;
        return { size };
      },
    );
    on.field(
      RESOURCE,
      { registry, id: "field_fn", field: "spec.field" },
      ({ old, new: value, name, retry }) => {
        marker("field_fn", name, retry);
        return { old: old ?? null, new: value ?? null };
      },
    );
    on.delete(RESOURCE, { registry, id: "delete_fn" }, ({ name, retry, body }) => {
      marker("delete_fn", name, retry);
      info(body, { reason: "TwinDeleting", message: `deleting ${name}` });
    });
  };
}

function example(name: string, spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfStatusExample",
    metadata: { name },
    spec,
  } as KubeObject;
}

async function list(client: KubeClient, namespace: string): Promise<Map<string, KubeObject>> {
  const objects = await client.api.list(STATUS_EXAMPLES, { namespace });
  return new Map(objects.items.map((o) => [o.metadata!.name!, o]));
}

/** What both operators must agree on for one object. */
function observable(body: KubeObject | undefined) {
  if (body === undefined) return "gone";
  const annotations = Object.entries(body.metadata?.annotations ?? {})
    .filter(([key]) => key.startsWith("kopf.zalando.org/"));
  return {
    status: (body as { status?: unknown }).status ?? null,
    annotations: Object.fromEntries(annotations.sort(([a], [b]) => a.localeCompare(b))),
    finalizers: body.metadata?.finalizers ?? [],
  };
}

const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?/g;

/** The observable state with JSON annotations parsed and their timestamps replaced. */
function normalised(body: KubeObject | undefined) {
  const seen = observable(body);
  if (seen === "gone") return seen;
  const annotations = Object.fromEntries(
    Object.entries(seen.annotations).map(([key, raw]) => {
      try {
        return [key, JSON.parse(raw.replace(TIMESTAMP, "<time>"))];
      } catch {
        return [key, raw];
      }
    }),
  );
  return { ...seen, annotations };
}

/** The objects' observable state, keyed by name. */
async function state(client: KubeClient, namespace: string, names: string[]) {
  const objects = await list(client, namespace);
  return Object.fromEntries(names.map((n) => [n, observable(objects.get(n))]));
}

/** Events in the namespace as sorted `name type reason: message ×count` lines. */
async function events(client: KubeClient, namespace: string): Promise<string[]> {
  const { items } = await client.api.list(EVENTS_RESOURCE, { namespace });
  return items.map((e) => {
    const event = e as KubeObject & {
      involvedObject?: { name?: string };
      type?: string;
      reason?: string;
      message?: string;
      count?: number;
    };
    return `${event.involvedObject?.name} ${event.type} ${event.reason}: ${event.message} ×${
      event.count ?? 1
    }`;
  }).sort();
}

/** Handlers' outcome lines per object (`name: message`), sorted; counts are kept as repeats. */
const OUTCOME = /^(Handler '.+' (succeeded\.|failed .*)|.+ is processed: .*)$/;

function pythonOutcomes(lines: string[]): string[] {
  const out: string[] = [];
  for (const line of lines) {
    const match = /\[[^\]/]+\/([^\]]+)\] (.*)$/.exec(line);
    if (match && OUTCOME.test(match[2]!)) out.push(`${match[1]}: ${match[2]}`);
  }
  return out.sort();
}

function ourOutcomes(logs: LogEntry[]): string[] {
  return logs
    .filter((e) => e.object?.name !== undefined && OUTCOME.test(e.message))
    .map((e) => `${e.object!.name}: ${e.message}`)
    .sort();
}

Deno.test(
  "twin: the same operator in Python Kopf and here leaves the same status, annotations, finalizers, Events and handler runs",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, STATUS_CRD);
    const pyNs = await testNamespace("twin-py");
    const tsNs = await testNamespace("twin-ts");
    const namespaces = [pyNs, tsNs];
    const names = ["a", "b", "c"];

    const kopf = await runPythonKopf(pyNs, { handlers: TWIN_HANDLERS });
    const markers: string[] = [];
    const settings = createSettings({
      posting: { aggregationWindow: 0.2 },
      process: { gracePeriod: 1 },
      queueing: { exitTimeout: 1 },
    });
    try {
      await using op = await startOperator(twinHandlers(markers), {
        namespaces: [tsNs],
        settings,
      });
      await op.ready;

      const settled = (check: (o: KubeObject) => boolean, what: string) =>
        eventually(
          async () => {
            for (const ns of namespaces) {
              const objects = await list(client, ns);
              if (![...objects.values()].every(check)) return false;
            }
            return true;
          },
          60_000,
          what,
        );

      // b while its create handler waits for the retry: progress records in annotations.
      const inRetry = (namespace: string) =>
        eventually(
          async () => {
            const b = await client.api.get(STATUS_EXAMPLES, "b", { namespace })
              .catch(() => undefined);
            // Stable once both cycles ran: create_fn failed (one handler per cycle, as Kopf's
            // default lifecycle), then field_fn succeeded; until create_fn's retry is due.
            const raw = b?.metadata?.annotations?.["kopf.zalando.org/create_fn"];
            const field = b?.metadata?.annotations?.["kopf.zalando.org/field_fn.spec.field"];
            const status = (b as { status?: Record<string, unknown> } | undefined)?.status;
            return raw && JSON.parse(raw).delayed && field && status?.["field_fn/spec.field"]
              ? normalised(b)
              : undefined;
          },
          60_000,
          `b waiting for its retry in ${namespace}`,
        );
      const retrying = Promise.all(namespaces.map(inRetry));

      // 1. Creations: a and c succeed at once, b fails once (TemporaryError, delay 2 s).
      for (const ns of namespaces) {
        await client.api.create(STATUS_EXAMPLES, example("a", { field: "one", size: 1 }), {
          namespace: ns,
        });
        await client.api.create(STATUS_EXAMPLES, example("b", { field: "bee", mode: "retry" }), {
          namespace: ns,
        });
        await client.api.create(STATUS_EXAMPLES, example("c", { field: "see" }), {
          namespace: ns,
        });
      }
      await settled(
        (o) =>
          o.metadata?.annotations?.[LAST_HANDLED] !== undefined &&
          (o as { status?: { create_fn?: unknown } }).status?.create_fn !== undefined,
        "all created objects handled by both operators",
      );

      const [pyRetry, tsRetry] = await retrying;
      assert.deepEqual(tsRetry, pyRetry, "b during the retry (timestamps normalised)");
      assert.notEqual(pyRetry, "gone");

      // 2. A spec change without the field (update only) and a field change (update + field).
      for (const ns of namespaces) {
        await client.api.patch(STATUS_EXAMPLES, "a", { spec: { size: 2 } }, { namespace: ns });
        await client.api.patch(STATUS_EXAMPLES, "c", { spec: { field: "sea" } }, {
          namespace: ns,
        });
      }
      await settled((o) => {
        const diffbase = o.metadata?.annotations?.[LAST_HANDLED] ?? "";
        const name = o.metadata?.name;
        return name === "a"
          ? diffbase.includes('"size":2')
          : name === "c"
          ? diffbase.includes('"sea"')
          : true;
      }, "both changes handled by both operators");

      // 3. A deletion.
      for (const ns of namespaces) await client.api.delete(STATUS_EXAMPLES, "b", { namespace: ns });
      await settled((o) => o.metadata?.name !== "b", "b deleted in both namespaces");

      // The observable state, once both have settled (no progress records left).
      const both = async () => [await state(client, pyNs, names), await state(client, tsNs, names)];
      await eventually(
        async () => {
          const [py, ts] = await both();
          return JSON.stringify(py) === JSON.stringify(ts);
        },
        15_000,
        "the same state",
      ).catch(() => undefined);
      const [py, ts] = await both();
      assert.deepEqual(ts, py, "status, kopf.zalando.org/* annotations and finalizers");
      assert.deepEqual((py as Record<string, unknown>)["b"], "gone");

      // Events (the explicit ones only: log messages are not posted by default in either).
      const expected = [
        "a Normal TwinCreated: created a at retry 0 ×1",
        "b Normal TwinCreated: created b at retry 1 ×1",
        "b Normal TwinDeleting: deleting b ×1",
        "c Normal TwinCreated: created c at retry 0 ×1",
      ];
      await eventually(
        async () => (await events(client, pyNs)).length >= 4,
        15_000,
        "Kopf's Events",
      );
      await eventually(async () => (await events(client, tsNs)).length >= 4, 15_000, "our Events");
      assert.deepEqual(await events(client, pyNs), expected, "Python Kopf's Events");
      assert.deepEqual(await events(client, tsNs), expected, "our Events");

      // Handler runs: the same handlers, as often, with the same retry numbers.
      const pyMarkers = kopf.lines.flatMap((l) => l.match(/TWIN \S+ \S+ retry=\d+/g) ?? [])
        .sort();
      assert.deepEqual([...markers].sort(), pyMarkers, "handler runs");
      assert.deepEqual(pyMarkers, [
        "TWIN create_fn a retry=0",
        "TWIN create_fn b retry=0",
        "TWIN create_fn b retry=1",
        "TWIN create_fn c retry=0",
        "TWIN delete_fn b retry=0",
        "TWIN field_fn a retry=0",
        "TWIN field_fn b retry=0",
        "TWIN field_fn c retry=0",
        "TWIN field_fn c retry=0",
        "TWIN update_fn a retry=0",
        "TWIN update_fn a retry=1",
        "TWIN update_fn c retry=0",
        "TWIN update_fn c retry=1",
      ]);

      // The handlers' outcome log lines, per object.
      const pyOutcomes = pythonOutcomes(kopf.lines);
      assert.deepEqual(ourOutcomes(op.logs), pyOutcomes, "outcome log lines");
      assert.deepEqual(pyOutcomes, [
        "a: Creation is processed: 2 succeeded; 0 failed.",
        "a: Handler 'create_fn' succeeded.",
        "a: Handler 'field_fn/spec.field' succeeded.",
        "a: Handler 'update_fn' failed with an exception and will try again in 1 seconds: boom",
        "a: Handler 'update_fn' succeeded.",
        "a: Updating is processed: 1 succeeded; 0 failed.",
        "b: Creation is processed: 2 succeeded; 0 failed.",
        "b: Deletion is processed: 1 succeeded; 0 failed.",
        "b: Handler 'create_fn' failed temporarily: not yet",
        "b: Handler 'create_fn' succeeded.",
        "b: Handler 'delete_fn' succeeded.",
        "b: Handler 'field_fn/spec.field' succeeded.",
        "c: Creation is processed: 2 succeeded; 0 failed.",
        "c: Handler 'create_fn' succeeded.",
        "c: Handler 'field_fn/spec.field' succeeded.",
        "c: Handler 'field_fn/spec.field' succeeded.",
        "c: Handler 'update_fn' failed with an exception and will try again in 1 seconds: boom",
        "c: Handler 'update_fn' succeeded.",
        "c: Updating is processed: 2 succeeded; 0 failed.",
      ]);
    } finally {
      await kopf.stop();
    }
  },
);
