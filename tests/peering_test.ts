/**
 * Peering against the real API server: priorities pause and resume operators, same priorities
 * pause everyone, `kopf freeze`/`kopf resume`, auto-detection of the `default` peering object,
 * mandatory peering, dead peers, keep-alives and the exit, and daemons stopped by a pause.
 * Lifetimes are a few seconds here so that expiries happen within a test.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { on } from "../core/api/on.ts";
import { daemon } from "../core/api/spawning.ts";
import type { KubeClient } from "../core/client/client.ts";
import {
  CLUSTER_PEERINGS,
  NAMESPACED_PEERINGS,
  parsePeers,
} from "../core/engines/coordination/peering.ts";
import { createSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { type InProcessOperator, spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function settings(lifetime = 4) {
  return createSettings({ posting: { enabled: false }, peering: { lifetime } });
}

async function setup(prefix: string, peering: string | null = "default") {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  await applyCrds(client, "crds/peering.yaml");
  const namespace = await testNamespace(prefix);
  if (peering) await createPeering(client, namespace, peering);
  return { client, namespace };
}

async function createPeering(client: KubeClient, namespace: string, name: string) {
  await client.api.create(NAMESPACED_PEERINGS, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfPeering",
    metadata: { name },
  }, { namespace });
}

async function peers(client: KubeClient, namespace: string, name = "default") {
  const object = await client.api.get(NAMESPACED_PEERINGS, name, { namespace });
  return parsePeers(object.status);
}

async function createExample(client: KubeClient, namespace: string, name: string) {
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name },
    spec: {},
  }, { namespace });
}

/** Whether any operator finished the creation of the object (its diff-base is stored). */
async function handled(client: KubeClient, namespace: string, name: string): Promise<boolean> {
  const object: KubeObject = await client.api.get(KOPFEXAMPLES, name, { namespace });
  return Boolean(object.metadata?.annotations?.["kopf.zalando.org/last-handled-configuration"]);
}

/** An operator that records the names of the objects its create handler saw. */
function recording(seen: string[]) {
  return (registry: Parameters<Parameters<typeof startOperator>[0]>[0]) => {
    on.create("kopfexamples", { registry }, function create_fn({ name }) {
      seen.push(name ?? "");
    });
  };
}

async function peered(
  seen: string[],
  namespace: string,
  priority: number,
  extra: { identity?: string; lifetime?: number } = {},
): Promise<InProcessOperator> {
  return await startOperator(recording(seen), {
    namespaces: [namespace],
    standalone: false,
    priority,
    settings: settings(extra.lifetime),
    ...(extra.identity ? { identity: extra.identity } : {}),
  });
}

Deno.test(
  "a lower-priority operator pauses while a higher one runs and resumes when it exits (PEER-01, PEER-02, PEER-14, NET-11)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-prio");
    using _ = client;
    const lowSeen: string[] = [];
    const highSeen: string[] = [];
    await using low = await peered(lowSeen, namespace, 10, { identity: "low" });
    await low.ready;
    await createExample(client, namespace, "a");
    await eventually(() => lowSeen.includes("a"), 30_000, "the low operator to handle 'a'");

    const high = await peered(highSeen, namespace, 20, { identity: "high" });
    try {
      await low.waitForLog(/Pausing operations in favour of high \(priority 20\)/);
      await high.ready;
      const atPause = low.client.counters.snapshot();
      await createExample(client, namespace, "b");
      await eventually(() => handled(client, namespace, "b"), 30_000, "'b' to be handled");
      assert.deepEqual(highSeen, ["b"]);
      assert.deepEqual(lowSeen, ["a"], "the paused operator handles nothing");
      const whilePaused = low.client.counters.since(atPause);
      assert.equal(whilePaused.count({ resource: "kopfexamples" }), 0, "no watch while paused");
      const entries = (await peers(client, namespace)).map((p) => [p.identity, p.priority]);
      assert.deepEqual(entries.sort(), [["high", 20], ["low", 10]]);
    } finally {
      await high.stop();
    }
    // The exiting operator removed its entry at once: no need to wait for it to expire.
    assert.deepEqual((await peers(client, namespace)).map((p) => p.identity), ["low"]);
    await low.waitForLog(/Resuming operations after the pause/);
    await createExample(client, namespace, "c");
    await eventually(() => lowSeen.includes("c"), 30_000, "the resumed operator to handle 'c'");
    assert.ok(!lowSeen.includes("b"), "'b' was handled by the other operator already");
  },
);

