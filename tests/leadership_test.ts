/**
 * Leader election against the real API server: two replicas, only the holder of the Lease
 * handles and the standby sends nothing but Lease requests; a graceful stop releases the Lease
 * so the standby takes over at once; SIGTERM and SIGKILL of a `kopf run --leader-elect` leader;
 * a leader cut off from the API server stops handling after the renew deadline (and exits, or
 * with `onLost: "standby"` leads again once it can); with peering, `kopf freeze` pauses the
 * leader while the standby stays idle; two operators embedded with `start()` in one process.
 * Lease timings are shortened (lease 4 s, deadline 3 s, retry 0.5 s) so expiries fit a test.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { daemon, timer } from "../core/api/spawning.ts";
import type { KubeClient } from "../core/client/client.ts";
import type { Lease } from "../core/client/leases.ts";
import { LEASES } from "../core/client/leases.ts";
import { LeadershipLostError } from "../core/engines/coordination/leadership.ts";
import { NAMESPACED_PEERINGS, parsePeers } from "../core/engines/coordination/peering.ts";
import { main } from "../core/cli/main.ts";
import { OperatorRegistry, start } from "../mod.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  PausableTcpProxy,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function settings(namespace: string, tweak: (s: OperatorSettings) => void = () => {}) {
  const s = createSettings({
    posting: { enabled: false },
    leadership: {
      enabled: true,
      namespace,
      leaseDuration: 4,
      renewDeadline: 3,
      retryPeriod: 0.5,
    },
  });
  tweak(s);
  return s;
}

async function setup(prefix: string) {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace(prefix);
  return { client, namespace };
}

async function createExample(client: KubeClient, namespace: string, name: string) {
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name },
    spec: {},
  }, { namespace });
}

async function holder(client: KubeClient, namespace: string, name = "kopf-leader") {
  const lease = await client.api.get<Lease>(LEASES, name, { namespace });
  return lease.spec?.holderIdentity ?? "";
}

function recording(seen: string[]) {
  return (registry: Parameters<Parameters<typeof startOperator>[0]>[0]) => {
    on.create("kopfexamples", { registry }, function create_fn({ name }) {
      seen.push(name ?? "");
    });
  };
}

Deno.test(
  "leader election: only the leader handles, the standby sends only Lease requests, a graceful stop releases the Lease and the standby takes over (X-SCALE-01, X-SCALE-02)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-two");
    using _ = client;
    const seenA: string[] = [];
    const seenB: string[] = [];
    const a = await startOperator(recording(seenA), {
      namespaces: [namespace],
      settings: settings(namespace, (s) => (s.leadership.identity = "replica-a")),
    });
    try {
      await a.waitForLog(/Leading: acquired Lease/);
      await using b = await startOperator(recording(seenB), {
        namespaces: [namespace],
        settings: settings(namespace, (s) => (s.leadership.identity = "replica-b")),
      });
      await b.waitForLog(/Standing by: Lease .* is held by replica-a/);
      const before = b.client.counters.snapshot();
      await a.ready;
      await createExample(client, namespace, "one");
      await eventually(() => seenA.includes("one"), 30_000, "the leader to handle 'one'");
      await new Promise((resolve) => setTimeout(resolve, 1_000)); // a few standby rounds
      const standby = b.client.counters.since(before);
      assert.ok(standby.count({ resource: "leases" }) > 0, "the standby keeps trying");
      assert.equal(standby.count(), standby.count({ resource: "leases" }), "nothing but Leases");
      assert.equal(seenB.length, 0);

      await a.stop();
      // Released, not left to expire: empty, or already the standby's.
      assert.notEqual(await holder(client, namespace), "replica-a");
      await b.waitForLog(/Leading: acquired Lease/);
      await createExample(client, namespace, "two");
      await eventually(() => seenB.includes("two"), 30_000, "the new leader to handle 'two'");
      assert.deepEqual(seenA, ["one"]);
      assert.deepEqual(seenB, ["two"]);
    } finally {
      await a.stop();
    }
  },
);

Deno.test(
  "leader election with kopf run: SIGTERM hands over at once, SIGKILL after the lease expires; every object handled once (X-SCALE-03)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-cli");
    using _ = client;
    const args = (replica: string) =>
      spawnOperator(
        [
          "tests/_scaling_operator.ts",
          "-n",
          namespace,
          "--standalone",
          "--leader-elect",
          "--lease-namespace",
          namespace,
          "--log-format",
          "plain",
        ],
        { REPLICA: replica, POD_NAME: `pod-${replica}`, KOPF_TEST_LEASE: "4,3,0.5" },
      );
    const ops = [await args("a"), await args("b")];
    const all = () => ops.flatMap((op) => op.lines);
    try {
      const leading = () => ops.findIndex((op) => op.lines.some((l) => /Leading:/.test(l)));
      await eventually(() => leading() >= 0, 60_000, "a leader");
      const first = ops[leading()]!;
      const second = ops[1 - leading()]!;
      await second.waitForLine(/Standing by/, 30_000);
      await createExample(client, namespace, "one");
      await eventually(() => first.lines.some((l) => l.startsWith(`RUN create ${namespace}/one`)));

      assert.equal(await first.stop(), 0, "a graceful exit");
      assert.ok(first.lines.some((l) => /Released leadership/.test(l)), first.lines.join("\n"));
      await second.waitForLine(/Leading:/, 30_000);
      await createExample(client, namespace, "two");
      await eventually(() => second.lines.some((l) => l.startsWith(`RUN create ${namespace}/two`)));

      const third = await args("c");
      ops.push(third);
      await third.waitForLine(/Standing by/, 60_000);
      second.kill("SIGKILL");
      await second.exited;
      await third.waitForLine(/Leading:/, 30_000);
      await createExample(client, namespace, "three");
      await eventually(() =>
        third.lines.some((l) => l.startsWith(`RUN create ${namespace}/three`))
      );

      const creates = all().filter((l) => l.startsWith("RUN create "));
      assert.deepEqual(creates.map((l) => l.split(" ")[2]).sort(), [
        `${namespace}/one`,
        `${namespace}/three`,
        `${namespace}/two`,
      ]);
    } finally {
      for (const op of ops) await op.stop();
    }
  },
);

Deno.test(
  "a leader that cannot renew stops handling at once: its daemon is stopped and it exits with LeadershipLostError (X-SCALE-04)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-lost");
    using _ = client;
    await createExample(client, namespace, "d");
    const proxy = PausableTcpProxy.inFrontOf(client);
    const proxied = proxy.client(client);
    const stops: string[] = [];
    let started = 0;
    const op = await startOperator((registry) => {
      daemon("kopfexamples", { registry }, async function worker({ signal }) {
        started++;
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true })
        );
        stops.push(String(signal.reason));
      });
    }, { namespaces: [namespace], client: proxied, settings: settings(namespace) });
    try {
      await eventually(() => started === 1, 30_000, "the daemon to start");
      proxy.pause();
      await op.waitForLog(/Leadership lost: could not renew/, 30_000);
      await eventually(() => stops.length === 1, 30_000, "the daemon to be stopped");
      const error = await op.stop().then(() => undefined, (e) => e);
      assert.ok(error instanceof LeadershipLostError, String(error));
    } finally {
      proxy.resume();
      await op.stop().catch(() => {});
      await proxy[Symbol.asyncDispose]();
    }
  },
);

Deno.test(
  "onLost: standby: a leader that cannot renew stops handling at once (its handler's signal, daemon and timer), stays alive, and leads and handles again once the API answers (X-SCALE-04)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-standby");
    using _ = client;
    await createExample(client, namespace, "d");
    const proxy = PausableTcpProxy.inFrontOf(client);
    const proxied = proxy.client(client);
    const daemons: Array<{ stopped?: string }> = [];
    const ticks: number[] = [];
    const runs: Array<{ name: string; aborted?: string }> = [];
    const only = (name: string) => ({ when: (c: { name?: string }) => c.name === name });
    const op = await startOperator((registry) => {
      daemon("kopfexamples", { registry, ...only("d") }, async function worker({ signal }) {
        const life: { stopped?: string } = {};
        daemons.push(life);
        await new Promise<void>((resolve) =>
          signal.addEventListener("abort", () => resolve(), { once: true })
        );
        life.stopped = String(signal.reason);
      });
      timer("kopfexamples", { registry, interval: 0.3, ...only("d") }, function tick() {
        ticks.push(performance.now());
      });
      on.create("kopfexamples", { registry }, async function create_fn({ name, signal }) {
        const run: { name: string; aborted?: string } = { name: name ?? "" };
        runs.push(run);
        // The first run of 'slow' is in flight when the leadership goes; later runs finish.
        if (name === "slow" && runs.filter((r) => r.name === "slow").length === 1) {
          await new Promise<void>((resolve) =>
            signal.addEventListener("abort", () => resolve(), { once: true })
          );
          run.aborted = String(signal.reason);
          throw signal.reason;
        }
      });
    }, {
      namespaces: [namespace],
      client: proxied,
      settings: settings(namespace, (s) => (s.leadership.onLost = "standby")),
    });
    try {
      await eventually(() => daemons.length === 1 && ticks.length >= 2, 30_000, "daemon, timer");
      await createExample(client, namespace, "slow");
      await eventually(() => runs.some((r) => r.name === "slow"), 30_000, "'slow' in flight");

      proxy.pause();
      await op.waitForLog(/Leadership lost: could not renew/, 30_000);
      await eventually(
        () => daemons[0]!.stopped !== undefined && runs[runs.length - 1]!.aborted !== undefined,
        30_000,
        "the daemon stopped and the handler in flight aborted",
      );
      // Aborted by the loss itself, not after the grace a graceful stop gives (exitTimeout).
      assert.match(runs.find((r) => r.name === "slow")!.aborted!, /^LeadershipLostError: /);
      const ticked = ticks.length;
      await sleep(1_500); // a negative check: a timer still running would tick 5 times by now
      assert.equal(ticks.length, ticked, "the timer stopped");
      assert.equal(daemons.length, 1, "no daemon started while not leading");
      assert.ok(!op.logs.some((e) => /Operator stopped/.test(e.message)), "still running");

      proxy.resume();
      await eventually(
        () => op.logs.filter((e) => /Leading: acquired Lease/.test(e.message)).length === 2,
        30_000,
        "leading again",
      );
      await eventually(() => daemons.length === 2, 30_000, "the daemon started again");
      const resumed = ticks.length;
      await eventually(() => ticks.length > resumed, 30_000, "the timer ticking again");
      await createExample(client, namespace, "after");
      await eventually(() => runs.some((r) => r.name === "after"), 30_000, "'after' handled");
      await eventually(
        () => runs.filter((r) => r.name === "slow").length === 2,
        30_000,
        "the aborted 'slow' run again",
      );
      assert.equal(daemons[1]!.stopped, undefined, "the new daemon runs");
      assert.deepEqual(runs.map((r) => r.name).sort(), ["after", "d", "slow", "slow"]);
      assert.ok(!op.logs.some((e) => /Operator stopped/.test(e.message)), "never exited");
    } finally {
      proxy.resume();
      await op.stop();
      await proxy[Symbol.asyncDispose]();
    }
  },
);

Deno.test(
  "leader election with peering: only the leader is a peer; kopf freeze pauses the leader, the standby stays idle, kopf resume resumes the leader (X-SCALE-05)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-peer");
    using _ = client;
    await applyCrds(client, "crds/peering.yaml");
    await client.api.create(NAMESPACED_PEERINGS, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfPeering",
      metadata: { name: "default" },
    }, { namespace });
    const peers = async () => {
      const object = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
      return parsePeers(object.status).map((p) => p.identity).sort();
    };
    const seenA: string[] = [];
    const seenB: string[] = [];
    const start = (seen: string[], id: string) =>
      startOperator(recording(seen), {
        namespaces: [namespace],
        standalone: false,
        identity: `peer-${id}`,
        settings: settings(namespace, (s) => {
          s.leadership.identity = `replica-${id}`;
          s.peering.lifetime = 60;
        }),
      });
    const a = await start(seenA, "a");
    try {
      await a.waitForLog(/Leading: acquired Lease/);
      await using b = await start(seenB, "b");
      await b.waitForLog(/Standing by: Lease .* is held by replica-a/);
      await a.ready;
      await eventually(async () => (await peers()).join() === "peer-a", 30_000, "a peer");
      const atFreeze = b.client.counters.snapshot();

      const out: string[] = [];
      const write = (line: string) => out.push(line);
      const scope = ["-n", namespace, "--kubeconfig", await kubeconfigPath(), "--id", "tester"];
      assert.equal(await main(["freeze", ...scope, "--lifetime", "60"], { write }), 0, `${out}`);
      await a.waitForLog(/Pausing operations in favour of tester \(priority 100\)/);
      await createExample(client, namespace, "frozen");
      await sleep(1_500); // a negative check: give a wrongly running operator time to react
      assert.deepEqual([...seenA, ...seenB], [], "nobody handles while the leader is frozen");
      assert.ok(!b.logs.some((e) => /Leading:/.test(e.message)), "the standby stays a standby");
      assert.ok(!b.logs.some((e) => /Pausing/.test(e.message)), "the standby is not a peer");
      assert.deepEqual(await peers(), ["peer-a", "tester"]);

      assert.equal(await main(["resume", ...scope], { write }), 0, `${out}`);
      await a.waitForLog(/Resuming operations after the pause/);
      await eventually(() => seenA.includes("frozen"), 30_000, "the leader to handle 'frozen'");
      const standby = b.client.counters.since(atFreeze);
      assert.equal(standby.count(), standby.count({ resource: "leases" }), "nothing but Leases");
      assert.deepEqual(seenB, []);
    } finally {
      await a.stop();
    }
  },
);

Deno.test(
  "embedding: two operators started with kopf's start() and settings.leadership in one process; only one handles, the other takes over when it stops (X-SCALE-01)",
  opts,
  async () => {
    const { client, namespace } = await setup("lead-embed");
    using _ = client;
    const seen: Array<{ name: string; by: string }> = [];
    const clients: KubeClient[] = [];
    const embedded = async (id: string) => {
      const registry = new OperatorRegistry();
      on.create("kopfexamples", { registry }, function create_fn({ name }) {
        seen.push({ name: name ?? "", by: id });
      });
      const logs: string[] = [];
      const own = await testClient();
      clients.push(own);
      const operator = start({
        registry,
        namespaces: [namespace],
        standalone: true,
        client: own,
        settings: settings(namespace, (s) => (s.leadership.identity = id)),
        listeners: [(entry) => logs.push(entry.message)],
      });
      return { operator, logs };
    };
    const one = await embedded("one");
    await eventually(() => one.logs.some((l) => /Leading:/.test(l)), 30_000, "one leads");
    const two = await embedded("two");
    try {
      await eventually(() => two.logs.some((l) => /Standing by/.test(l)), 30_000, "two stands by");
      await one.operator.ready;
      await createExample(client, namespace, "first");
      await eventually(() => seen.length === 1, 30_000, "'first' handled");
      await sleep(1_000); // a negative check: the standby must not handle it too
      assert.deepEqual(seen, [{ name: "first", by: "one" }]);

      await one.operator.stop();
      await eventually(() => two.logs.some((l) => /Leading:/.test(l)), 30_000, "two leads");
      await createExample(client, namespace, "second");
      await eventually(() => seen.length === 2, 30_000, "'second' handled");
      await sleep(1_000);
      assert.deepEqual(seen, [{ name: "first", by: "one" }, { name: "second", by: "two" }]);
    } finally {
      await one.operator.stop();
      await two.operator.stop();
      for (const own of clients) own[Symbol.dispose]();
    }
  },
);
