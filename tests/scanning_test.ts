/**
 * Which namespaces and resources an operator serves, and through which URLs: glob patterns
 * follow the Namespaces resource (one stream per matching namespace, started and stopped as
 * namespaces come and go), literal names are watched directly (even before they exist),
 * `-A`/`clusterwide` uses the cluster-wide URLs and follows no namespaces, cluster-scoped
 * resources are always watched cluster-wide, `settings.scanning.disabled` serves only what is
 * known at startup, and `settings.watching.serverTimeout` is the watches' `timeoutSeconds`.
 *
 * The URLs are read from the operator's own client (its `onResponse` sees every request with
 * its query). The control plane is shared: cluster-wide watchers see other tests' objects, so
 * handlers are filtered by a label of this test's own objects.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import type { KubeClient } from "../core/client/client.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrdObjects,
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  NAMESPACES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const KEX_ALL = "/apis/kopf.dev/v1/kopfexamples";
const NS_ALL = "/api/v1/namespaces";
const CRD_ALL = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const kexIn = (namespace: string) => `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`;

/** One request an operator's client made. */
interface Sent {
  readonly method: string;
  readonly url: URL;
}

/** A client for an operator that records every request it makes, with its query. */
async function recordingClient(): Promise<{ client: KubeClient; sent: Sent[] }> {
  const sent: Sent[] = [];
  const client = await testClient({
    onResponse: ({ method, path }) => sent.push({ method, url: new URL(path, "https://k8s") }),
  });
  return { client, sent };
}

/** The list and watch requests of one collection path (e.g. `/api/v1/namespaces`). */
function reads(sent: readonly Sent[], collection: string): { lists: URL[]; watches: URL[] } {
  const gets = sent.filter((s) => s.method === "GET" && s.url.pathname === collection);
  return {
    lists: gets.filter((s) => s.url.searchParams.get("watch") !== "true").map((s) => s.url),
    watches: gets.filter((s) => s.url.searchParams.get("watch") === "true").map((s) => s.url),
  };
}

/**
 * Waits until a watch of `collection` was sent: it is recorded once its answer's head is in,
 * which may be a moment after the listing that precedes it.
 */
async function watched(sent: readonly Sent[], collection: string, what: string): Promise<void> {
  await eventually(() => reads(sent, collection).watches.length >= 1, 20_000, what);
}

/** All requests whose path starts with `prefix`, as `METHOD path?query` (for messages). */
function requestsUnder(sent: readonly Sent[], prefix: string): string[] {
  return sent.filter((s) => s.url.pathname.startsWith(prefix))
    .map((s) => `${s.method} ${s.url.pathname}${s.url.search}`);
}

/** A label unique to one test, to filter handlers to this test's objects. */
function testLabel(): Record<string, string> {
  return { "scanning-test": crypto.randomUUID().slice(0, 8) };
}

/** Registers an event handler of kopfexamples that records `namespace/name` of what it sees. */
function recordKopfExamples(
  registry: OperatorRegistry,
  seen: Set<string>,
  labels?: Record<string, string>,
): void {
  on.event("kopfexamples", { registry, ...(labels ? { labels } : {}) }, ({ namespace, name }) => {
    seen.add(`${namespace}/${name}`);
  });
}

/** The finalizer of this file's operators (never on other tests' objects). */
const OWN_FINALIZER = "scanning-test.kopf.dev/finalizer";

/**
 * Settings for this file's operators: no Events, and a finalizer of their own. Operators that
 * serve other tests' namespaces (`-A`, `-n '*'`) would otherwise remove Kopf's default finalizer
 * from those tests' objects, as Kopf does when no handler of an operator needs it (PST-54).
 */
function quietSettings(tweak: (settings: OperatorSettings) => void = () => {}): OperatorSettings {
  const settings = createSettings({ posting: { enabled: false } });
  settings.persistence.finalizer = OWN_FINALIZER;
  tweak(settings);
  return settings;
}

async function createKex(
  client: KubeClient,
  namespace: string,
  name: string,
  labels?: Record<string, string>,
): Promise<void> {
  await client.api.create(KOPFEXAMPLES, kex(name, {}, labels), { namespace });
}

async function removeNamespaces(...names: string[]): Promise<void> {
  const plane = await sharedControlPlane();
  for (const name of names) await deleteNamespace(plane, name).catch(() => {});
}

/** A lowercase random tag usable in namespace names and resource plurals. */
function tag(): string {
  return `s${crypto.randomUUID().replaceAll("-", "").slice(0, 8)}`;
}

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

