/**
 * The README's first command: see an operator handle an object end to end.
 *
 * Uses the cluster from KUBECONFIG / ~/.kube/config when one answers; otherwise serves the
 * embedded in-memory Kubernetes API (kits/emulator; nothing to install), or, with
 * `--control-plane`, the real control plane built from source (tools/kube-binaries.sh; Go). Installs the
 * example CRD, runs `kopf run examples/01-minimal/example.ts`, creates `examples/obj.yaml`, and
 * shows the status, annotations and Events the operator produced. Then keeps running so you can
 * play from a second terminal (the kubeconfig path is printed) until Ctrl-C; `--once` exits.
 *
 * Usage: deno task demo [--once] [--control-plane]
 * @module
 */

import { parse, parseAllDocuments } from "yaml";
import { KubeClient } from "../core/client/client.ts";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import { ApiError } from "../core/client/errors.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { Emulator } from "../kits/emulator/mod.ts";
import { ControlPlane } from "../testing/control_plane.ts";

const once = Deno.args.includes("--once");
const KEX = { group: "kopf.dev", version: "v1", plural: "kopfexamples", namespaced: true };
const EVENTS = { group: "", version: "v1", plural: "events", namespaced: true };

function say(text: string): void {
  console.log(`\n\x1b[1m== ${text}\x1b[0m`);
}

async function reachable(): Promise<KubeClient | undefined> {
  try {
    const client = await KubeClient.connect({ retries: 0, timeoutMs: 3000 });
    await client.http.json({ path: "/api", retries: 0 });
    return client;
  } catch {
    return undefined;
  }
}

let plane: ControlPlane | undefined;
let emulator: Emulator | undefined;
/** The operator, once spawned. */
const started: { operator?: Deno.ChildProcess } = {};
let client: KubeClient | undefined;

/** Stops what the demonstration started (the operator, the API it made) and exits. */
async function stop(code: number): Promise<never> {
  try {
    started.operator?.kill("SIGTERM");
  } catch { /* gone */ }
  await started.operator?.status;
  client?.[Symbol.dispose]();
  await plane?.stop();
  await emulator?.stop();
  Deno.exit(code);
}

// From the start: Ctrl-C while the API or the operator is starting stops them as well, and the
// embedded API's kubeconfig (with its token) is never left behind.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  Deno.addSignalListener(signal, () => void stop(0));
}
let kubeconfig = Deno.env.get("KUBECONFIG") ?? `${Deno.env.get("HOME")}/.kube/config`;
client = await reachable();
if (client) {
  say(`Using the cluster at ${client.http.connection.server}`);
} else if (!Deno.args.includes("--control-plane")) {
  say("No cluster answers: starting the embedded (in-memory) Kubernetes API");
  emulator = await Emulator.start();
  kubeconfig = emulator.kubeconfigPath;
  client = await KubeClient.connect({ kubeconfig });
  console.log(`API server ${emulator.server}; kubeconfig ${kubeconfig}`);
} else {
  say("Starting a local control plane (etcd + kube-apiserver + controller manager)");
  // Built from the Go module proxy on first use (about 5 minutes), then cached.
  const build = await new Deno.Command("bash", {
    args: ["tools/kube-binaries.sh"],
    stderr: "inherit",
  }).output();
  if (!build.success) {
    console.error(
      "error: could not build the local control plane (see above); it needs Go >= 1.26",
    );
    Deno.exit(1);
  }
  const binDir = new TextDecoder().decode(build.stdout).trim().split("\n").pop()!;
  plane = await ControlPlane.start({ binDir });
  kubeconfig = plane.kubeconfigPath;
  client = await KubeClient.connect({ kubeconfig });
  console.log(`API server ${plane.server}; kubeconfig ${kubeconfig}`);
}

say("Installing the example CRD (crds/example.yaml)");
for (const doc of parseAllDocuments(await Deno.readTextFile("crds/example.yaml"))) {
  await client.api.create(CRD_RESOURCE, doc.toJS() as KubeObject).catch((e) => {
    if (!(e instanceof ApiError && e.code === 409)) throw e;
  });
}
for (let i = 0; i < 100; i++) {
  const crd = await client.api.get(CRD_RESOURCE, "kopfexamples.kopf.dev");
  const conditions =
    (crd.status as { conditions?: Array<{ type: string; status: string }> })?.conditions ?? [];
  if (conditions.some((c) => c.type === "Established" && c.status === "True")) break;
  await new Promise((r) => setTimeout(r, 100));
}

say("Running: kopf run examples/01-minimal/example.ts --verbose -n default");
const running = new Deno.Command(Deno.execPath(), {
  args: [
    "run",
    "-A",
    "cli.ts",
    "run",
    "examples/01-minimal/example.ts",
    "--verbose",
    "-n",
    "default",
  ],
  env: { KUBECONFIG: kubeconfig },
  stdout: "inherit",
  stderr: "inherit",
}).spawn();
started.operator = running;
await new Promise((r) => setTimeout(r, 2000));

say("Creating examples/obj.yaml (a KopfExample named kopf-example-1)");
const obj = parse(await Deno.readTextFile("examples/obj.yaml")) as KubeObject;
await client.api.delete(KEX, "kopf-example-1", { namespace: "default" }).catch(() => {});
for (let i = 0; i < 50; i++) {
  try {
    await client.api.get(KEX, "kopf-example-1", { namespace: "default" });
    await new Promise((r) => setTimeout(r, 200));
  } catch {
    break;
  }
}
await client.api.create(KEX, obj, { namespace: "default" });

let handled: KubeObject | undefined;
for (let i = 0; i < 100 && !handled; i++) {
  await new Promise((r) => setTimeout(r, 200));
  const live = await client.api.get(KEX, "kopf-example-1", { namespace: "default" });
  if ((live.status as Record<string, unknown> | undefined)?.create_fn) handled = live;
}
await new Promise((r) => setTimeout(r, 1500)); // Events are posted in small batches
say("What the operator did to the object");
console.log(`status: ${JSON.stringify(handled?.status)}`);
const annotation = handled?.metadata?.annotations?.["kopf.zalando.org/last-handled-configuration"];
console.log(`annotation kopf.zalando.org/last-handled-configuration: ${annotation?.trim()}`);
const events = await client.api.list(EVENTS, {
  namespace: "default",
  fieldSelector: `involvedObject.uid=${handled?.metadata?.uid}`,
});
say("Events (kubectl describe kex kopf-example-1)");
for (const e of events.items) console.log(`${e.type}\t${e.reason}\t${e.message}`);
if (!events.items.length) {
  console.log(
    "(none: this handler posts no Events itself, and log messages become Events only with\n" +
      " settings.posting.loggers = true — off by default, as in Kopf 1.44+; see docs/settings.md)",
  );
}

if (!handled) {
  console.error("error: the object was not handled within 20 s");
  await stop(1);
}
if (once) await stop(0);
say("The operator keeps running. In a second terminal:");
console.log(`  export KUBECONFIG=${kubeconfig}`);
console.log("  kubectl get kopfexamples");
console.log("  kubectl describe kopfexample kopf-example-1");
console.log("  kubectl apply -f examples/obj.yaml   # edit the spec to see updates");
console.log("Press Ctrl-C to stop.");
// The operator may also end on its own (or by a signal sent to the whole process group): the
// embedded API and its kubeconfig (with its token) go with it.
const { code } = await running.status;
await stop(code);
