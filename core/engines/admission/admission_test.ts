import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../../actions/execution.ts";
import { Logger } from "../../actions/loggers.ts";
import type { AdmissionContext } from "../../intents/contexts.ts";
import type { WebhookHandler } from "../../intents/handlers.ts";
import { OperatorRegistry } from "../../intents/registries.ts";
import { createSettings } from "../../settings/settings.ts";
import { type AdmissionReview, jsonPatchFromMerge } from "../../structs/admission.ts";
import { AdmissionError, serveReview } from "./admission.ts";
import { labelSelector, webhookName, withHandlerId } from "./admission_configs.ts";
import { ABSENT, PRESENT } from "../../intents/filters.ts";

function handler(
  id: string,
  fn: (context: AdmissionContext) => unknown,
  extra: Partial<WebhookHandler> = {},
): WebhookHandler {
  return {
    kind: "webhook",
    webhook: "validating",
    id,
    fn: fn as never,
    param: undefined,
    persistent: false,
    sideEffects: false,
    ignoreFailures: false,
    ...extra,
  };
}

function review(request: Record<string, unknown> = {}): AdmissionReview {
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "u1",
      kind: { group: "kopf.dev", version: "v1", kind: "KopfExample" },
      resource: { group: "kopf.dev", version: "v1", resource: "kopfexamples" },
      operation: "CREATE",
      object: { metadata: { name: "x", labels: { a: "1" } }, spec: { n: 1 } },
      ...request,
    },
  };
}

function deps(registry: OperatorRegistry, memo = {}) {
  return {
    registry,
    settings: createSettings(),
    logger: new Logger(["test"]),
    memo,
    signal: new AbortController().signal,
  };
}

Deno.test("serveReview() picks one error: AdmissionError, then permanent, temporary, other (HK-ADM-07)", async () => {
  const registry = new OperatorRegistry();
  const sel = { plural: "kopfexamples" };
  registry.registerWebhook(
    sel,
    handler("a", () => {
      throw new Error("other");
    }),
  );
  registry.registerWebhook(
    sel,
    handler("b", () => {
      throw new TemporaryError("temporary");
    }),
  );
  registry.registerWebhook(
    sel,
    handler("c", () => {
      throw new PermanentError("permanent");
    }),
  );
  let response = (await serveReview(deps(registry), review())).response!;
  assert.equal(response.allowed, false);
  // The ranking picks the permanent error; its text stays in the log (only AdmissionError's goes).
  assert.deepEqual(response.status, {
    message: "Admission handler 'c' failed; the details are in the operator's log.",
    code: 500,
  });
  registry.registerWebhook(
    sel,
    handler("d", () => {
      throw new AdmissionError("nope", 403);
    }),
  );
  response = (await serveReview(deps(registry), review())).response!;
  assert.deepEqual(response.status, { message: "nope", code: 403 });
  assert.equal(response.uid, "u1");
  // With a webhook id, only that handler runs.
  response = (await serveReview(deps(registry), review(), { webhook: "a" })).response!;
  assert.deepEqual(response.status, {
    message: "Admission handler 'a' failed; the details are in the operator's log.",
    code: 500,
  });
});

Deno.test("serveReview() filters by operation, subresource, labels and when (HK-ADM-04, 05)", async () => {
  const registry = new OperatorRegistry();
  const calls: string[] = [];
  const record = (id: string) => () => void calls.push(id);
  const sel = { plural: "kopfexamples" };
  registry.registerWebhook(sel, handler("create", record("create"), { operations: ["CREATE"] }));
  registry.registerWebhook(sel, handler("update", record("update"), { operations: ["UPDATE"] }));
  registry.registerWebhook(sel, handler("status", record("status"), { subresource: "status" }));
  registry.registerWebhook(sel, handler("star", record("star"), { subresource: "*" }));
  registry.registerWebhook(sel, handler("labelled", record("labelled"), { labels: { a: "2" } }));
  registry.registerWebhook(sel, handler("when", record("when"), { when: () => false }));
  registry.registerWebhook({ plural: "pods" }, handler("pods", record("pods")));
  await serveReview(deps(registry), review());
  assert.deepEqual(calls.sort(), ["create", "star"]);
  calls.length = 0;
  await serveReview(deps(registry), review({ operation: "UPDATE", subResource: "status" }));
  assert.deepEqual(calls.sort(), ["star", "status"]);
});

Deno.test("serveReview() passes the admission kwargs, a throwaway memo for creations, and returns the patch and warnings (KW-21..27, MEMO-07)", async () => {
  const registry = new OperatorRegistry();
  const operatorMemo = { shared: 1 };
  let context: AdmissionContext | undefined;
  registry.registerWebhook(
    { plural: "kopfexamples" },
    handler("m", (ctx) => {
      context = ctx;
      (ctx.memo as Record<string, unknown>).touched = true;
      ctx.warnings.push("careful");
      ctx.patch.labels["b"] = "2";
      ctx.patch.spec["n"] = null;
    }, { webhook: "mutating" }),
  );
  const response = (await serveReview(deps(registry, operatorMemo), review({ dryRun: true }), {
    headers: { authorization: "Bearer x" },
  })).response!;
  assert.equal(response.allowed, true);
  assert.deepEqual(response.warnings, ["careful"]);
  assert.equal(response.patchType, "JSONPatch");
  assert.deepEqual(JSON.parse(atob(response.patch!)), [
    { op: "remove", path: "/spec/n" },
    { op: "add", path: "/metadata/labels/b", value: "2" },
  ]);
  assert.equal(context?.dryrun, true);
  assert.equal(context?.operation, "CREATE");
  assert.equal(context?.subresource, undefined);
  assert.equal(context?.sslpeer, null);
  assert.equal(context?.headers.authorization, "Bearer x");
  assert.equal(context?.old, undefined);
  assert.equal(context?.memo.shared, 1);
  assert.deepEqual(operatorMemo, { shared: 1 });
  assert.deepEqual(context?.diff.map((d) => d[0]), ["add"]);
});

Deno.test("jsonPatchFromMerge() creates missing parents and skips removals of absent keys", () => {
  assert.deepEqual(jsonPatchFromMerge({ a: 1 }, { b: { c: 2 }, d: null }), [
    { op: "add", path: "/b", value: { c: 2 } },
  ]);
  assert.deepEqual(jsonPatchFromMerge({ a: { x: 1 } }, {}), []);
});

Deno.test("webhook names, selectors and URLs follow Kopf's rules (WH-05, WH-06, WH-33)", () => {
  assert.equal(webhookName("create_fn/sub", "auto.kopf.dev"), "create-fn.sub.auto.kopf.dev");
  assert.equal(webhookName("a b", null), "ax20b");
  assert.deepEqual(labelSelector({ a: "1", b: PRESENT, c: ABSENT, d: () => true }), {
    matchExpressions: [
      { key: "a", operator: "In", values: ["1"] },
      { key: "b", operator: "Exists" },
      { key: "c", operator: "DoesNotExist" },
    ],
  });
  assert.equal(labelSelector({ d: () => true }), undefined);
  assert.deepEqual(withHandlerId({ url: "https://h:1/root/", caBundle: "x" }, "v/1"), {
    url: "https://h:1/root/v%2F1",
    caBundle: "x",
  });
  assert.deepEqual(withHandlerId({ service: { name: "s", path: "/p" } }, "v"), {
    service: { name: "s", path: "/p/v" },
  });
});