Deno.test(
  "cluster-scoped resources are watched once, cluster-wide, by an operator of several " +
    "namespaces; namespaced ones by the namespaced URLs (SCP-14)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const served = [await testNamespace("scan-scope"), await testNamespace("scan-scope")];
    const labels = testLabel();
    const elsewhere = `${tag()}-elsewhere`;
    const seen = new Set<string>();
    const added: string[] = [];
    const { client, sent } = await recordingClient();
    try {
      await using op = await startOperator((registry) => {
        recordKopfExamples(registry, seen);
        on.event("namespaces", { registry, labels }, ({ name, type, patch }) => {
          if (type === "ADDED") added.push(name);
          patch.metadata.labels = { seen: "yes" };
        });
      }, { namespaces: served, client, settings: quietSettings() });
      await op.ready;

      // A namespace other than the served ones is seen once, and patched by its URL.
      await admin.api.create(NAMESPACES, {
        apiVersion: "v1",
        kind: "Namespace",
        metadata: {
          name: elsewhere,
          labels: { "app.kubernetes.io/created-by": "kopf-ts-testing", ...labels },
        },
      });
      await eventually(
        async () => {
          const live = await admin.api.get(NAMESPACES, elsewhere);
          return live.metadata?.labels?.seen === "yes";
        },
        20_000,
        "the other namespace to be seen and patched",
      );
      for (const ns of served) await createKex(admin, ns, "here");
      await eventually(
        () => served.every((ns) => seen.has(`${ns}/here`)),
        20_000,
        "the objects in the served namespaces",
      );

      // One stream for the namespaces (cluster-wide), one per served namespace for the examples.
      assert.equal(op.stats().streams, 3);
      assert.deepEqual(added, [elsewhere]);
      assert.ok(reads(sent, NS_ALL).lists.length >= 1, "namespaces listed cluster-wide");
      await watched(sent, NS_ALL, "namespaces watched cluster-wide");
      const patches = sent.filter((s) => s.method === "PATCH").map((s) => s.url.pathname);
      assert.ok(patches.length >= 1, "patched");
      assert.deepEqual(new Set(patches), new Set([`${NS_ALL}/${elsewhere}`]));
      for (const ns of served) {
        assert.ok(reads(sent, kexIn(ns)).watches.length >= 1, `examples watched in ${ns}`);
      }
      assert.deepEqual(requestsUnder(sent, KEX_ALL), []);
    } finally {
      await removeNamespaces(...served, elsewhere);
    }
  },
);

Deno.test(
  "settings.watching.serverTimeout is sent as timeoutSeconds: 300 by default, none when null; " +
    "the server ends the watch then and it resumes without a relist (CFG-41)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const namespace = await testNamespace("scan-timeout");
    try {
      const cases: Array<[number | null | undefined, string | null]> = [
        [undefined, "300"],
        [null, null],
        [2, "2"],
      ];
      for (const [timeout, expected] of cases) {
        const seen = new Set<string>();
        const { client, sent } = await recordingClient();
        await using op = await startOperator((registry) => recordKopfExamples(registry, seen), {
          namespaces: [namespace],
          client,
          settings: quietSettings((s) => {
            if (timeout !== undefined) s.watching.serverTimeout = timeout;
          }),
        });
        await op.ready;
        const watches = () => reads(sent, kexIn(namespace)).watches;
        await eventually(() => watches().length >= 1, 20_000, "a watch request");
        for (const url of watches()) {
          assert.equal(url.searchParams.get("timeoutSeconds"), expected, `${timeout}: ${url}`);
        }
        if (timeout !== 2) continue;
        // The server honours it: it ends each watch after 2 s, and the watcher resumes from
        // where it was (no second list), losing nothing.
        await eventually(() => watches().length >= 3, 30_000, "the server to end the watches");
        assert.equal(reads(sent, kexIn(namespace)).lists.length, 1);
        await createKex(admin, namespace, "after-reconnects");
        await eventually(() => seen.has(`${namespace}/after-reconnects`), 20_000, "the object");
        for (const url of watches()) assert.equal(url.searchParams.get("timeoutSeconds"), "2");
      }
    } finally {
      await removeNamespaces(namespace);
    }
  },
);

/** Runs `kopf run ARGS` until it exits (within 30 s), for option errors. */
async function runToExit(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; lines: string[] }> {
  const op = await spawnOperator(args, env);
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    const code = await Promise.race([
      op.exited,
      new Promise<number>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`did not exit: ${op.lines.join("\n")}`)), 30_000);
      }),
    ]);
    return { code, lines: op.lines.filter((l) => l.trim()) };
  } finally {
    clearTimeout(timer);
    await op.stop();
  }
}