Deno.test(
  "operators of the same priority all pause with a warning (PEER-03)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-same");
    using _ = client;
    const oneSeen: string[] = [];
    const twoSeen: string[] = [];
    await using one = await peered(oneSeen, namespace, 5, { identity: "one" });
    const two = await peered(twoSeen, namespace, 5, { identity: "two" });
    try {
      await one.waitForLog(/conflicting operators with the same priority 5: two/);
      await two.waitForLog(/conflicting operators with the same priority 5: one/);
      assert.equal(one.logs.find((e) => /same priority/.test(e.message))?.level, "warning");
      await createExample(client, namespace, "x");
      await sleep(1500); // a negative check: give a wrongly running operator time to react
      assert.deepEqual([...oneSeen, ...twoSeen], []);
      assert.equal(await handled(client, namespace, "x"), false);
    } finally {
      await two.stop();
    }
    await one.waitForLog(/Resuming operations after the pause/);
    await eventually(() => oneSeen.includes("x"), 30_000, "'x' to be handled after the resume");
  },
);

Deno.test(
  "kopf freeze pauses a running operator and kopf resume resumes it (PEER-17)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-freeze");
    using _ = client;
    const seen: string[] = [];
    await using op = await peered(seen, namespace, 0, { lifetime: 60 });
    await op.ready;
    const kubeconfig = await kubeconfigPath();
    const out: string[] = [];
    const write = (line: string) => out.push(line);
    const scope = ["-n", namespace, "--kubeconfig", kubeconfig, "--id", "tester"];
    const frozen = await main(["freeze", ...scope, "--lifetime", "60", "-m", "deploying"], {
      write,
    });
    assert.equal(frozen, 0, out.join("\n"));
    assert.match(
      out.join("\n"),
      /Frozen KopfPeering 'default' in '.*' as 'tester' with priority 100/,
    );
    const object = await client.api.get(NAMESPACED_PEERINGS, "default", { namespace });
    const entry = (object.status as Record<string, Record<string, unknown>>)["tester"];
    assert.equal(entry?.priority, 100);
    assert.equal(entry?.lifetime, 60);
    assert.equal(entry?.message, "deploying");
    await op.waitForLog(/Pausing operations in favour of tester \(priority 100\)/);
    await createExample(client, namespace, "f");
    await sleep(1500); // a negative check: give a wrongly running operator time to react
    assert.equal(seen.length, 0, `handled while paused: ${seen}`);

    assert.equal(await main(["resume", ...scope], { write }), 0, out.join("\n"));
    assert.ok(!(await peers(client, namespace)).some((p) => p.identity === "tester"));
    await op.waitForLog(/Resuming operations after the pause/);
    await eventually(() => seen.includes("f"), 30_000, "'f' to be handled after kopf resume");

    // A missing peering object is an error, with exit code 1.
    out.length = 0;
    const missing = await main(["freeze", ...scope, "-P", "nonexistent", "-t", "10"], { write });
    assert.equal(missing, 1);
    assert.match(out.join("\n"), /error: Peering object KopfPeering 'nonexistent' .* not found/);
  },
);

Deno.test(
  "a freeze expires by itself and dead peers are removed (PEER-15)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-dead");
    using _ = client;
    const seen: string[] = [];
    await using op = await peered(seen, namespace, 0);
    await op.ready;
    // A peer that died long ago (a Python-style timestamp): removed without pausing anyone.
    await client.api.patch(NAMESPACED_PEERINGS, "default", {
      status: {
        ghost: { priority: 999, lifetime: 60, lastseen: "2020-01-01T00:00:00.123456+00:00" },
      },
    }, { namespace });
    await eventually(
      async () => !(await peers(client, namespace)).some((p) => p.identity === "ghost"),
      30_000,
      "the dead peer to be removed",
    );
    assert.ok(!op.logs.some((e) => /Pausing/.test(e.message)), "a dead peer pauses nobody");

    const out: string[] = [];
    const code = await main([
      "freeze",
      ...["-n", namespace, "--kubeconfig", await kubeconfigPath(), "-i", "short", "-t", "2"],
    ], { write: (line) => out.push(line) });
    assert.equal(code, 0, out.join("\n"));
    await op.waitForLog(/Pausing operations in favour of short/);
    // Nobody removes the freeze: it expires after its lifetime, the operator resumes, cleans up.
    await op.waitForLog(/Resuming operations after the pause/, 30_000);
    await eventually(
      async () => !(await peers(client, namespace)).some((p) => p.identity === "short"),
      30_000,
      "the expired freeze to be removed",
    );
    await createExample(client, namespace, "after");
    await eventually(() => seen.includes("after"), 30_000, "'after' to be handled");
  },
);

