/**
 * Sharded replicas against the real API server (feature gate ShardedListAndWatch on, as on the
 * suite's shared plane): every object handled by exactly one replica; scaling 1 → 3 → 1 while
 * objects are created and changed runs no completed handler twice, loses no change and causes no
 * deletion handling and no finalizer change (a watch of the test sees every version); SIGKILL of
 * one of three `kopf run --shards` replicas mid-run, with its handlers in flight: the others take
 * its shards over after the lease expires and finish its work; `kopf shards` prints the holders.
 * The fallback with the gate off (also scaled 1 → 2 → 1) runs on a private plane.
 * Lease timings are shortened (lease 4 s, deadline 3 s, retry 0.5 s), and 8 shards instead of 32.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { on } from "../core/api/on.ts";
import { index } from "../core/api/indexing.ts";
import { daemon, timer } from "../core/api/spawning.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { watcher } from "../core/client/watching.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { type InProcessOperator, spawnOperator, startOperator } from "./_operator.ts";
import type { Resource } from "../core/structs/resources.ts";
import { shardOfObject } from "../core/structs/shards.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { WebhookServer } from "../mod.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  FINALIZER,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const SHARDS = 8;

interface Run {
  readonly handler: string;
  readonly name: string;
  readonly replica: string;
}

function settings(namespace: string, identity: string) {
  return createSettings({
    posting: { enabled: false },
    sharding: {
      enabled: true,
      shards: SHARDS,
      namespace,
      identity,
      leaseDuration: 4,
      renewDeadline: 3,
      retryPeriod: 0.5,
    },
  });
}

/** A replica whose handlers record their runs in `runs`. */
function replica(
  runs: Run[],
  namespace: string,
  identity: string,
  client?: KubeClient,
  metricsEngine?: MetricsEngine,
): Promise<InProcessOperator> {
  const record = (handler: string, name: string | undefined) =>
    runs.push({ handler, name: name ?? "", replica: identity });
  return startOperator((registry: OperatorRegistry) => {
    on.create("kopfexamples", { registry }, function create_fn({ name }) {
      record("create", name);
    });
    on.update("kopfexamples", { registry }, function update_fn({ name, spec }) {
      record(`update:${(spec as { value?: number }).value}`, name);
    });
    on.delete("kopfexamples", { registry }, function delete_fn({ name }) {
      record("delete", name);
    });
    on.event("kopfexamples", { registry }, function event_fn({ name, type }) {
      if (type === "DELETED") record("deleted-event", name);
    });
  }, {
    namespaces: [namespace],
    settings: settings(namespace, identity),
    ...(client ? { client } : {}),
    ...(metricsEngine ? { metricsEngine } : {}),
  });
}

/** Watch events of kopfexamples by type, from a replica's metrics. */
async function watchEvents(engine: MetricsEngine, type: string): Promise<number> {
  const { text } = await engine.exposition();
  return text.split("\n")
    .filter((l) => l.startsWith("kopf_watch_events_total{") && l.includes(`type="${type}"`))
    .reduce((sum, l) => sum + Number(l.split(" ").pop()), 0);
}

async function setup(prefix: string) {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace(prefix);
  return { client, namespace };
}

async function createExamples(client: KubeClient, namespace: string, names: string[]) {
  for (let i = 0; i < names.length; i += 25) {
    await Promise.all(
      names.slice(i, i + 25).map((name) =>
        client.api.create(KOPFEXAMPLES, {
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          metadata: { name },
          spec: { value: 0 },
        }, { namespace })
      ),
    );
  }
}

/** Waits until `replicas` live members hold all shards between them. */
async function balanced(
  client: KubeClient,
  namespace: string,
  replicas: number,
  timeoutMs = 60_000,
) {
  return await eventually(
    async () => {
      const status = await readShardStatus(client.api, { name: "kopf", namespace });
      const holders = new Set(status.shards.map((s) => s.holder));
      return status.shards.length === SHARDS && !holders.has(undefined) &&
          holders.size === replicas && status.members.length === replicas
        ? status
        : undefined;
    },
    timeoutMs,
    `${replicas} replicas to hold all ${SHARDS} shards`,
  );
}

