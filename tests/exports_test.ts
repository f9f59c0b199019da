/**
 * The public entry point exports Kopf's type aliases and errors; the types are checked by
 * `deno test` (type-checking this file fails when an alias is missing or does not fit).
 */

import assert from "node:assert/strict";
import type {
  AdmissionContext,
  Annotations,
  ChangingContext,
  ChangingHandler,
  HandlerId,
  Headers,
  Labels,
  Operation,
  SSLPeer,
} from "../mod.ts";

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
