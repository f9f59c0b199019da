/**
 * Subtle behaviours (features.md §32) of resuming and re-listing, checked end to end against a
 * real API server the way a user would check them: resume handlers run once per object per
 * process, objects new to the operator are created (not resumed), a 410 Gone relist repeats
 * neither resume nor create but replays every object to event handlers (type null), and objects
 * being deleted are resumed only by `deleted=true` handlers.
 *
 * Every test uses its own namespace, an explicit registry, short delays, and fast settings.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  eventually,
  KOPFEXAMPLES,
  LAST_HANDLED,
  PausableTcpProxy,
  PODTEMPLATES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { type InProcessOperator, startOperator } from "./_operator.ts";
import { example, exampleNamespace, exists, fast, opts, read, startReady } from "./_behaviour.ts";

interface RelistOutcome {
  /** Names the resume handler ran for, in order. */
  readonly resumed: string[];
  /** Names the create handler ran for, in order. */
  readonly created: string[];
  /** How many times the event handler saw each object in a listing (type null). */
  readonly listed: (name: string) => number;
  /** The operator, still running (disposed by the caller). */
  readonly op: InProcessOperator;
}

/**
 * Two podtemplates are handled by a first operator; a third appears while no operator runs; a
 * second operator (through a pausable proxy) resumes; then it is cut off while one object changes
 * and another is born, and etcd is compacted, so that its watch gets 410 Gone and relists.
 * Podtemplates are served from etcd in the test plane (no watch cache), hence the 410.
 */
async function relistScenario(): Promise<RelistOutcome & AsyncDisposable> {
  const plane = await sharedControlPlane();
  using direct = await testClient();
  const namespace = await testNamespace("resume");
  const template = (name: string): KubeObject => ({
    metadata: { name },
    template: { spec: { containers: [{ name: "c", image: "busybox" }] } },
  } as KubeObject);
  const diffbase = async (name: string) =>
    (await read(direct, namespace, name, PODTEMPLATES)).metadata?.annotations?.[LAST_HANDLED];

  // A first operator handles two objects (they get a diff-base), then stops.
  for (const name of ["old-1", "old-2"]) {
    await direct.api.create(PODTEMPLATES, template(name), { namespace });
  }
  const first = await startReady(namespace, (registry) => {
    on.create("podtemplates", { registry, id: "create_fn" }, () => {});
  });
  for (const name of ["old-1", "old-2"]) await eventually(() => diffbase(name));
  await first.stop();
  // One more object appears while no operator runs: it is new, not resumed.
  await direct.api.create(PODTEMPLATES, template("fresh"), { namespace });

  // The second operator talks to the API server through a proxy that can cut it off.
  const proxy = PausableTcpProxy.inFrontOf(direct);
  const proxied = proxy.client(direct);
  const resumed: string[] = [];
  const created: string[] = [];
  const events: Array<[string, string | null]> = [];
  const op = await startOperator((registry) => {
    on.resume("podtemplates", { registry, id: "resume_fn" }, ({ name }) => {
      resumed.push(name!);
    });
    on.create("podtemplates", { registry, id: "create_fn" }, ({ name }) => {
      created.push(name!);
    });
    on.event("podtemplates", { registry, id: "event_fn" }, ({ name, type }) => {
      events.push([name!, type]);
    });
  }, {
    namespaces: [namespace],
    client: proxied,
    settings: fast((s) => (s.watching.inactivityTimeout = 1)),
  });
  const dispose = async () => {
    await op.stop();
    await proxy[Symbol.asyncDispose]();
  };
  try {
    await op.ready;
    await eventually(() => resumed.length === 2 && created.length === 1, 15_000, "resume+create");
    const lists = op.client.counters.count({ verb: "list", resource: "podtemplates" });

    // Cut the operator off, change things behind its back, compact the history away: its watch
    // must get 410 Gone and relist.
    proxy.pause();
    await direct.api.patch(PODTEMPLATES, "old-1", { metadata: { labels: { changed: "yes" } } }, {
      namespace,
    });
    await direct.api.create(PODTEMPLATES, template("born"), { namespace });
    await sleep(1_500); // the silent stream is given up; the reconnect waits in the proxy
    await plane.compact();
    proxy.resume();
    await eventually(
      () => op.client.counters.count({ verb: "list", resource: "podtemplates" }) > lists,
      20_000,
      "a relist",
    );
    await eventually(() => created.includes("born"), 15_000, "the object born during the cut");
    await eventually(async () => (await diffbase("old-1"))?.includes("changed"), 15_000, "update");
    await sleep(1_000);
  } catch (error) {
    await dispose();
    throw error;
  }
  const listed = (name: string) => events.filter(([n, type]) => n === name && type === null).length;
  return { resumed, created, listed, op, [Symbol.asyncDispose]: dispose };
}

Deno.test(
  "SUB-12/SUB-16/SUB-30: resume handlers run once per process; a 410 relist repeats neither resume nor create",
  opts,
  async () => {
    await using outcome = await relistScenario();
    assert.deepEqual(outcome.resumed.sort(), ["old-1", "old-2"], "once per object");
    assert.deepEqual(
      outcome.created.sort(),
      ["born", "fresh"],
      "create is never mixed with resume",
    );
    assert.ok(outcome.listed("fresh") >= 1, "listed objects come to event handlers with type null");
  },
);

Deno.test(
  "SUB-35: event handlers see every re-listing (type null) after a 410",
  opts,
  async () => {
    await using outcome = await relistScenario();
    assert.ok(outcome.listed("old-2") >= 2, "the unchanged object is listed again");
  },
);

Deno.test(
  "SUB-16: resume handlers skip objects being deleted, unless deleted=true",
  opts,
  async () => {
    using client = await testClient();
    const namespace = await exampleNamespace(client, "resumedel");
    const first = await startReady(namespace, (registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, () => {});
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {});
    });
    await client.api.create(KOPFEXAMPLES, example("a"), { namespace });
    await eventually(async () =>
      (await read(client, namespace, "a")).metadata?.annotations?.[LAST_HANDLED]
    );
    await first.stop();
    await client.api.delete(KOPFEXAMPLES, "a", { namespace }); // held by our finalizer

    const calls: string[] = [];
    await using _op = await startReady(namespace, (registry) => {
      on.resume("kopfexamples", { registry, id: "resume_plain" }, () => {
        calls.push("resume_plain");
      });
      on.resume("kopfexamples", { registry, id: "resume_deleted", deleted: true }, () => {
        calls.push("resume_deleted");
      });
      on.delete("kopfexamples", { registry, id: "delete_fn" }, () => {
        calls.push("delete_fn");
      });
    });
    await eventually(async () => !(await exists(client, namespace, "a")), 15_000, "deletion");
    assert.deepEqual(calls.sort(), ["delete_fn", "resume_deleted"]);
  },
);
