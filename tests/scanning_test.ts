/**
 * Which namespaces an operator serves, and through which URLs: glob patterns follow the
 * Namespaces resource (one stream per matching namespace, started and stopped as namespaces
 * come and go), literal names are watched directly (even before they exist), `-A`/`clusterwide`
 * uses the cluster-wide URLs and follows no namespaces, and `settings.scanning.disabled` serves
 * only what is known at startup. Cluster-scoped resources, `timeoutSeconds` and `kopf run`'s
 * scope options: tests/scanning_urls_test.ts.
 *
 * The URLs are read from the operator's own client (its `onResponse` sees every request with
 * its query). The control plane is shared: cluster-wide watchers see other tests' objects, so
 * handlers are filtered by a label of this test's own objects.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  NAMESPACES,
  testClient,
  testNamespace,
} from "./_support.ts";
import {
  CRD_ALL,
  createKex,
  KEX_ALL,
  kexIn,
  NS_ALL,
  opts,
  quietSettings,
  reads,
  recordingClient,
  recordKopfExamples,
  removeNamespaces,
  requestsUnder,
  tag,
  testLabel,
  watched,
} from "./_scanning.ts";

Deno.test(
  "a glob pattern serves the matching namespaces that exist at startup and those created later, " +
    "and stops serving deleted ones (SCP-05)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const prefix = tag();
    const early = await testNamespace(prefix);
    const unmatched = await testNamespace(`${prefix}x`); // not `${prefix}-…`
    let late: string | undefined;
    const seen = new Set<string>();
    const { client, sent } = await recordingClient();
    try {
      await using op = await startOperator((registry) => recordKopfExamples(registry, seen), {
        namespaces: [`${prefix}-*`],
        client,
        settings: quietSettings(),
      });
      await op.ready;
      assert.equal(op.stats().streams, 1, "one stream: the one matching namespace");

      await createKex(admin, early, "in-early");
      await eventually(() => seen.has(`${early}/in-early`), 20_000, "the early object");

      // A namespace created at runtime is served: a stream of its own starts.
      late = await testNamespace(prefix);
      await eventually(() => op.stats().streams === 2, 20_000, "a stream for the new namespace");
      await createKex(admin, late, "in-late");
      await eventually(() => seen.has(`${late}/in-late`), 20_000, "the late object");

      // A deleted (terminating) namespace is not served any more: its stream stops.
      await admin.api.delete(NAMESPACES, late);
      await eventually(
        () => op.stats().streams === 1,
        20_000,
        "the deleted namespace's stream to stop",
      );

      // The namespaces are followed (listed, then watched); each matching one is watched by
      // its own namespaced URL; the unmatched one and the cluster-wide URL never are.
      assert.ok(reads(sent, NS_ALL).lists.length >= 1, "namespaces listed");
      await watched(sent, NS_ALL, "namespaces watched");
      for (const ns of [early, late]) {
        assert.ok(reads(sent, kexIn(ns)).watches.length >= 1, `${ns} watched`);
      }
      assert.deepEqual(requestsUnder(sent, kexIn(unmatched)), []);
      assert.deepEqual(requestsUnder(sent, KEX_ALL), []);
    } finally {
      await removeNamespaces(early, unmatched, ...(late ? [late] : []));
    }
  },
);

Deno.test(
  "-A (clusterwide) lists and watches by the cluster-wide URL and follows no namespaces, but " +
    "patches by the namespaced URL; -n '*' follows the namespaces with a watch per namespace " +
    "(SCP-08, SCP-09, SCP-14)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const namespace = await testNamespace("scan-all");
    const labels = testLabel();
    const wide = { seen: new Set<string>(), ...(await recordingClient()) };
    const star = { seen: new Set<string>(), ...(await recordingClient()) };
    try {
      await using clusterwide = await startOperator((registry) => {
        on.event("kopfexamples", { registry, labels }, ({ namespace, name, patch }) => {
          wide.seen.add(`${namespace}/${name}`);
          patch.metadata.labels = { seen: "yes" };
        });
      }, { clusterwide: true, namespaces: [], client: wide.client, settings: quietSettings() });
      await using everywhere = await startOperator(
        (registry) => recordKopfExamples(registry, star.seen, labels),
        { namespaces: ["*"], client: star.client, settings: quietSettings() },
      );
      await Promise.all([clusterwide.ready, everywhere.ready]);

      await createKex(admin, namespace, "everywhere", labels);
      const key = `${namespace}/everywhere`;
      await eventually(() => wide.seen.has(key) && star.seen.has(key), 20_000, "both to see it");
      await eventually(
        async () => {
          const live = await admin.api.get(KOPFEXAMPLES, "everywhere", { namespace });
          return live.metadata?.labels?.seen === "yes";
        },
        20_000,
        "the patch of the cluster-wide operator",
      );

      // -A: one cluster-wide stream; no namespace is listed or watched, no namespaced read.
      assert.equal(clusterwide.stats().streams, 1);
      assert.ok(reads(wide.sent, KEX_ALL).lists.length >= 1, "listed cluster-wide");
      await watched(wide.sent, KEX_ALL, "watched cluster-wide");
      assert.deepEqual(requestsUnder(wide.sent, NS_ALL), []);
      const namespacedReads = wide.sent.filter((s) =>
        s.method === "GET" && s.url.pathname.startsWith("/apis/kopf.dev/v1/namespaces/")
      );
      assert.deepEqual(namespacedReads, []);
      // …but the object is patched by its namespaced URL (SCP-14).
      const patches = wide.sent.filter((s) => s.method === "PATCH").map((s) => s.url.pathname);
      assert.ok(patches.length >= 1, "patched");
      assert.deepEqual(new Set(patches), new Set([`${kexIn(namespace)}/everywhere`]));

      // -n '*': the namespaces are followed, and every namespace has its own stream.
      assert.ok(reads(star.sent, NS_ALL).lists.length >= 1, "namespaces listed");
      await watched(star.sent, NS_ALL, "namespaces watched");
      assert.ok(reads(star.sent, kexIn(namespace)).lists.length >= 1, "listed in the namespace");
      for (const ns of [namespace, "default"]) {
        await eventually(() => reads(star.sent, kexIn(ns)).watches.length >= 1, 20_000, ns);
      }
      assert.deepEqual(requestsUnder(star.sent, KEX_ALL), []);
      assert.ok(everywhere.stats().streams >= 3, `${everywhere.stats().streams} streams`);
    } finally {
      await removeNamespaces(namespace);
    }
  },
);

Deno.test(
  "a literal namespace that does not exist yet is watched at once, and its objects are served " +
    "once it is created (SCP-07)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const future = `${tag()}-future`;
    const seen = new Set<string>();
    const { client, sent } = await recordingClient();
    try {
      await using op = await startOperator((registry) => recordKopfExamples(registry, seen), {
        namespaces: [future],
        client,
        settings: quietSettings(),
      });
      await op.ready;
      // Watched directly (as Kopf does without permissions on namespaces), before it exists.
      await eventually(
        () => reads(sent, kexIn(future)).watches.length >= 1,
        20_000,
        "a watch of the namespace that does not exist",
      );
      await assert.rejects(admin.api.get(NAMESPACES, future), /404|not found/i);

      await admin.api.create(NAMESPACES, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: { name: future, labels: { "app.kubernetes.io/created-by": "kopf-ts-testing" } },
      });
      await createKex(admin, future, "after-creation");
      await eventually(() => seen.has(`${future}/after-creation`), 20_000, "the object");
      assert.deepEqual(requestsUnder(sent, NS_ALL), [], "literal names: namespaces not followed");
    } finally {
      await removeNamespaces(future);
    }
  },
);

Deno.test(
  "settings.scanning.disabled serves only the literal namespaces and the resources found at " +
    "startup; enabled, new matching namespaces and new CRDs are served (SCP-13, CFG-60)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const prefix = tag();
    const literal = await testNamespace(`${prefix}lit`);
    const matching = await testNamespace(prefix);
    let later: string | undefined;
    const group = "scanning.kopf.dev";
    const plural = `${tag()}things`;
    const crdName = `${plural}.${group}`;
    const things: Resource = {
      ...KOPFEXAMPLES,
      group,
      plural,
      singular: plural.slice(0, -1),
      kind: "ScanningThing",
      shortNames: [],
    };
    const off = { seen: new Set<string>(), ...(await recordingClient()) };
    const on_ = { seen: new Set<string>(), ...(await recordingClient()) };
    const setup = (seen: Set<string>) => (registry: OperatorRegistry) => {
      recordKopfExamples(registry, seen);
      on.event([group, "v1", plural], { registry }, ({ namespace, name }) => {
        seen.add(`things:${namespace}/${name}`);
      });
    };
    const namespaces = [literal, `${prefix}-*`];
    try {
      await using disabled = await startOperator(setup(off.seen), {
        namespaces,
        client: off.client,
        settings: quietSettings((s) => (s.scanning.disabled = true)),
      });
      await using enabled = await startOperator(setup(on_.seen), {
        namespaces,
        client: on_.client,
        settings: quietSettings(),
      });
      await Promise.all([disabled.ready, enabled.ready]);

      // Both serve the literal namespace.
      await createKex(admin, literal, "in-literal");
      await eventually(
        () => off.seen.has(`${literal}/in-literal`) && on_.seen.has(`${literal}/in-literal`),
        20_000,
        "both to see the object in the literal namespace",
      );

      // Only the scanning one serves a namespace matching the pattern, at startup or later.
      later = await testNamespace(prefix);
      await createKex(admin, matching, "in-matching");
      await createKex(admin, later, "in-later");
      await eventually(
        () => on_.seen.has(`${matching}/in-matching`) && on_.seen.has(`${later}/in-later`),
        20_000,
        "the scanning operator to serve the matching namespaces",
      );

      // Only the scanning one serves a resource whose CRD appears at runtime.
      await applyCrdObjects(admin, [{
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "CustomResourceDefinition",
        metadata: { name: crdName },
        spec: {
          group,
          scope: "Namespaced",
          names: { plural, singular: things.singular, kind: things.kind },
          versions: [{
            name: "v1",
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          }],
        },
      } as KubeObject]);
      await eventually(
        async () => {
          await admin.api.create(things, {
            apiVersion: `${group}/v1`,
            kind: things.kind,
            metadata: { name: "thing" },
          }, { namespace: literal }).catch((error) => {
            if (!/409|already exists/i.test(String(error))) throw error;
          });
          return true;
        },
        20_000,
        "the new resource to be creatable",
      );
      await eventually(
        () => on_.seen.has(`things:${literal}/thing`),
        30_000,
        "the scanning operator to serve the new CRD",
      );

      // The disabled one never followed namespaces or CRDs, and never read the other namespaces
      // or the new resource.
      assert.deepEqual(requestsUnder(off.sent, NS_ALL), []);
      assert.deepEqual(requestsUnder(off.sent, CRD_ALL), []);
      for (const ns of [matching, later]) assert.deepEqual(requestsUnder(off.sent, kexIn(ns)), []);
      assert.deepEqual(requestsUnder(off.sent, `/apis/${group}/`), []);
      assert.deepEqual([...off.seen].sort(), [`${literal}/in-literal`]);
      assert.equal(disabled.stats().streams, 1);
      // The enabled one did follow both.
      await watched(on_.sent, NS_ALL, "namespaces watched");
      await watched(on_.sent, CRD_ALL, "CRDs watched");
    } finally {
      await admin.api.delete(CRD_RESOURCE, crdName).catch(() => {});
      await removeNamespaces(literal, matching, ...(later ? [later] : []));
    }
  },
);
