/**
 * Leader election's defaults and how a replica finds its identity and its Lease's namespace:
 * controller-runtime's timings (15 s / 10 s / 2 s), `POD_NAME`/`POD_ID`/host name plus a random
 * suffix, and the service account's namespace (else `default`), end to end on the emulator.
 */

import { NAMESPACES_RESOURCE } from "../../client/discovery.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { Emulator } from "../../../kits/emulator/mod.ts";
import { on } from "../../api/on.ts";
import { KubeClient } from "../../client/client.ts";
import { loadInCluster } from "../../client/config.ts";
import { type Lease, LEASES } from "../../client/leases.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import { operator } from "../../reactor/lifetime/running.ts";
import { leadershipDefaults, shardingDefaults } from "../../settings/scaling.ts";
import { createSettings } from "../../settings/settings.ts";
import { leaseNamespace, replicaIdentity, retryDelayMs } from "./leadership.ts";

const SA = "var/run/secrets/kubernetes.io/serviceaccount";

Deno.test("settings.leadership defaults: off, Lease kopf-leader, 15 s / 10 s / 2 s, exit when lost, namespace and identity resolved at start", () => {
  const expected = {
    enabled: false,
    name: "kopf-leader",
    namespace: null,
    identity: null,
    leaseDuration: 15,
    renewDeadline: 10,
    retryPeriod: 2,
    onLost: "exit",
  };
  assert.deepEqual(leadershipDefaults(), expected);
  assert.deepEqual(createSettings().leadership, expected);
  assert.deepEqual(createSettings({ leadership: { enabled: true } }).leadership, {
    ...expected,
    enabled: true,
  });
  // Sharding's membership Leases use the same timings.
  const sharding = shardingDefaults();
  assert.deepEqual(
    [sharding.leaseDuration, sharding.renewDeadline, sharding.retryPeriod],
    [15, 10, 2],
  );
  assert.equal(sharding.shards, 32);
});

Deno.test("replicaIdentity(): POD_NAME, else POD_ID, else the host name, each with a random suffix", () => {
  const from = (env: Record<string, string>) =>
    replicaIdentity({
      env: (name) => env[name],
      hostname: () => "node-1",
      suffix: () => "abcd1234",
    });
  assert.equal(from({ POD_NAME: "op-7d9f-x2", POD_ID: "uid-1" }), "op-7d9f-x2_abcd1234");
  assert.equal(from({ POD_ID: "uid-1" }), "uid-1_abcd1234");
  assert.equal(from({ POD_NAME: "", POD_ID: "" }), "node-1_abcd1234", "empty means unset");
  assert.equal(from({}), "node-1_abcd1234");

  // The real sources: a fresh 8-hex-digit suffix every time, so a restarted replica is new.
  const env = { env: () => "pod-a" };
  const [one, two] = [replicaIdentity(env), replicaIdentity(env)];
  assert.match(one, /^pod-a_[0-9a-f]{8}$/);
  assert.match(two, /^pod-a_[0-9a-f]{8}$/);
  assert.notEqual(one, two);
  assert.match(replicaIdentity({ env: () => undefined }), new RegExp(`^.+_[0-9a-f]{8}$`));
});

Deno.test("leaseNamespace(): the configured one, else the service account's, else default", async () => {
  const root = await Deno.makeTempDir({ prefix: "kopf-lease-ns-" });
  try {
    await Deno.mkdir(join(root, SA), { recursive: true });
    await Deno.writeTextFile(join(root, SA, "token"), "t");
    await Deno.writeTextFile(join(root, SA, "ca.crt"), "ca");
    await Deno.writeTextFile(join(root, SA, "namespace"), "ops\n");
    const env = { KUBERNETES_SERVICE_HOST: "10.96.0.1", KUBERNETES_SERVICE_PORT: "443" };
    const pod = await loadInCluster({ root, env });
    assert.equal(leaseNamespace(null, pod.namespace), "ops");
    assert.equal(leaseNamespace("elsewhere", pod.namespace), "elsewhere");
    await Deno.remove(join(root, SA, "namespace"));
    const bare = await loadInCluster({ root, env });
    assert.equal(leaseNamespace(null, bare.namespace), "default");
    assert.equal(leaseNamespace(null, undefined), "default");
    assert.equal(leaseNamespace("", undefined), "default");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("an operator with settings.leadership and nothing configured leads on a Lease in its service account's namespace, as POD_NAME plus a suffix, for 15 s", async () => {
  await using emulator = await Emulator.start();
  const root = await Deno.makeTempDir({ prefix: "kopf-lease-pod-" });
  const previous = Deno.env.get("POD_NAME");
  Deno.env.set("POD_NAME", "my-operator-7d9f");
  const controller = new AbortController();
  let running: Promise<void> | undefined;
  try {
    await Deno.mkdir(join(root, SA), { recursive: true });
    await Deno.writeTextFile(join(root, SA, "token"), emulator.token);
    await Deno.writeTextFile(join(root, SA, "ca.crt"), emulator.caPem);
    await Deno.writeTextFile(join(root, SA, "namespace"), "ops");
    const url = new URL(emulator.server);
    const info = await loadInCluster({
      root,
      env: { KUBERNETES_SERVICE_HOST: url.hostname, KUBERNETES_SERVICE_PORT: url.port },
    });
    using client = new KubeClient(info);
    await client.api.create({ ...NAMESPACES_RESOURCE }, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: "ops" },
    });
    const registry = new OperatorRegistry();
    on.startup({ registry }, function noop() {});
    const messages: string[] = [];
    running = operator({
      registry,
      client,
      standalone: true,
      clusterwide: true,
      settings: createSettings({ posting: { enabled: false }, leadership: { enabled: true } }),
      listeners: [(entry) => messages.push(entry.message)],
      signal: controller.signal,
    });
    let lease: Lease | undefined;
    for (let i = 0; i < 100 && !lease?.spec?.holderIdentity; i++) {
      lease = await client.api.get<Lease>(LEASES, "kopf-leader", { namespace: "ops" })
        .catch(() => undefined);
      if (!lease?.spec?.holderIdentity) await new Promise((r) => setTimeout(r, 100));
    }
    assert.match(lease?.spec?.holderIdentity ?? "", /^my-operator-7d9f_[0-9a-f]{8}$/);
    assert.equal(lease?.spec?.leaseDurationSeconds, 15);
    assert.ok(
      messages.some((m) => m === "Leading: acquired Lease ops/kopf-leader."),
      messages.join("\n"),
    );
  } finally {
    controller.abort();
    await running;
    if (previous === undefined) Deno.env.delete("POD_NAME");
    else Deno.env.set("POD_NAME", previous);
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("retryDelayMs(): a standby retries within one retry period, at most 20% sooner (a released Lease is taken within one period)", () => {
  assert.equal(retryDelayMs(2, 0), 2000);
  assert.ok(retryDelayMs(2, 0.999_999) > 1600);
  for (let i = 0; i < 1000; i++) {
    const delay = retryDelayMs(2);
    assert.ok(delay > 1600 && delay <= 2000, `${delay}`);
  }
});
