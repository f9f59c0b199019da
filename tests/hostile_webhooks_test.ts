/**
 * Hostile input to admission webhooks: requests that must be refused plainly (a malformed
 * path, a wrong Content-Type), objects nested deeper than the framework can copy and diff, and
 * handler exceptions whose text must not reach the API client.
 *
 * The request handler is tested directly (no cluster proves anything there); the deep-object
 * case also runs end to end against the real API server, with `ignoreFailures: true`
 * (`failurePolicy: Ignore`): a webhook call that fails would admit the object.
 */

import assert from "node:assert/strict";
import {
  AdmissionError,
  ApiError,
  createSettings,
  type KubeClient,
  on,
  OperatorRegistry,
  start,
  WebhookServer,
} from "../mod.ts";
import { type LogEntry, Logger } from "../core/actions/loggers.ts";
import { createWebhookFn } from "../core/engines/admission/admission.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { handleWebhookRequest } from "../core/engines/admission/webhook_requests.ts";
import type { AdmissionContext } from "../core/intents/contexts.ts";
import type { WebhookHandler } from "../core/intents/handlers.ts";
import type { OperatorSettings } from "../core/settings/settings.ts";
import type { AdmissionReview } from "../core/structs/admission.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const JSON_TYPE = { "content-type": "application/json" };

/** `{"a": {"a": … 1 …}}`, `levels` mappings deep, built without recursion. */
function nested(levels: number): Record<string, unknown> {
  let value: unknown = 1;
  for (let i = 0; i < levels; i++) value = { a: value };
  return value as Record<string, unknown>;
}

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
    ignoreFailures: true,
    ...extra,
  };
}

/** A review function with these handlers, and the log entries it writes. */
function reviewFn(
  handlers: WebhookHandler[],
  configure: (settings: OperatorSettings) => void = () => {},
) {
  const registry = new OperatorRegistry();
  for (const h of handlers) registry.registerWebhook({ plural: "kopfexamples" }, h);
  const settings = createSettings();
  configure(settings);
  const logs: LogEntry[] = [];
  const logger = new Logger(["test"], { listeners: [(entry) => logs.push(entry)] });
  const fn = createWebhookFn({
    registry,
    settings,
    logger,
    memo: {},
    signal: new AbortController().signal,
  });
  return { fn, logs };
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
      object: { metadata: { name: "x" }, spec: {} },
      ...request,
    },
  };
}

/** POSTs a review (or raw text) to the request handler, as the API server would. */
function send(
  fn: ReturnType<typeof reviewFn>["fn"],
  body: AdmissionReview | string,
  { path = "/root/v", headers = JSON_TYPE as Record<string, string> } = {},
): Promise<Response> {
  const request = new Request(`https://127.0.0.1:9443${path}`, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    headers,
  });
  return handleWebhookRequest(request, "/root", fn);
}

async function responseOf(response: Response): Promise<NonNullable<AdmissionReview["response"]>> {
  assert.equal(response.status, 200, "an AdmissionReview is answered with 200");
  const answer = await response.json() as AdmissionReview;
  assert.equal(answer.kind, "AdmissionReview");
  return answer.response!;
}

Deno.test("a malformed percent-escape in the webhook path answers 400 without a stack trace", async () => {
  const calls: string[] = [];
  const { fn } = reviewFn([handler("v", () => void calls.push("v"))]);
  const response = await send(fn, review(), { path: "/root/%E0%A4%A" });
  const text = await response.text();
  assert.equal(response.status, 400);
  assert.match(text, /webhook path is not validly percent-encoded/);
  assert.doesNotMatch(text, /URIError|\bat \S+:\d+/);
  assert.deepEqual(calls, []);
  // A valid escape still names the handler.
  const ok = await send(fn, review(), { path: "/root/%76" });
  assert.equal((await responseOf(ok)).allowed, true);
  assert.deepEqual(calls, ["v"]);
});

Deno.test("a body not declared as application/json answers 415 and reaches no handler", async () => {
  const calls: string[] = [];
  const { fn } = reviewFn([handler("v", () => void calls.push("v"))]);
  const body = JSON.stringify(review());
  for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", null]) {
    // A string body gets text/plain unless told otherwise; none at all is tried too.
    const request = new Request("https://127.0.0.1:9443/root/v", { method: "POST", body });
    if (type === null) request.headers.delete("content-type");
    else request.headers.set("content-type", type);
    const response = await handleWebhookRequest(request, "/root", fn);
    const text = await response.text();
    assert.equal(response.status, 415, text);
    assert.match(text, /Unsupported Content-Type .*application\/json/);
  }
  assert.deepEqual(calls, []);
  for (const type of ["application/json", "Application/JSON; charset=utf-8"]) {
    const response = await send(fn, review(), { headers: { "content-type": type } });
    assert.equal((await responseOf(response)).allowed, true);
  }
  assert.deepEqual(calls, ["v", "v"]);
});