Deno.test(
  "kopf run: --namespace (also from KOPF_RUN_NAMESPACE) and --all-namespaces (also from " +
    "KOPF_RUN_CLUSTERWIDE) are mutually exclusive (SCP-10)",
  opts,
  async () => {
    await using dir = await tempDir();
    await Deno.writeTextFile(`${dir.path}/ok.ts`, "export {};\n");
    const cases: Array<[string[], Record<string, string>]> = [
      [["-A", "-n", "x"], {}],
      [["--all-namespaces", "--namespace", "x"], {}],
      [["-A"], { KOPF_RUN_NAMESPACE: "x" }],
      [["-n", "x"], { KOPF_RUN_CLUSTERWIDE: "true" }],
    ];
    for (const [args, env] of cases) {
      const { code, lines } = await runToExit([`${dir.path}/ok.ts`, "--standalone", ...args], env);
      const what = `${args.join(" ")} ${JSON.stringify(env)}: ${lines.join("\n")}`;
      assert.equal(code, 1, what);
      assert.deepEqual(
        lines.filter((l) => l.startsWith("error:")),
        ["error: --namespace and --all-namespaces are mutually exclusive"],
        what,
      );
    }
  },
);

Deno.test(
  "kopf run: -A watches cluster-wide and follows no namespaces; KOPF_RUN_NAMESPACE [legacy] " +
    "adds a namespace to those of -n (SCP-08, SCP-12)",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, "crds/example.yaml");
    const fromEnv = await testNamespace("scan-env");
    const fromArgs = await testNamespace("scan-arg");
    const labels = testLabel();
    await using dir = await tempDir();
    try {
      const mod = new URL("../mod.ts", import.meta.url).href;
      await Deno.writeTextFile(
        `${dir.path}/h.ts`,
        `import { on } from "${mod}";\n` +
          // See quietSettings(): -A must not remove other tests' finalizers.
          `on.startup(({ settings }) => { settings.persistence.finalizer = "${OWN_FINALIZER}"; });\n` +
          `on.event("kopfexamples", { labels: ${JSON.stringify(labels)} }, ` +
          `({ namespace, name }) => console.error(\`seen \${namespace}/\${name}\`));\n`,
      );
      const common = [`${dir.path}/h.ts`, "--standalone", "--log-format", "plain"];

      // KOPF_RUN_NAMESPACE adds its namespace to those of -n.
      {
        await using op = await spawnOperator([...common, "-v", "-n", fromArgs], {
          KOPF_RUN_NAMESPACE: fromEnv,
        });
        await op.waitForLine(new RegExp(`^Watching kopfexamples\\.v1\\.kopf\\.dev in ${fromEnv}$`));
        await op.waitForLine(
          new RegExp(`^Watching kopfexamples\\.v1\\.kopf\\.dev in ${fromArgs}$`),
        );
        await createKex(admin, fromEnv, "env", labels);
        await createKex(admin, fromArgs, "arg", labels);
        await op.waitForLine(new RegExp(`^seen ${fromEnv}/env$`));
        await op.waitForLine(new RegExp(`^seen ${fromArgs}/arg$`));
        assert.equal(await op.stop(), 0);
      }

      // -A: one cluster-wide stream, cluster-wide URLs, no namespace listed or watched.
      {
        await using op = await spawnOperator([...common, "-A", "-d"]);
        await op.waitForLine(/^Watching kopfexamples\.v1\.kopf\.dev$/);
        await createKex(admin, fromEnv, "cluster", labels);
        await op.waitForLine(new RegExp(`^seen ${fromEnv}/cluster$`));
        // The object may come with the listing: the watch that follows is asked for after it.
        await op.waitForLine(/^GET \/apis\/kopf\.dev\/v1\/kopfexamples\?.*watch=true.* → 200/);
        assert.equal(await op.stop(), 0);
        const output = op.lines.join("\n");
        assert.ok(
          op.lines.some((l) =>
            /^GET \/apis\/kopf\.dev\/v1\/kopfexamples\?.*watch=true.* → 200/.test(l)
          ),
          output,
        );
        assert.ok(
          !op.lines.some((l) => /^Watching kopfexamples\.v1\.kopf\.dev in /.test(l)),
          output,
        );
        assert.ok(
          !op.lines.some((l) => /^GET \/apis\/kopf\.dev\/v1\/namespaces\//.test(l)),
          output,
        );
        assert.ok(!op.lines.some((l) => /^GET \/api\/v1\/namespaces[?/ ]/.test(l)), output);
        assert.ok(!op.lines.some((l) => /^PATCH /.test(l)), `nothing patched:\n${output}`);
      }
    } finally {
      await removeNamespaces(fromEnv, fromArgs);
    }
  },
);
