/**
 * The URLs an operator reads beyond its namespaces (tests/scanning_test.ts): cluster-scoped
 * resources are always watched cluster-wide, `settings.watching.serverTimeout` is the watches'
 * `timeoutSeconds`, and `kopf run`'s `--namespace`/`--all-namespaces` (and their environment
 * variables) choose the scope, exclusive of each other.
 *
 * The URLs are read from the operator's own client (its `onResponse` sees every request with
 * its query); handlers are filtered by a label of this test's own objects.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  NAMESPACES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import {
  createKex,
  KEX_ALL,
  kexIn,
  NS_ALL,
  opts,
  OWN_FINALIZER,
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
