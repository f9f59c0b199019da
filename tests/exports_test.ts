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
