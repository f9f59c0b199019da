/**
 * The package's entry points export exactly what is pinned in tests/_exports_pinned.ts, and
 * Kopf's names are where Kopf users look for them.
 *
 * Each export of deno.json has its sorted list of names (values and types, as `deno doc` lists
 * them): adding or removing a name anywhere in the public API fails the first tests until the
 * pinned list changes with it — a conscious change, reviewed as such. What goes where: handler
 * authoring at the root (`@kopf/ts`), the API client's transport at `@kopf/ts/client`, the
 * operator's machinery at `@kopf/ts/tuning`, the kits at theirs (docs/architecture.md). The
 * types below are also checked by `deno test` (type-checking this file fails when one is
 * missing or does not fit).
 */

import assert from "node:assert/strict";
import type {
  AdmissionContext,
  Annotations,
  ChangingContext,
  HandlerId,
  Headers,
  Labels,
  Operation,
  SSLPeer,
} from "../mod.ts";
import type { ChangingHandler } from "../tuning.ts";
import { PINNED } from "./_exports_pinned.ts";

const REPO = decodeURIComponent(new URL("..", import.meta.url).pathname).replace(/\/$/, "");

/** The names a module exports (values and types), sorted, as `deno doc` lists them. */
async function exportedNames(module: string): Promise<string[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", module],
    cwd: REPO,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  const doc = JSON.parse(new TextDecoder().decode(out.stdout)) as {
    nodes: Record<string, { symbols: { name: string }[] }>;
  };
  const names = new Set(
    Object.values(doc.nodes).flatMap((node) => node.symbols.map((s) => s.name)),
  );
  return [...names].sort();
}

/** deno.json's exports: subpath → module (relative to the repository). */
async function packageExports(): Promise<Record<string, string>> {
  const config = JSON.parse(await Deno.readTextFile(`${REPO}/deno.json`));
  return Object.fromEntries(
    Object.entries(config.exports as Record<string, string>).map(([sub, path]) => [
      sub,
      path.replace(/^\.\//, ""),
    ]),
  );
}

Deno.test("every export of deno.json has its pinned list of names, sorted", async () => {
  const subpaths = Object.keys(await packageExports()).filter((sub) => sub !== "./builtins");
  assert.deepEqual(
    [...subpaths].sort(),
    Object.keys(PINNED).sort(),
    "a new (or removed) export of deno.json needs its list in PINNED (tests/_exports_pinned.ts)",
  );
  for (const [sub, names] of Object.entries(PINNED)) {
    assert.deepEqual(
      [...names],
      [...new Set(names)].sort(),
      `PINNED["${sub}"] is sorted, no repeats`,
    );
  }
});

for (const [sub, pinned] of Object.entries(PINNED)) {
  const name = sub === "." ? "@kopf/ts" : `@kopf/ts/${sub.slice(2)}`;
  Deno.test(`${name} exports exactly its ${pinned.length} pinned names`, async () => {
    const module = (await packageExports())[sub];
    assert.ok(module, `deno.json exports ${sub}`);
    const actual = await exportedNames(module);
    const added = actual.filter((n) => !pinned.includes(n));
    const removed = pinned.filter((n) => !actual.includes(n));
    assert.ok(
      added.length === 0 && removed.length === 0,
      `${name} (${module}) changed its public names` +
        (added.length ? `; added: ${added.join(", ")}` : "") +
        (removed.length ? `; removed: ${removed.join(", ")}` : "") +
        `. If that is meant, change PINNED["${sub}"] in tests/_exports_pinned.ts (a removal or ` +
        "a move is a breaking change once published); if not, export it elsewhere.",
    );
  });
}

Deno.test("mod.ts exports Labels, Annotations, HandlerId, Headers, SSLPeer and Operation (API-18)", () => {
  // Each alias is what the contexts and records already use: these assignments type-check.
  const fromChanging = (ctx: ChangingContext): [Labels, Annotations] => [
    ctx.labels,
    ctx.annotations,
  ];
  const fromAdmission = (ctx: AdmissionContext): [Headers, SSLPeer, Operation | undefined] => [
    ctx.headers,
    ctx.sslpeer,
    ctx.operation,
  ];
  const idOf = (handler: ChangingHandler): HandlerId => handler.id;
  const operations: Operation[] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];
  const labels: Labels = { app: "web" };
  const peer: SSLPeer = null;
  assert.equal(typeof fromChanging, "function");
  assert.equal(typeof fromAdmission, "function");
  assert.equal(typeof idOf, "function");
  assert.deepEqual([operations.length, labels.app, peer], [4, "web", null]);
});

Deno.test("mod.ts exports LoginError, an Error with its own name (ERR-11, API-11)", async () => {
  const { LoginError } = await import("../mod.ts");
  const error = new LoginError("No credentials");
  assert.ok(error instanceof Error);
  assert.equal(error.name, "LoginError");
});

Deno.test("mod.ts exports Kopf's public classes, functions and types: memo, indices, reasons, patches, resources, settings and storages, events, object references, webhook servers and their protocol (API-06, 07, 09, 12, 15, 17; WH-15, 16, 37; LOG-13)", async () => {
  const kopf = await import("../mod.ts");
  for (
    const name of [
      "Index",
      "Store",
      "Patch",
      "DaemonStoppingReason",
      "createSettings",
      "AnnotationsProgressStorage",
      "StatusProgressStorage",
      "AnnotationsDiffBaseStorage",
      "event",
      "info",
      "warn",
      "exception",
      "buildObjectReference",
      "WebhookServer",
      "WebhookK3dServer",
      "WebhookMinikubeServer",
    ]
  ) {
    assert.ok(name in kopf, `mod.ts exports ${name}`);
  }
  // The webhook servers' host names are Kopf's.
  const k3d = new kopf.WebhookK3dServer({ insecure: true });
  const minikube = new kopf.WebhookMinikubeServer({ insecure: true });
  assert.equal(k3d.host, "host.k3d.internal");
  assert.equal(minikube.host, "host.minikube.internal");
  // An object reference of a cluster-scoped object has no namespace (LOG-13).
  const ref = kopf.buildObjectReference({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "n", uid: "u" },
  });
  assert.deepEqual(ref, { apiVersion: "v1", kind: "Namespace", name: "n", uid: "u" });
});

// Types only: this file does not type-check when one is missing from mod.ts.
type _Types = [
  import("../mod.ts").Memo,
  import("../mod.ts").OperatorSettings,
  import("../mod.ts").StoppingReason,
  import("../mod.ts").Reason,
  import("../mod.ts").ObjectRef,
  import("../mod.ts").OwnerReference,
  import("../mod.ts").Resource,
  import("../mod.ts").UserInfo,
  import("../mod.ts").WebhookFn,
  import("../mod.ts").WebhookServerProtocol,
];