Deno.test(
  "without a default peering object the operator runs standalone with a warning (PEER-12)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-auto", null);
    using _ = client;
    const seen: string[] = [];
    await using op = await peered(seen, namespace, 0);
    await op.ready;
    const warning = await op.waitForLog(/Default peering object is not found, falling back/);
    assert.equal(warning.level, "warning");
    await createExample(client, namespace, "s");
    await eventually(() => seen.includes("s"), 30_000, "'s' to be handled");
    const used = op.client.counters;
    assert.equal(used.count({ resource: "kopfpeerings" }), 1, JSON.stringify(used.entries()));
    assert.equal(used.count({ verb: "get", resource: "kopfpeerings", code: 404 }), 1);
  },
);

Deno.test(
  "with a default peering object it is used: one merge patch per keep-alive, the entry removed on exit (PEER-12, PEER-14, PEER-15, PST-02)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-used");
    using _ = client;
    const seen: string[] = [];
    const op = await peered(seen, namespace, 7, { identity: "me", lifetime: 3 });
    try {
      await op.ready;
      await op.waitForLog(/Peering as 'me' with priority 7 in KopfPeering 'default'/);
      const [entry] = await eventually(async () => {
        const found = await peers(client, namespace);
        return found.length ? found : undefined;
      });
      assert.equal(entry!.identity, "me");
      assert.equal(entry!.priority, 7);
      assert.equal(entry!.lifetime, 3);
      await eventually(
        () => op.logs.filter((e) => /Keep-alive in KopfPeering .*: ok/.test(e.message)).length >= 3,
        30_000,
        "three keep-alives",
      );
      await createExample(client, namespace, "p");
      await eventually(() => seen.includes("p"), 30_000, "'p' to be handled");
    } finally {
      await op.stop();
    }
    const keepalives = op.logs.filter((e) => /Keep-alive in/.test(e.message)).length;
    const used = op.client.counters;
    // Each keep-alive is one merge patch, plus one to leave; the object is watched by name.
    assert.equal(used.count({ verb: "patch", resource: "kopfpeerings" }), keepalives + 1);
    assert.equal(used.count({ verb: "get", resource: "kopfpeerings" }), 1);
    assert.equal(used.count({ verb: "list", resource: "kopfpeerings" }), 1);
    assert.deepEqual(await peers(client, namespace), [], "the entry is removed on exit");
  },
);

Deno.test(
  "--peering NAME waits paused until the object exists (PEER-08, PEER-09, PEER-10)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-mand");
    using _ = client;
    const seen: string[] = [];
    await using op = await startOperator(recording(seen), {
      namespaces: [namespace],
      standalone: false,
      peering: "custom",
      settings: settings(),
    });
    await op.waitForLog(/KopfPeering 'custom' in '.*' is not found; pausing until it exists/);
    await createExample(client, namespace, "m");
    await sleep(1500); // a negative check: give a wrongly running operator time to react
    assert.equal(seen.length, 0, `handled while paused: ${seen}`);
    await createPeering(client, namespace, "custom");
    await op.waitForLog(/KopfPeering 'custom' in '.*' is found/);
    await eventually(() => seen.includes("m"), 30_000, "'m' to be handled");
    // It announced itself at once in 'custom' and never in 'default' (another neighbourhood).
    await eventually(async () => (await peers(client, namespace, "custom")).length === 1);
    assert.deepEqual(await peers(client, namespace, "default"), []);
  },
);

Deno.test(
  "--standalone makes no peering requests (PEER-11)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-alone");
    using _ = client;
    const seen: string[] = [];
    await using op = await startOperator(recording(seen), {
      namespaces: [namespace],
      standalone: true,
      settings: settings(),
    });
    await op.ready;
    await createExample(client, namespace, "z");
    await eventually(() => seen.includes("z"), 30_000, "'z' to be handled");
    const used = op.client.counters;
    assert.equal(used.count({ resource: "kopfpeerings" }), 0);
    assert.equal(used.count({ resource: "clusterkopfpeerings" }), 0);
    assert.deepEqual(await peers(client, namespace), []);
  },
);