/** What a watch of the namespace saw of every object's versions (the test's own stream). */
interface Observed {
  /** Per object, whose create results were ever persisted (`status.create_fn.replica`). */
  readonly creates: Map<string, Set<string>>;
  /** Per `name value`, whose update results were ever persisted (`status.update_fn`). */
  readonly updates: Map<string, Set<string>>;
  /** Per object, its successive distinct finalizer lists (as JSON). */
  readonly finalizers: Map<string, string[]>;
  /** Relists after 410 Gone (each a possible gap in the versions seen: should stay 0). */
  gaps(): number;
  /** Ends the watch. */
  stop(): Promise<void>;
}

/** Watches the namespace's objects from now on, recording every version. */
function observe(client: KubeClient, namespace: string): Observed {
  const controller = new AbortController();
  const creates = new Map<string, Set<string>>();
  const updates = new Map<string, Set<string>>();
  const finalizers = new Map<string, string[]>();
  const add = (map: Map<string, Set<string>>, key: string, value: string) =>
    map.set(key, (map.get(key) ?? new Set()).add(value));
  let gaps = 0;
  const done = (async () => {
    const stream = watcher(client.api, KOPFEXAMPLES, { namespace, signal: controller.signal });
    for await (const event of stream) {
      // A watch the server ended resumes from its last version and misses none; a relist may.
      if (event.type === "connected" && event.reason === "gone") gaps++;
      if (event.type !== "apply" && event.type !== "initApply") continue;
      const name = event.object.metadata?.name ?? "";
      const status = event.object.status as
        | { create_fn?: { replica?: string }; update_fn?: { replica?: string; value?: number } }
        | undefined;
      if (status?.create_fn?.replica) add(creates, name, status.create_fn.replica);
      if (status?.update_fn?.replica) {
        add(updates, `${name} ${status.update_fn.value}`, status.update_fn.replica);
      }
      const list = JSON.stringify(event.object.metadata?.finalizers ?? []);
      const seen = finalizers.get(name) ?? [];
      if (seen.at(-1) !== list) seen.push(list);
      finalizers.set(name, seen);
    }
  })().catch(() => {});
  return {
    creates,
    updates,
    finalizers,
    gaps: () => gaps,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

/**
 * Every object's finalizer was added once by its first handling and never touched again: a
 * rebalance (released and taken-over objects) changes no finalizer.
 */
function assertFinalizersAddedOnce(observed: Observed, names: readonly string[]) {
  assert.equal(observed.gaps(), 0, "the test's watch saw every version");
  const changed = names.map((name) => [name, observed.finalizers.get(name) ?? []] as const)
    .filter(([, lists]) => JSON.stringify(lists) !== JSON.stringify(["[]", `["${FINALIZER}"]`]));
  assert.deepEqual(changed, [], "finalizer lists other than [] → [finalizer]");
}

function count(runs: readonly Run[], handler: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const run of runs) {
    if (run.handler === handler) counts.set(run.name, (counts.get(run.name) ?? 0) + 1);
  }
  return counts;
}

Deno.test(
  "3 sharded replicas over 300 objects: every create handler runs exactly once, each replica a share, the server sends each replica only its shards' events; kopf shards prints the holders (X-SCALE-10, X-SCALE-11, X-SCALE-20)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-300");
    using _ = client;
    const runs: Run[] = [];
    const engines = ["r1", "r2", "r3"].map(() => new MetricsEngine({ process: false }));
    const ops = await Promise.all(
      ["r1", "r2", "r3"].map((id, i) => replica(runs, namespace, id, undefined, engines[i])),
    );
    try {
      await balanced(client, namespace, 3);
      for (const op of ops) await op.waitForLog(/the API server filters the watches/);
      const names = Array.from({ length: 300 }, (_, i) => `o-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => count(runs, "create").size === 300, 120_000, "300 creations");
      await sleep(1_000); // a duplicate, if any, would show up now
      const creates = count(runs, "create");
      assert.deepEqual([...creates.values()].filter((n) => n !== 1), [], "exactly once each");
      const byReplica = new Map<string, number>();
      for (const run of runs) byReplica.set(run.replica, (byReplica.get(run.replica) ?? 0) + 1);
      assert.equal(byReplica.size, 3, `every replica handled a share: ${[...byReplica]}`);
      for (const engine of engines) {
        assert.ok(await watchEvents(engine, "ADDED") > 0);
        assert.equal(await watchEvents(engine, "FILTERED"), 0, "the server sent only ours");
      }

      const lines: string[] = [];
      const code = await main(["shards", "--lease-namespace", namespace], {
        write: (line) => lines.push(line),
        kubeconfig: await kubeconfigPath(),
      });
      assert.equal(code, 0, lines.join("\n"));
      const text = lines.join("\n");
      for (const id of ["r1", "r2", "r3"]) assert.match(text, new RegExp(`\\b${id}\\b`));
      assert.match(text, /shard\s+range\s+holder/i);
    } finally {
      await Promise.all(ops.map((op) => op.stop()));
    }
  },
);

/**
 * Scales 1 → `peak` → 1 replicas while 60 objects are created and changed, and asserts: no
 * completed handler ran twice, the last change of every object was handled, no deletion handling
 * and no finalizer changes because of the rebalances, every replica worked.
 * @param connect A client for each replica (a private plane); else the shared plane's.
 */
async function scaleWhileChanging(
  client: KubeClient,
  namespace: string,
  peak: number,
  connect?: () => Promise<KubeClient>,
) {
  const runs: Run[] = [];
  const names = Array.from({ length: 60 }, (_, i) => `s-${i}`);
  const values = new Map<string, number>();
  const observed = observe(client, namespace);
  const start = async (id: string) =>
    replica(runs, namespace, id, connect ? await connect() : undefined);
  const first = await start("a");
  const others: InProcessOperator[] = [];
  try {
    await balanced(client, namespace, 1);
    await createExamples(client, namespace, names.slice(0, 30));
    let changing = true;
    const changer = (async () => {
      for (let round = 1; changing; round++) {
        for (const name of names.slice(0, 30)) {
          await client.api.patch(KOPFEXAMPLES, name, { spec: { value: round } }, { namespace });
          values.set(name, round);
        }
        await sleep(300);
      }
    })();
    for (const id of ["b", "c", "d"].slice(0, peak - 1)) others.push(await start(id));
    await balanced(client, namespace, peak);
    await createExamples(client, namespace, names.slice(30));
    // Holding shards is not yet working on them (a new replica lists its shards first): each
    // replica handles something before the scale-down, or the test would prove nothing of it.
    const ids = ["b", "c", "d"].slice(0, peak - 1);
    await eventually(
      () => ids.every((id) => runs.some((r) => r.replica === id)),
      30_000,
      "every new replica at work",
    );
    for (const op of others) await op.stop();
    await balanced(client, namespace, 1);
    changing = false;
    await changer;

    await eventually(() => count(runs, "create").size === 60, 60_000, "60 creations");
    await eventually(
      () =>
        names.slice(0, 30).every((name) =>
          runs.some((r) => r.name === name && r.handler === `update:${values.get(name)}`)
        ),
      60_000,
      "the last change of every object to be handled",
    );
    await sleep(1_000);
    assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
    const updates = new Map<string, number>();
    for (const r of runs.filter((r) => r.handler.startsWith("update:"))) {
      const key = `${r.name} ${r.handler}`;
      updates.set(key, (updates.get(key) ?? 0) + 1);
    }
    assert.deepEqual([...updates].filter(([, n]) => n > 1), [], "no update handled twice");
    assert.deepEqual(
      runs.filter((r) => r.handler === "delete" || r.handler === "deleted-event"),
      [],
    );
    const objects = (await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace })).items;
    assert.equal(objects.length, 60);
    assert.ok(objects.every((o) => !o.metadata?.deletionTimestamp));
    assertFinalizersAddedOnce(observed, names);
    assert.equal(new Set(runs.map((r) => r.replica)).size, peak, "every replica worked");
  } finally {
    for (const op of others) await op.stop();
    await first.stop();
    await observed.stop();
  }
}

Deno.test(
  "scaling 1 → 3 → 1 while objects are created and changed: no completed handler runs twice, no change is lost, no deletion handling, no finalizer changes (X-SCALE-12, X-SCALE-13)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-scale");
    using _ = client;
    await scaleWhileChanging(client, namespace, 3);
  },
);

Deno.test(
  "SIGKILL of one of 3 kopf run --shards replicas mid-run, its handlers in flight while objects are created and changed: the others take its shards over after the lease expires; every object handled, no completed handler run twice, no change lost (X-SCALE-14)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-kill");
    using _ = client;
    const observed = observe(client, namespace);
    const spawn = (replica: string) =>
      spawnOperator(
        [
          "tests/_scaling_operator.ts",
          "-n",
          namespace,
          "--standalone",
          "--shards",
          "--shard-count",
          String(SHARDS),
          "--lease-namespace",
          namespace,
          "--log-format",
          "plain",
        ],
        {
          REPLICA: replica,
          POD_NAME: `pod-${replica}`,
          KOPF_TEST_LEASE: "4,3,0.5",
          KOPF_TEST_SLOW: "2", // create handlers in flight for 2 s: the kill cuts some
        },
      );
    const ops = await Promise.all(["a", "b", "c"].map(spawn));
    const lines = (prefix: string) =>
      ops.flatMap((op) => op.lines).filter((l) => l.startsWith(prefix)).map((l) => {
        const [, handler, key, replica] = l.split(" ");
        return { handler: handler!, name: key!.split("/")[1]!, replica: replica! };
      });
    const names = Array.from({ length: 60 }, (_, i) => `k-${i}`);
    const values = new Map<string, number>();
    let changing = true;
    try {
      const status = await balanced(client, namespace, 3);
      const victim = status.members.find((m) => m.identity.startsWith("pod-b"))!;
      // Objects keep coming and changing before, during and after the kill and the takeover.
      const creator = (async () => {
        for (const name of names) {
          await createExamples(client, namespace, [name]);
          values.set(name, 0);
          await sleep(100);
        }
      })();
      const changer = (async () => {
        for (let round = 1; changing; round++) {
          for (const name of [...values.keys()]) {
            await client.api.patch(KOPFEXAMPLES, name, { spec: { value: round } }, { namespace });
            values.set(name, round);
          }
          await sleep(300);
        }
      })();
      // The victim has completed some creations and has others in flight.
      const inFlight = () => {
        const done = new Set(
          lines("RUN create ").filter((r) => r.replica === "b").map((r) => r.name),
        );
        const started = lines("START create ").filter((r) => r.replica === "b");
        const cut = started.map((r) => r.name).filter((name) => !done.has(name));
        return cut.length && done.size >= 3 ? cut : undefined;
      };
      const cut = await eventually(inFlight, 60_000, "the victim's create handlers in flight");
      const createdBeforeKill = values.size;
      ops[1]!.kill("SIGKILL");
      await ops[1]!.exited;
      await creator;
      assert.ok(createdBeforeKill < names.length, "objects were still being created at the kill");
      // Lease duration 4 s; "a few seconds" on a loaded machine: the bound is generous (the
      // takeover time is measured by bench/scale_out.ts).
      const after = await balanced(client, namespace, 2, 4_000 + 30_000);
      assert.ok(!after.members.some((m) => m.identity === victim.identity));
      await sleep(1_000); // a few more changes after the takeover
      changing = false;
      await changer;

      // Every object handled, and its last change too (the diff-base holds the last value).
      await eventually(
        async () => {
          const { items } = await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace });
          return items.length === names.length && items.every((o) => {
            const base = o.metadata?.annotations?.["kopf.zalando.org/last-handled-configuration"];
            const value = base && (JSON.parse(base) as { spec?: { value?: number } }).spec?.value;
            return (o.status as { create_fn?: unknown } | undefined)?.create_fn !== undefined &&
              value === values.get(o.metadata?.name ?? "");
          });
        },
        90_000,
        "every object's creation and last change handled",
      );
      await sleep(1_000); // a repeat, if any, would show up now

      // No completed handler ran twice: a persisted result is final. Each creation's result
      // was persisted by one replica only; the survivors (which released nothing) ran it at
      // most once, and not at all if the victim had persisted it; the victim at most once.
      const runs = lines("RUN create ");
      const problems: string[] = [];
      for (const name of names) {
        const persisted = [...(observed.creates.get(name) ?? [])];
        const by = (replicas: string[]) =>
          runs.filter((r) => r.name === name && replicas.includes(r.replica)).length;
        if (persisted.length !== 1) problems.push(`${name}: results of ${persisted}`);
        if (by(["a", "c"]) > (persisted[0] === "b" ? 0 : 1)) problems.push(`${name}: survivors`);
        if (by(["b"]) > 1) problems.push(`${name}: victim ran it twice`);
      }
      const updates = lines("RUN update:");
      for (const key of new Set(updates.map((r) => `${r.name} ${r.handler.slice(7)}`))) {
        const [name, value] = key.split(" ");
        const persisted = [...(observed.updates.get(key) ?? [])];
        const by = (replicas: string[]) =>
          updates.filter((r) =>
            r.name === name && r.handler === `update:${value}` && replicas.includes(r.replica)
          ).length;
        if (persisted.length > 1) problems.push(`${key}: results of ${persisted}`);
        if (by(["a", "c"]) > (persisted[0] === "b" ? 0 : 1)) problems.push(`${key}: survivors`);
        if (by(["b"]) > 1) problems.push(`${key}: victim ran it twice`);
      }
      assert.deepEqual(problems, [], "no completed handler ran twice");
      // The handlers the kill cut were finished by the survivors.
      for (const name of cut) {
        assert.notEqual([...observed.creates.get(name)!][0], "b", `${name} was cut`);
      }
      assert.deepEqual(
        ops.flatMap((op) => op.lines).filter((l) => /^RUN (delete|deleted-event) /.test(l)),
        [],
      );
      assertFinalizersAddedOnce(observed, names);
      const takenOver = runs.filter((r) => r.replica !== "b" && cut.includes(r.name));
      assert.equal(takenOver.length, cut.length, "each cut handler finished by one survivor");
    } finally {
      changing = false;
      for (const op of ops) await op.stop().catch(() => {});
      await observed.stop();
    }
  },
);

Deno.test(
  "the fallback with the ShardedListAndWatch gate off: the server ignores shardSelector, the replicas filter by the same hash (counted as FILTERED watch events); each create handler runs exactly once; scaling 1 → 2 → 1 while objects are created and changed runs nothing twice, loses no change, touches no finalizer (X-SCALE-15)",
  opts,
  async () => {
    await using plane = await ControlPlane.start({
      controllerManager: false,
      featureGates: { ShardedListAndWatch: false },
    });
    const connect = async () =>
      new KubeClient(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
    using client = await connect();
    await applyCrds(client, "crds/example.yaml");
    const namespace = "default";
    const runs: Run[] = [];
    const engines = [new MetricsEngine({ process: false }), new MetricsEngine({ process: false })];
    const ops = [
      await replica(runs, namespace, "f1", await connect(), engines[0]),
      await replica(runs, namespace, "f2", await connect(), engines[1]),
    ];
    try {
      for (const op of ops) await op.waitForLog(/does not filter by shardSelector/);
      await balanced(client, namespace, 2);
      const names = Array.from({ length: 20 }, (_, i) => `f-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => count(runs, "create").size === 20, 60_000, "20 creations");
      await sleep(1_000);
      assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
      assert.equal(new Set(runs.map((r) => r.replica)).size, 2, "both replicas handled a share");
      // Each object reaches all 4 shard watches of each replica; at most one keeps it.
      for (const engine of engines) {
        const filtered = await watchEvents(engine, "FILTERED");
        assert.ok(filtered >= 3 * names.length, `FILTERED ${filtered}`);
      }
    } finally {
      for (const op of ops) await op.stop();
    }
    // Rebalancing with client-side filtering only: the same guarantees.
    await scaleWhileChanging(client, await createTestNamespace(plane, "shard-off"), 2, connect);
  },
);