Deno.test("an over-deep object is denied with a clear message before any handler runs (CREATE, UPDATE)", async () => {
  const calls: string[] = [];
  const { fn, logs } = reviewFn([handler("v", () => void calls.push("v"))]);
  const deep = { metadata: { name: "x" }, spec: nested(8000) };
  for (
    const request of [
      { operation: "CREATE", object: deep },
      { operation: "UPDATE", object: deep, oldObject: deep },
      { operation: "DELETE", object: null, oldObject: deep },
    ]
  ) {
    const response = await responseOf(await send(fn, review(request)));
    assert.equal(response.uid, "u1");
    assert.equal(response.allowed, false, request.operation);
    assert.equal(response.status?.code, 400);
    assert.match(response.status?.message ?? "", /nested deeper than 1000 levels.*maxDepth/);
  }
  assert.deepEqual(calls, []);
  assert.ok(logs.some((entry) => /settings\.admission\.maxDepth/.test(entry.message)));
  // The limit counts the object's levels: exactly at the limit is served.
  const atLimit = { metadata: { name: "x" }, spec: nested(999) };
  const response = await responseOf(await send(fn, review({ object: atLimit })));
  assert.equal(response.allowed, true);
  assert.deepEqual(calls, ["v"]);
  const over = { metadata: { name: "x" }, spec: nested(1000) };
  assert.equal((await responseOf(await send(fn, review({ object: over })))).allowed, false);
  // The limit is a setting.
  const lower = reviewFn([handler("v", () => {})], (s) => (s.admission.maxDepth = 5));
  const shallow = { metadata: { name: "x" }, spec: nested(5) };
  const denied = await responseOf(await send(lower.fn, review({ object: shallow })));
  assert.match(denied.status?.message ?? "", /deeper than 5 levels/);
});

Deno.test("past the limit, a handler's verdict still answers, and a failing framework step denies (fail closed)", async () => {
  const lifted = (s: OperatorSettings) => (s.admission.maxDepth = Infinity);
  const deep = { metadata: { name: "x" }, spec: nested(8000) };

  // The handler rejects: the answer is its rejection (the JSON patch of the object was computed
  // even for rejections and overflowed the stack).
  const rejecting = reviewFn([handler("v", () => {
    throw new AdmissionError("Too deep for me", 422);
  })], lifted);
  const rejected = await responseOf(await send(rejecting.fn, review({ object: deep })));
  assert.equal(rejected.allowed, false);
  assert.deepEqual(rejected.status, { message: "Too deep for me", code: 422 });

  // The handler mutates, and the patch of such an object cannot be computed: denied, not failed.
  const mutating = reviewFn([handler("m", ({ patch }) => {
    patch.spec["b"] = 1;
  }, { webhook: "mutating" })], lifted);
  const unpatched = await responseOf(
    await send(mutating.fn, review({ object: deep }), { path: "/root/m" }),
  );
  assert.equal(unpatched.allowed, false);
  assert.equal(unpatched.status?.code, 500);
  assert.match(unpatched.status?.message ?? "", /could not compute the mutation patch/);
  assert.equal(unpatched.patch, undefined);

  // An UPDATE whose diff cannot be computed: denied before the handlers, not failed.
  const calls: string[] = [];
  const update = reviewFn([handler("v", () => void calls.push("v"))], lifted);
  const diffless = await responseOf(
    await send(update.fn, review({ operation: "UPDATE", object: deep, oldObject: deep })),
  );
  assert.equal(diffless.allowed, false);
  assert.match(diffless.status?.message ?? "", /could not process the admission request/);
  assert.ok(update.logs.some((entry) => entry.error instanceof RangeError));

  // So is a filter callback that throws.
  const filtered = reviewFn([handler("v", () => {}, {
    when: () => {
      throw new Error("the filter broke");
    },
  })]);
  const unfiltered = await responseOf(await send(filtered.fn, review()));
  assert.equal(unfiltered.allowed, false);
  assert.doesNotMatch(unfiltered.status?.message ?? "", /the filter broke/);
});

