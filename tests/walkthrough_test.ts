/**
 * docs/walkthrough.md, followed as written: `kopf init` (the step 0 command, with `--kopf` this
 * checkout since JSR is not reachable from tests), then each step's whole files (`file=PATH`
 * blocks) written into the project, `deno task types` after the CRD, `deno check` and
 * `deno fmt --check` of the TypeScript files, and the operator run as the step says (the
 * project's `dev` task: `--embedded`, the in-memory API with `crds/` applied), checking what the
 * step says happens. Step 7 runs the project's own `deno task test`. Then the finished project
 * passes `deno lint`, and its operator, run as its `run` task runs it (with `-n` a fresh namespace
 * and `--kubeconfig` the shared control plane), does on a real API server what step 3 says it does
 * on the in-memory one.
 */

import assert from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { codeBlocks } from "./_markdown.ts";
import {
  applyCrds,
  captureLines,
  eventually,
  kubeconfigPath,
  tempDir,
  terminate,
  testClient,
  testNamespace,
} from "./_support.ts";

const REPO = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");
const DENO = `${REPO}/tools/deno.sh`;
const DOC = "docs/walkthrough.md";
const opts = { sanitizeOps: false, sanitizeResources: false };

const EVCS = {
  group: "kopf.dev",
  version: "v1",
  plural: "ephemeralvolumeclaims",
  namespaced: true,
};
const PVCS = { group: "", version: "v1", plural: "persistentvolumeclaims", namespaced: true };
const namespace = "default";

const blocks = codeBlocks(DOC, await Deno.readTextFile(`${REPO}/${DOC}`));
/** The step number of a block: its section's leading number. */
const stepOf = (section: string) => Number(/^(\d+)\./.exec(section)?.[1] ?? NaN);
function filesOf(step: number): Map<string, string> {
  const files = new Map<string, string>();
  for (const b of blocks) {
    if (stepOf(b.section) === step && b.attrs.file) files.set(b.attrs.file, b.code);
  }
  return files;
}