Deno.test(
  "daemons follow their shards and never run on two replicas at once; every replica indexes all objects (X-SCALE-16)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-daemons");
    using _ = client;
    // Enough objects that the third replica's shards hold some (else nothing would move).
    const names = Array.from({ length: 40 }, (_, i) => `d-${i}`);
    await createExamples(client, namespace, names); // before the replicas: full indices at once
    interface Life {
      replica: string;
      name: string;
      started: number;
      stopped?: number;
      indexed: number;
    }
    const lives: Life[] = [];
    const start = (identity: string) =>
      startOperator((registry: OperatorRegistry) => {
        index("kopfexamples", { registry }, function byName({ name }) {
          return { all: name };
        });
        daemon("kopfexamples", { registry }, async function worker({ name, signal, indices }) {
          const life: Life = {
            replica: identity,
            name: name ?? "",
            started: performance.now(),
            indexed: indices.byName?.get("all")?.size ?? -1,
          };
          lives.push(life);
          await new Promise<void>((resolve) =>
            signal.addEventListener("abort", () => resolve(), { once: true })
          );
          life.stopped = performance.now();
        });
      }, { namespaces: [namespace], settings: settings(namespace, identity) });
    const running = () => lives.filter((l) => l.stopped === undefined);
    const ops = [await start("da"), await start("db")];
    try {
      await balanced(client, namespace, 2);
      await eventually(
        () => new Set(running().map((l) => l.name)).size === names.length,
        60_000,
        "a daemon per object",
      );
      ops.push(await start("dc"));
      await balanced(client, namespace, 3);
      await eventually(
        () =>
          running().some((l) => l.replica === "dc") &&
          new Set(running().map((l) => l.name)).size === names.length &&
          running().length === names.length,
        60_000,
        "the daemons of the third replica's shards to move to it",
      );
      for (const name of names) {
        const spans = lives.filter((l) => l.name === name).sort((a, b) => a.started - b.started);
        for (let i = 1; i < spans.length; i++) {
          const before = spans[i - 1]!;
          assert.ok(
            before.stopped !== undefined && before.stopped <= spans[i]!.started,
            `${name}: the daemon on ${spans[i]!.replica} started before the one on ` +
              `${before.replica} stopped`,
          );
        }
      }
      assert.ok(lives.some((l) => l.stopped !== undefined), "some daemons moved");
      assert.deepEqual(
        lives.filter((l) => l.indexed !== names.length).map((l) => `${l.replica}/${l.name}`),
        [],
        `every replica's index holds all objects, not only its shards': ${JSON.stringify(lives)}`,
      );
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "--shard-by namespace: all objects of a namespace go to one replica; each handled once (X-SCALE-18)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-ns");
    using _ = client;
    const namespaces = [namespace];
    for (let i = 0; i < 5; i++) namespaces.push(await testNamespace("shard-ns"));
    const seen: Array<{ namespace: string; name: string; replica: string }> = [];
    const start = (identity: string) => {
      const s = settings(namespace, identity);
      s.sharding.key = "namespace";
      return startOperator((registry: OperatorRegistry) => {
        on.create("kopfexamples", { registry }, function create_fn({ name, namespace }) {
          seen.push({ namespace: namespace ?? "", name: name ?? "", replica: identity });
        });
      }, { namespaces, settings: s });
    };
    const ops = [await start("na"), await start("nb")];
    try {
      await balanced(client, namespace, 2);
      for (const ns of namespaces) await createExamples(client, ns, ["x", "y", "z"]);
      await eventually(() => seen.length >= 3 * namespaces.length, 60_000, "all creations");
      await sleep(1_000);
      assert.equal(seen.length, 3 * namespaces.length, "each object once");
      for (const ns of namespaces) {
        const replicas = new Set(seen.filter((s) => s.namespace === ns).map((s) => s.replica));
        assert.equal(replicas.size, 1, `${ns} handled by ${[...replicas]}`);
      }
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "a released shard lets its handlers in flight finish and persist: the next holder does not repeat them (X-SCALE-12)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-inflight");
    using _ = client;
    const runs: Array<{ name: string; replica: string; finished?: boolean }> = [];
    const start = (identity: string) =>
      startOperator((registry: OperatorRegistry) => {
        on.create("kopfexamples", { registry }, async function slow_fn({ name }) {
          const run: { name: string; replica: string; finished?: boolean } = {
            name: name ?? "",
            replica: identity,
          };
          runs.push(run);
          await sleep(1_000); // not cut by the release: well within settings.queueing.exitTimeout
          run.finished = true;
        });
      }, { namespaces: [namespace], settings: settings(namespace, identity) });
    const ops = [await start("ia")];
    try {
      await balanced(client, namespace, 1);
      const names = Array.from({ length: 8 }, (_, i) => `i-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => runs.length === names.length, 30_000, "all handlers started");
      ops.push(await start("ib")); // ia releases half of its shards while the handlers run
      await balanced(client, namespace, 2);
      await eventually(
        async () => {
          const { items } = await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace });
          const done = items.filter((o) =>
            (o.metadata?.annotations ?? {})["kopf.zalando.org/last-handled-configuration"]
          );
          return done.length === names.length;
        },
        30_000,
        "every object handled and persisted",
      );
      await sleep(1_000);
      assert.deepEqual(
        runs.filter((r) => r.replica === "ib").map((r) => r.name),
        [],
        "the new holder repeated none",
      );
      assert.ok(runs.every((r) => r.finished), "every run finished");
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "a replica stopping gracefully lets its handlers in flight finish and persist: the replica taking over does not repeat them (X-SCALE-12)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-stop");
    using _ = client;
    const runs: Array<{ name: string; replica: string; finished?: boolean }> = [];
    const start = (identity: string) =>
      startOperator((registry: OperatorRegistry) => {
        on.create("kopfexamples", { registry }, async function slow_fn({ name }) {
          const run: { name: string; replica: string; finished?: boolean } = {
            name: name ?? "",
            replica: identity,
          };
          runs.push(run);
          await sleep(1_000); // well within settings.queueing.exitTimeout
          run.finished = true;
        });
      }, { namespaces: [namespace], settings: settings(namespace, identity) });
    const ops = [await start("sa"), await start("sb")];
    try {
      await balanced(client, namespace, 2);
      const names = Array.from({ length: 8 }, (_, i) => `g-${i}`);
      await createExamples(client, namespace, names);
      await eventually(() => runs.length === names.length, 30_000, "all handlers started");
      const leaving = runs.filter((r) => r.replica === "sb").map((r) => r.name);
      await ops[1]!.stop(); // while its handlers run
      await balanced(client, namespace, 1);
      await eventually(
        async () => {
          const { items } = await client.api.list<KubeObject>(KOPFEXAMPLES, { namespace });
          const done = items.filter((o) =>
            (o.metadata?.annotations ?? {})["kopf.zalando.org/last-handled-configuration"]
          );
          return done.length === names.length;
        },
        30_000,
        "every object handled and persisted",
      );
      await sleep(1_000);
      assert.deepEqual(
        runs.filter((r) => r.replica === "sa" && leaving.includes(r.name)).map((r) => r.name),
        [],
        "the replica taking over repeated none",
      );
      assert.ok(runs.every((r) => r.finished), "every run finished");
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "timers follow their shards: an object's ticks move from one replica to the next and never come back or interleave (X-SCALE-16)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-timers");
    using _ = client;
    // Enough objects that the third replica's shards hold some (else nothing would move).
    const names = Array.from({ length: 40 }, (_, i) => `t-${i}`);
    await createExamples(client, namespace, names);
    const ticks: Array<{ name: string; replica: string }> = [];
    const start = (identity: string) =>
      startOperator((registry: OperatorRegistry) => {
        timer("kopfexamples", { registry, interval: 0.5 }, function tick({ name }) {
          ticks.push({ name: name ?? "", replica: identity });
        });
      }, { namespaces: [namespace], settings: settings(namespace, identity) });
    const ops = [await start("ta"), await start("tb")];
    try {
      await balanced(client, namespace, 2);
      await eventually(
        () => new Set(ticks.map((t) => t.name)).size === names.length,
        30_000,
        "every object ticking",
      );
      ops.push(await start("tc"));
      await balanced(client, namespace, 3);
      const from = ticks.length;
      await eventually(
        () => ticks.slice(from).some((t) => t.replica === "tc"),
        30_000,
        "the third replica's timers ticking",
      );
      await sleep(1_000);
      for (const name of names) {
        const sequence = ticks.filter((t) => t.name === name).map((t) => t.replica)
          .filter((replica, i, all) => i === 0 || all[i - 1] !== replica);
        assert.equal(new Set(sequence).size, sequence.length, `${name}: ${sequence.join(" → ")}`);
      }
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "on the emulator: two sharded replicas with server-side filtering split the objects, each handled once, none filtered on the client (X-SCALE-40)",
  opts,
  async () => {
    await using emulator = await Emulator.start();
    const connect = async () =>
      new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
    using client = await connect();
    await applyCrds(client, "crds/example.yaml");
    const runs: Run[] = [];
    const engines = [new MetricsEngine({ process: false }), new MetricsEngine({ process: false })];
    const ops = [
      await replica(runs, "default", "e1", await connect(), engines[0]),
      await replica(runs, "default", "e2", await connect(), engines[1]),
    ];
    try {
      for (const op of ops) await op.waitForLog(/the API server filters the watches/);
      await balanced(client, "default", 2);
      await createExamples(client, "default", Array.from({ length: 20 }, (_, i) => `e-${i}`));
      await eventually(() => count(runs, "create").size === 20, 30_000, "20 creations");
      await sleep(500);
      assert.deepEqual([...count(runs, "create").values()].filter((n) => n !== 1), []);
      assert.equal(new Set(runs.map((r) => r.replica)).size, 2, "both replicas handled a share");
      // Objects created once the shards' streams run certainly arrive through their watches
      // (the first ones may come with the streams' first listing instead).
      await createExamples(client, "default", Array.from({ length: 20 }, (_, i) => `f-${i}`));
      await eventually(() => count(runs, "create").size === 40, 30_000, "40 creations");
      for (const engine of engines) {
        assert.ok(await watchEvents(engine, "ADDED") > 0);
        assert.equal(await watchEvents(engine, "FILTERED"), 0, "the server sent only ours");
      }
    } finally {
      for (const op of ops) await op.stop();
    }
    // Its directory (the kubeconfig with the token) goes when it stops: nothing left in /tmp.
    const dir = emulator.kubeconfigPath.replace(/\/kubeconfig$/, "");
    await emulator.stop();
    await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, `${dir} is left behind`);
  },
);

const SHARDCLUSTERS: Resource = {
  group: "sharding.kopf.dev",
  version: "v1",
  plural: "shardclusters",
  singular: "shardcluster",
  kind: "ShardCluster",
  namespaced: false,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

Deno.test(
  "cluster-scoped resources are sharded by uid: each object handled once, by the holder of its shard (X-SCALE-16)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-cluster");
    using _ = client;
    await applyCrdObjects(client, [{
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "shardclusters.sharding.kopf.dev" },
      spec: {
        group: "sharding.kopf.dev",
        scope: "Cluster",
        names: { plural: "shardclusters", singular: "shardcluster", kind: "ShardCluster" },
        versions: [{
          name: "v1",
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
          },
        }],
      },
    }]);
    const seen: Array<{ name: string; replica: string }> = [];
    const start = (identity: string) => {
      const s = settings(namespace, identity);
      s.sharding.key = "namespace"; // ignored for cluster-scoped resources: always by uid
      return startOperator((registry: OperatorRegistry) => {
        on.create("shardclusters.v1.sharding.kopf.dev", { registry }, function create_fn({ name }) {
          if (name?.startsWith(`${namespace}-`)) seen.push({ name, replica: identity });
        });
      }, { namespaces: [namespace], settings: s });
    };
    const ops = [await start("ca"), await start("cb")];
    const names = Array.from({ length: 8 }, (_, i) => `${namespace}-${i}`);
    try {
      const status = await balanced(client, namespace, 2);
      const created: KubeObject[] = [];
      for (const name of names) {
        created.push(
          await client.api.create(SHARDCLUSTERS, {
            apiVersion: "sharding.kopf.dev/v1",
            kind: "ShardCluster",
            metadata: { name },
          }),
        );
      }
      await eventually(() => seen.length >= names.length, 60_000, "all creations");
      await sleep(1_000);
      assert.equal(seen.length, names.length, "each object once");
      const holders = new Map(status.shards.map((s) => [s.shard, s.holder]));
      for (const object of created) {
        const shard = shardOfObject(object, "uid", SHARDS);
        const handler = seen.find((s) => s.name === object.metadata?.name)?.replica;
        assert.equal(handler, holders.get(shard), `${object.metadata?.name} in shard ${shard}`);
      }
    } finally {
      for (const op of ops) await op.stop();
      for (const name of names) await client.api.delete(SHARDCLUSTERS, name).catch(() => {});
    }
  },
);

Deno.test(
  "kopf shards where no sharded operator runs: exit 1 and says where it looked",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-none");
    using _ = client;
    const lines: string[] = [];
    const code = await main(["shards", "--lease-namespace", namespace], {
      write: (line) => lines.push(line),
      kubeconfig: await kubeconfigPath(),
    });
    assert.equal(code, 1);
    assert.deepEqual(lines, [
      `error: No shard Leases 'kopf-*' in namespace ${namespace}: is kopf run --shards running there?`,
    ]);
  },
);

Deno.test(
  "admission webhooks: a sharded replica leaving does not remove them from the managed configuration, since the other replicas serve them (X-SCALE-22)",
  opts,
  async () => {
    const { client, namespace } = await setup("shard-adm");
    using _ = client;
    const managed = `${namespace}.kopf.dev`;
    const s = settings(namespace, "wa");
    s.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    s.admission.managed = managed;
    const op = await startOperator((registry: OperatorRegistry) => {
      on.validate("kopfexamples", {
        registry,
        labels: { "shard-adm": namespace }, // matches no object: the API is not slowed
        ignoreFailures: true,
      }, function check() {});
    }, { namespaces: [namespace], settings: s });
    const webhooks = async () => {
      const config = await client.api.get(WEBHOOK_CONFIGURATIONS.validating, managed)
        .catch(() => undefined) as { webhooks?: Array<{ name: string }> } | undefined;
      return (config?.webhooks ?? []).map((w) => w.name);
    };
    try {
      await eventually(async () => (await webhooks()).length === 1, 30_000, "the webhook");
      await op.stop();
      assert.ok(op.logs.some((e) => /Leaving the webhooks in .* as they are/.test(e.message)));
      assert.deepEqual(await webhooks(), [`check.${managed}`], "kept for the other replicas");
    } finally {
      await op.stop();
      for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
        await client.api.delete(resource, managed).catch(() => {});
      }
    }
  },
);
