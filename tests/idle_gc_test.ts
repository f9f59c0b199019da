/**
 * Idle garbage collection (settings.process.idleGcDelay): after a burst of processing, once the
 * operator idles, one full collection gives the burst's memory back — once per burst, never as a
 * periodic chore while idle, and not at all when disabled.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { createSettings } from "../core/settings/settings.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const COLLECTED = /^Collected garbage after \d+ cycles/;

async function createHandled(namespace: string, names: readonly string[]): Promise<void> {
  using client = await testClient();
  for (const name of names) {
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name },
    }, { namespace });
  }
  for (const name of names) {
    await eventually(async () =>
      ((await client.api.get(KOPFEXAMPLES, name, { namespace })).status as { created?: boolean })
        ?.created
    );
  }
}

Deno.test(
  "an operator collects garbage once after each burst, not again while idle (idleGcDelay)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("idle-gc");
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, function created() {
        return true;
      });
    }, {
      namespaces: [namespace],
      settings: createSettings({ process: { idleGcDelay: 1 }, posting: { enabled: false } }),
    });
    await op.ready;
    const collections = () => op.logs.filter((e) => COLLECTED.test(e.message)).length;

    await createHandled(namespace, Array.from({ length: 20 }, (_, i) => `burst-a-${i}`));
    await op.waitForLog(COLLECTED, 15_000);
    // A slow machine may split the burst in two (a pause over the delay): let that settle.
    await sleep(2_500);
    const afterBurst = collections();
    assert.ok(afterBurst >= 1 && afterBurst <= 2, `${afterBurst} collections for one burst`);
    // The burst's spare kept-alive connections are closed at the same time (all but two).
    const message = op.logs.find((e) => COLLECTED.test(e.message))!.message;
    assert.match(message, /, \d+ idle connections closed\)$/);
    await sleep(3_000); // three more delays of idling: no further collection
    assert.equal(collections(), afterBurst);

    await createHandled(namespace, ["burst-b"]);
    await eventually(() => collections() > afterBurst || undefined, 15_000, "another collection");
    await sleep(2_500);
    assert.equal(collections(), afterBurst + 1);
  },
);

Deno.test("no idle garbage collection when idleGcDelay is null", opts, async () => {
  using client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace("idle-gc-off");
  await using op = await startOperator((registry) => {
    on.create("kopfexamples", { registry }, function created() {
      return true;
    });
  }, {
    namespaces: [namespace],
    settings: createSettings({ process: { idleGcDelay: null }, posting: { enabled: false } }),
  });
  await op.ready;
  await createHandled(namespace, ["only"]);
  await sleep(3_000);
  assert.equal(op.logs.filter((e) => COLLECTED.test(e.message)).length, 0);
});

Deno.test({
  name: "the idle release returns what a burst's closed connections held (once they are dropped)",
  ...opts,
  // glibc's malloc_trim is what gives it back; elsewhere there is nothing to measure.
  ignore: Deno.build.os !== "linux" ||
    !/glibc/i.test(new TextDecoder().decode(
      new Deno.Command("ldd", { args: ["--version"], stderr: "null" }).outputSync().stdout,
    )),
  fn: async () => {
    const fixture = new URL("./fixtures/release_after_burst.ts", import.meta.url).pathname;
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check=remote", fixture],
      env: { KUBECONFIG: await kubeconfigPath() },
      stderr: "inherit",
    }).output();
    assert.ok(output.success, "the fixture failed");
    const { before, burst, released, closed } = JSON.parse(new TextDecoder().decode(output.stdout));
    assert.equal(closed, 48);
    const grown = burst - before, left = released - before;
    // 48 TLS connections hold ~100 KiB each on the native side until the event loop drops them.
    assert.ok(grown > 2, `the burst grew the main heap by only ${grown.toFixed(1)} MiB`);
    assert.ok(
      left < grown / 2,
      `${left.toFixed(1)} of the burst's ${grown.toFixed(1)} MiB still resident after the release`,
    );
  },
});