Deno.test("only an AdmissionError's text reaches the API client; other errors name the handler, their details go to the log (HK-ADM-07)", async () => {
  const secret = "s3cr3t-token-do-not-leak";
  const { fn, logs } = reviewFn([
    handler("typed", () => {
      throw new TypeError(`Cannot read properties of "Bearer ${secret}"`);
    }),
    handler("fetched", () => {
      throw new ApiError({
        code: 401,
        reason: "Unauthorized",
        message: `token "${secret}" was rejected`,
        request: { method: "GET", path: `/v1/secret?token=${secret}`, server: "https://vault" },
      });
    }),
    handler("thrown", () => {
      throw `a bare string with ${secret}`;
    }),
    handler("admission", () => {
      throw new AdmissionError("Numbers must be within 0..100.", 422);
    }),
  ]);
  for (const id of ["typed", "fetched", "thrown"]) {
    const raw = await send(fn, review(), { path: `/root/${id}` });
    const text = await raw.clone().text();
    const response = await responseOf(raw);
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status, {
      message: `Admission handler '${id}' failed; the details are in the operator's log.`,
      code: 500,
    });
    assert.ok(!text.includes(secret), `${id}: ${text}`);
  }
  // The operator's log has the details.
  const logged = logs.filter((entry) => entry.error !== undefined).map((e) => String(e.error));
  assert.equal(logged.length, 3);
  assert.ok(logged.every((text) => text.includes(secret)));
  // An AdmissionError is the handler's message to the client, sent as it is.
  const response = await responseOf(await send(fn, review(), { path: "/root/admission" }));
  assert.deepEqual(response.status, { message: "Numbers must be within 0..100.", code: 422 });
  // With several failures (no webhook id), the AdmissionError is the one reported.
  const all = await responseOf(await send(fn, review(), { path: "/root" }));
  assert.deepEqual(all.status, { message: "Numbers must be within 0..100.", code: 422 });
});

// --- End to end: the real API server calls the operator's webhook with failurePolicy Ignore.

async function post(client: KubeClient, method: string, path: string, body: unknown) {
  try {
    const response = await client.http.send({ method, path, body, retries: 0 });
    return { code: response.status, message: await response.text() };
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return { code: error.code, message: error.message };
  }
}

Deno.test(
  "an over-deep object is denied by a webhook with ignoreFailures, on creation and on update (not admitted as a failed call)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("hostile-wh");
    const managed = `deep-${crypto.randomUUID().slice(0, 8)}.kopf.dev`;
    const mark = crypto.randomUUID().slice(0, 8);
    const labels = { "hostile-test": mark };
    const registry = new OperatorRegistry();
    on.validate("kopfexamples", {
      registry,
      labels,
      operations: ["CREATE", "UPDATE"],
      ignoreFailures: true,
    }, function reject_marked({ spec }) {
      if (spec.deny) throw new AdmissionError("Marked for denial", 403);
    });
    const settings = createSettings();
    settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    settings.admission.managed = managed;
    const collection = `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`;
    const example = (name: string, spec: unknown): KubeObject => ({
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name, labels },
      spec: spec as Record<string, unknown>,
    });
    try {
      await using running = start({
        registry,
        settings,
        client: await testClient(),
        namespaces: [namespace],
        standalone: true,
      });
      await running.ready;
      // The API server picks up new configurations with a delay: wait until it calls us.
      await eventually(
        async () => {
          const result = await post(client, "POST", collection, example("marked", { deny: 1 }));
          return result.code === 403 ? result : undefined;
        },
        30_000,
        "the webhook to reject a marked object",
      );

      const created = await post(client, "POST", collection, example("deep", nested(8000)));
      assert.equal(created.code, 400, created.message.slice(0, 300));
      assert.match(created.message, /denied the request: The object is nested deeper than 1000/);
      assert.equal(
        await client.api.get(KOPFEXAMPLES, "deep", { namespace }).catch(() => null),
        null,
      );

      const shallow = await post(client, "POST", collection, example("shallow", { a: 1 }));
      assert.equal(shallow.code, 201, shallow.message);
      const current = await client.api.get(KOPFEXAMPLES, "shallow", { namespace });
      const updated = await post(client, "PUT", `${collection}/shallow`, {
        ...current,
        spec: nested(8000),
      });
      assert.equal(updated.code, 400, updated.message.slice(0, 300));
      assert.match(updated.message, /denied the request: The object is nested deeper than 1000/);
      const after = await client.api.get(KOPFEXAMPLES, "shallow", { namespace });
      assert.deepEqual(after.spec, { a: 1 });
    } finally {
      for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
        await client.api.delete(resource, managed).catch(() => {});
      }
    }
  },
);