Deno.test(
  "a pause stops daemons with the operator-pausing reason and a resume respawns them (HK-DMN-23)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-daemon");
    using _ = client;
    const events: string[] = [];
    await using op = await startOperator((registry) => {
      daemon("kopfexamples", { registry }, async function worker({ stopped }) {
        events.push("started");
        await new Promise((resolve) => stopped.addEventListener("abort", resolve, { once: true }));
        events.push(`stopped: ${stopped.reason}`);
      });
    }, { namespaces: [namespace], standalone: false, settings: settings(60) });
    await op.ready;
    await createExample(client, namespace, "d");
    await eventually(() => events.includes("started"), 30_000, "the daemon to start");
    const scope = ["-n", namespace, "--kubeconfig", await kubeconfigPath(), "-i", "freezer"];
    assert.equal(await main(["freeze", ...scope, "-t", "60"], { write: () => {} }), 0);
    await eventually(() => events.includes("stopped: operator-pausing"), 30_000, "a pause stop");
    assert.equal(await main(["resume", ...scope], { write: () => {} }), 0);
    await eventually(
      () => events.filter((e) => e === "started").length === 2,
      30_000,
      `the daemon to be respawned; got ${events}`,
    );
  },
);

Deno.test(
  "kopf run --dev announces priority 666 in the peering object (PEER-04, PEER-05)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-cli");
    using _ = client;
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/ok.ts`, "export {};\n");
    await using op = await spawnOperator([`${dir.path}/ok.ts`, "-n", namespace, "--dev"], {
      POD_ID: "cli-pod",
    });
    const [entry] = await eventually(
      async () => {
        const found = await peers(client, namespace);
        return found.length ? found : undefined;
      },
      60_000,
      "the operator's entry",
    );
    assert.equal(entry!.identity, "cli-pod");
    assert.equal(entry!.priority, 666);
    assert.equal(await op.stop(), 0);
    assert.deepEqual(await peers(client, namespace), [], "removed on exit");
  },
);

Deno.test(
  "cluster-wide operators peer in a ClusterKopfPeering (PEER-05, PEER-16)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-cluster", null);
    using _ = client;
    const name = `peering-${namespace}`; // unique: the object is cluster-scoped
    await client.api.create(CLUSTER_PEERINGS, {
      apiVersion: "kopf.dev/v1",
      kind: "ClusterKopfPeering",
      metadata: { name },
    });
    try {
      const op = await startOperator(() => {}, {
        clusterwide: true,
        standalone: false,
        peering: name,
        identity: "cluster-op",
        settings: settings(),
      });
      try {
        await op.waitForLog(/Peering as 'cluster-op' with priority 0 in ClusterKopfPeering/);
        await eventually(
          async () => {
            const object = await client.api.get(CLUSTER_PEERINGS, name);
            return parsePeers(object.status).some((p) => p.identity === "cluster-op");
          },
          30_000,
          "the entry in the ClusterKopfPeering",
        );
      } finally {
        await op.stop();
      }
      const object = await client.api.get(CLUSTER_PEERINGS, name);
      assert.deepEqual(parsePeers(object.status), []);
      assert.equal(op.client.counters.count({ resource: "kopfpeerings" }), 0);
    } finally {
      await client.api.delete(CLUSTER_PEERINGS, name);
    }
  },
);

Deno.test(
  "keep-alives log one 'Keep-alive in …' line each, never the patch (Kopf 1.44's quieter peering, K26-09)",
  opts,
  async () => {
    const { client, namespace } = await setup("peer-quiet");
    using _ = client;
    // lifetime 1: a keep-alive about every second.
    await using op = await peered([], namespace, 10, { identity: "quiet", lifetime: 1 });
    await op.ready;
    await eventually(
      () => op.logs.filter((e) => /^Keep-alive in .*: ok\.$/.test(e.message)).length >= 2,
      20_000,
      "two keep-alives",
    );
    const patching = op.logs.filter((e) => /patching|Patching/.test(e.message));
    assert.deepEqual(patching.map((e) => e.message), [], "no patch lines from peering");
  },
);