async function sh(cwd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(DENO, {
    args,
    cwd,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `deno ${args.join(" ")} in ${cwd} failed:\n${text}`);
  return text;
}

/** Writes a step's files; regenerates the types after a CRD; checks the TypeScript files. */
async function writeStep(project: string, step: number): Promise<Map<string, string>> {
  const files = filesOf(step);
  for (const [file, code] of files) {
    await Deno.mkdir(`${project}/${file.replace(/[^/]*$/, "")}`, { recursive: true });
    await Deno.writeTextFile(`${project}/${file}`, code);
  }
  if ([...files.keys()].some((f) => f.startsWith("crds/"))) await sh(project, ["task", "types"]);
  const ts = [...files.keys()].filter((f) => f.endsWith(".ts"));
  if (ts.length) {
    await sh(project, ["check", ...ts]);
    await sh(project, ["fmt", "--check", ...ts]);
  }
  return files;
}

/** A task of the project's deno.json: its `&&`-joined commands, each as words. */
async function taskOf(project: string, name: string): Promise<string[][]> {
  const config = JSON.parse(await Deno.readTextFile(`${project}/deno.json`));
  const commands = String(config.tasks[name]).split(" && ").map((c) => c.split(" "));
  for (const words of commands) {
    assert.equal(words[0], "deno", `the ${name} task runs deno: ${config.tasks[name]}`);
  }
  return commands;
}

/** `deno ARGS` in the project, running on: its output lines, waiting for a line, stopping it. */
function spawn(project: string, args: string[]) {
  const child = new Deno.Command(DENO, {
    args,
    cwd: project,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const { lines, exited } = captureLines(child);
  const waitFor = (pattern: RegExp, timeoutMs = 30_000) =>
    eventually(
      () => lines.find((l) => pattern.test(l)),
      timeoutMs,
      `output ${pattern}; got:\n${lines.join("\n")}`,
    );
  return { lines, waitFor, stop: () => terminate(child, exited) };
}

/**
 * The project's `dev` task (`deno check handlers.ts`, then the operator on the embedded API), and
 * a client for that API.
 */
async function dev(project: string) {
  const commands = await taskOf(project, "dev");
  for (const words of commands.slice(0, -1)) await sh(project, words.slice(1));
  const op = spawn(project, commands.at(-1)!.slice(1));
  const printed = await op.waitFor(/export KUBECONFIG=\S+/);
  const path = /export KUBECONFIG=(\S+)/.exec(printed)![1]!;
  const client = new KubeClient(await loadKubeconfig({ paths: [path] }));
  const stop = async () => {
    client[Symbol.dispose]();
    await op.stop();
  };
  return { client, lines: op.lines, waitFor: op.waitFor, stop, [Symbol.asyncDispose]: stop };
}

async function createEvc(
  client: KubeClient,
  project: string,
  patch: Partial<KubeObject> = {},
  ns = namespace,
) {
  const evc = parseYaml(await Deno.readTextFile(`${project}/evc.yaml`)) as KubeObject;
  return await client.api.create(EVCS, { ...evc, ...patch }, { namespace: ns });
}

async function pvcOf(client: KubeClient, name = "my-claim", ns = namespace): Promise<KubeObject> {
  return await eventually(
    () => client.api.get(PVCS, name, { namespace: ns }),
    30_000,
    `PVC ${ns}/${name}`,
  );
}

const storageOf = (pvc: KubeObject) =>
  (pvc.spec as { resources?: { requests?: { storage?: string } } }).resources?.requests?.storage;

Deno.test("walkthrough: examples/18-walkthrough-evc has the same CRD as step 1", async () => {
  // Both are applied to the shared control plane (created if missing, never replaced): with two
  // schemas, which one a test ran against would depend on the order of the tests.
  const step1 = filesOf(1).get("crds/ephemeralvolumeclaims.yaml");
  assert.ok(step1, "step 1 writes crds/ephemeralvolumeclaims.yaml");
  const example = await Deno.readTextFile(`${REPO}/examples/18-walkthrough-evc/crd.yaml`);
  assert.deepEqual(parseYaml(example), parseYaml(step1));
});

Deno.test("walkthrough: every step's files compile and do what the step says", opts, async (t) => {
  await using dir = await tempDir("kopf-walkthrough-");
  const init = blocks.find((b) => stepOf(b.section) === 0 && b.lang === "sh")!;
  const command = init.code.split("\n").find((l) => l.startsWith("kopf init"))!.split(/\s+/);
  await sh(dir.path, ["run", "-A", `${REPO}/cli.ts`, ...command.slice(1), "--kopf", REPO]);
  const project = `${dir.path}/${command[2]}`;

  await t.step("1. the resource: the CRD, its types", async () => {
    assert.ok((await writeStep(project, 1)).has("crds/ephemeralvolumeclaims.yaml"));
    const types = await Deno.readTextFile(`${project}/types.ts`);
    assert.match(types, /export const EphemeralVolumeClaims\b/);
    assert.match(types, /"pvc-name"\?: string/);
  });

  await t.step("2. the operator starts: the create handler logs the spec", async () => {
    await writeStep(project, 2);
    await Deno.remove(`${project}/handlers_test.ts`);
    await using op = await dev(project);
    await createEvc(op.client, project);
    await op.waitFor(/Created: \{"size":"1G"\}/);
  });

  await t.step("3. creating the child: an adopted PVC, its name in the status", async () => {
    await writeStep(project, 3);
    await using op = await dev(project);
    const evc = await createEvc(op.client, project);
    const pvc = await pvcOf(op.client);
    assert.equal(storageOf(pvc), "1G");
    assert.equal((pvc.spec as { storageClassName?: string }).storageClassName, "standard");
    const [owner] = pvc.metadata?.ownerReferences ?? [];
    assert.equal(owner?.uid, evc.metadata?.uid);
    assert.equal(owner?.controller, true);
    await eventually(
      async () => {
        const live = await op.client.api.get(EVCS, "my-claim", { namespace });
        return (live.status as { create_fn?: { "pvc-name"?: string } })?.create_fn?.["pvc-name"] ===
          "my-claim";
      },
      30_000,
      "status.create_fn['pvc-name']",
    );
    // Without a size: a permanent failure, once, and no PVC.
    await createEvc(op.client, project, { metadata: { name: "no-size" }, spec: {} });
    await op.waitFor(/Size must be set/);
    await assert.rejects(op.client.api.get(PVCS, "no-size", { namespace }));
  });

  await t.step("4. following the size: refused until bound, then 2G", async () => {
    await writeStep(project, 4);
    await using op = await dev(project);
    await createEvc(op.client, project);
    await pvcOf(op.client);
    const resize = { spec: { resources: { requests: { storage: "2G" } } } };
    await assert.rejects(
      op.client.api.patch(PVCS, "my-claim", resize, { namespace }),
      /spec is immutable after creation except resources\.requests/,
    );
    await op.client.api.patch(PVCS, "my-claim", { status: { phase: "Bound" } }, {
      namespace,
      subresource: "status",
    });
    await op.client.api.patch(EVCS, "my-claim", { spec: { size: "2G" } }, { namespace });
    await eventually(
      async () => storageOf(await op.client.api.get(PVCS, "my-claim", { namespace })) === "2G",
      30_000,
      "the PVC requests 2G",
    );
  });

  await t.step("5 and 6. labels follow, removals included; the PVC goes with the EVC", async () => {
    await writeStep(project, 5);
    assert.equal(filesOf(6).size, 0, "step 6 writes nothing");
    await using op = await dev(project);
    await createEvc(op.client, project);
    await pvcOf(op.client);
    await op.client.api.patch(PVCS, "my-claim", { status: { phase: "Bound" } }, {
      namespace,
      subresource: "status",
    });
    await op.client.api.patch(PVCS, "my-claim", { metadata: { labels: { tier: "scratch" } } }, {
      namespace,
    });
    const labelsOf = async () =>
      (await op.client.api.get(PVCS, "my-claim", { namespace })).metadata?.labels ?? {};
    const label = (labels: Record<string, string | null>) =>
      op.client.api.patch(EVCS, "my-claim", { metadata: { labels } }, { namespace });
    await label({ application: "some-app", owner: "me" });
    await eventually(async () => (await labelsOf()).owner === "me", 30_000, "labels added");
    await label({ owner: null });
    await eventually(async () => !("owner" in await labelsOf()), 30_000, "label removed");
    assert.deepEqual(await labelsOf(), { application: "some-app", tier: "scratch" });

    await op.client.api.delete(EVCS, "my-claim", { namespace });
    await eventually(
      () => op.client.api.get(PVCS, "my-claim", { namespace }).then(() => false, () => true),
      30_000,
      "the PVC garbage-collected",
    );
  });

  await t.step("7. testing it: the project's own test passes", async () => {
    await writeStep(project, 7);
    await sh(project, ["task", "test"]);
  });

  await t.step(
    "the project lints clean; on a real API server its operator does step 3",
    async () => {
      await sh(project, ["lint"]);

      // The CRD is cluster-wide and other tests may hold the same name (examples/18-walkthrough-evc):
      // created if missing, never deleted.
      using client = await testClient();
      await applyCrds(client, `${project}/crds/ephemeralvolumeclaims.yaml`);
      const ns = await testNamespace("walkthrough");
      // The `run` task as written, watching the test's namespace of the shared control plane.
      const [run, ...more] = await taskOf(project, "run");
      assert.equal(more.length, 0);
      assert.ok(run!.includes("--all-namespaces"), run!.join(" "));
      const args = run!.slice(1).flatMap((w) => w === "--all-namespaces" ? ["-n", ns] : [w]);
      const op = spawn(project, [...args, "--kubeconfig", await kubeconfigPath()]);
      try {
        await op.waitFor(/Watching ephemeralvolumeclaims\.v1\.kopf\.dev/, 60_000);
        const evc = await createEvc(client, project, {}, ns);
        // The child, created through the handler's client: in the EVC's namespace, owned by it.
        const pvc = await pvcOf(client, "my-claim", ns);
        assert.equal(pvc.metadata?.namespace, ns);
        assert.equal(storageOf(pvc), "1G");
        const [owner] = pvc.metadata?.ownerReferences ?? [];
        assert.equal(owner?.uid, evc.metadata?.uid);
        assert.equal(owner?.kind, "EphemeralVolumeClaim");
        assert.equal(owner?.controller, true);
        await op.waitFor(/PVC child is created: my-claim/);
        await eventually(
          async () => {
            const live = await client.api.get(EVCS, "my-claim", { namespace: ns });
            const status = live.status as { create_fn?: { "pvc-name"?: string } } | undefined;
            return status?.create_fn?.["pvc-name"] === "my-claim";
          },
          30_000,
          "status.create_fn['pvc-name'] on the real API server",
        );
        assert.deepEqual(op.lines.filter((l) => /ERROR|Traceback|Unexpected error/.test(l)), []);
      } finally {
        await op.stop();
      }
    },
  );
});
