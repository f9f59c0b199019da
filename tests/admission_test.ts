/**
 * Admission webhooks end to end: a real kube-apiserver calls the operator's HTTPS webhook server
 * (127.0.0.1, self-signed certificate, `caBundle` in the managed configurations).
 *
 * Webhook configurations are cluster-scoped and this API server is shared by tests running in
 * parallel, so each test uses its own managed name, and every handler has a label filter unique
 * to the test: it becomes the webhook's `objectSelector`, so no other test's objects are ever
 * sent to it. The configurations are deleted at the end of each test, whatever happens.
 */

import assert from "node:assert/strict";
import {
  ABSENT,
  AdmissionError,
  ApiError,
  createSettings,
  type KubeClient,
  on,
  OperatorRegistry,
  start,
  WebhookServer,
} from "../mod.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { operator, OperatorStartError } from "../core/reactor/lifetime/running.ts";
import type {
  AdmissionReview,
  WebhookFnOptions,
  WebhookServeOptions,
} from "../core/structs/admission.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { fixture, stopCleanly, waitFor } from "./_examples.ts";
import { spawnOperator } from "./_operator.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

function unique(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

function example(name: string, labels: Record<string, string>, spec = {}): KubeObject {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name, labels }, spec };
}

/** POSTs an object and returns the raw response (for status, body and Warning headers). */
async function post(
  client: KubeClient,
  namespace: string,
  body: KubeObject,
  dryRun = false,
): Promise<Response> {
  const path = `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`;
  try {
    return await client.http.send({
      method: "POST",
      path,
      body,
      retries: 0,
      ...(dryRun ? { query: { dryRun: "All" } } : {}),
    });
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    return new Response(JSON.stringify({ message: error.message, code: error.code }), {
      status: error.code,
    });
  }
}

async function deleteConfigurations(client: KubeClient, name: string): Promise<void> {
  for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
    await client.api.delete(resource, name).catch(() => {});
  }
}

/** A webhook entry as the test reads it. */
interface Webhook {
  name: string;
  failurePolicy: string;
  sideEffects: string;
  matchPolicy: string;
  timeoutSeconds: number;
  rules: Array<Record<string, unknown> & { resources: string[]; operations: string[] }>;
  objectSelector?: unknown;
  clientConfig: { url: string; caBundle?: string };
}

async function configuration(
  client: KubeClient,
  kind: "validating" | "mutating",
  name: string,
): Promise<{ webhooks?: Webhook[] } | undefined> {
  try {
    return await client.api.get(WEBHOOK_CONFIGURATIONS[kind], name) as never;
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return undefined;
    throw error;
  }
}

Deno.test(
  "a validating handler rejects with its message and code, and warns on admitted objects (HK-ADM-01, 07, 08; ERR-08; KW-21..25; WH-06)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("adm-val");
    const managed = unique("val") + ".kopf.dev";
    const mark = unique("m");
    const registry = new OperatorRegistry();
    const seen: Array<Record<string, unknown>> = [];
    on.validate("kopfexamples", {
      registry,
      labels: { "adm-test": mark },
      operations: ["CREATE"],
      ignoreFailures: true,
    }, function validate1({ spec, warnings, dryrun, operation, userinfo, headers, subresource }) {
      seen.push({ dryrun, operation, user: userinfo.username, headers, subresource });
      if (spec.field === "bad") throw new AdmissionError("Meh! I don't like it", 418);
      if (spec.field === "oops") throw new Error("Unexpected");
      warnings.push("Verified by the operator");
    });
    const settings = createSettings();
    settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    settings.admission.managed = managed;
    try {
      await using running = start({
        registry,
        settings,
        client: await testClient(),
        namespaces: [namespace],
        standalone: true,
      });
      await running.ready;

      // The configuration is in place with Kopf's entry layout.
      const config = await configuration(client, "validating", managed);
      const entry = config?.webhooks?.[0]!;
      assert.equal(config?.webhooks?.length, 1);
      assert.equal(entry.name, `validate1.${managed}`);
      assert.equal(entry.failurePolicy, "Ignore");
      assert.equal(entry.sideEffects, "None");
      assert.equal(entry.matchPolicy, "Equivalent");
      assert.equal(entry.timeoutSeconds, 30);
      assert.deepEqual(entry.rules, [{
        apiGroups: ["kopf.dev"],
        apiVersions: ["v1"],
        resources: ["kopfexamples"],
        operations: ["CREATE"],
        scope: "*",
      }]);
      assert.deepEqual(entry.objectSelector, {
        matchExpressions: [{ key: "adm-test", operator: "In", values: [mark] }],
      });
      assert.match(entry.clientConfig.url, /^https:\/\/127\.0\.0\.1:\d+\/validate1$/);
      assert.ok(entry.clientConfig.caBundle);
      assert.equal(await configuration(client, "mutating", managed), undefined);

      // The API server picks up new configurations with a delay: wait until it calls us.
      const labels = { "adm-test": mark };
      const rejected = await eventually(
        async () => {
          const response = await post(client, namespace, example("bad", labels, { field: "bad" }));
          return response.status === 418 ? response : undefined;
        },
        30_000,
        "the webhook to reject the object",
      );
      const rejection = await rejected.json();
      assert.match(rejection.message, /denied the request: Meh! I don't like it/);
      assert.match(rejection.message, new RegExp(`validate1\\.${managed.replaceAll(".", "\\.")}`));

      // Other exceptions reject with code 500, naming the handler; their text stays in the log.
      const failed = await post(client, namespace, example("oops", labels, { field: "oops" }));
      assert.equal(failed.status, 500);
      const failure = (await failed.json()).message;
      assert.match(failure, /Admission handler 'validate1' failed/);
      assert.doesNotMatch(failure, /Unexpected/);

      // Dry runs pass the flag; the warnings reach the client as Warning headers.
      seen.length = 0;
      const dry = await post(client, namespace, example("dry", labels, { field: "ok" }), true);
      assert.equal(dry.status, 201);
      await dry.body?.cancel();
      assert.equal(seen.at(-1)?.dryrun, true);
      const good = await post(client, namespace, example("good", labels, { field: "ok" }));
      assert.equal(good.status, 201);
      await good.body?.cancel();
      assert.match(good.headers.get("warning") ?? "", /Verified by the operator/);
      const last = seen.at(-1)!;
      assert.equal(last.dryrun, false);
      assert.equal(last.operation, "CREATE");
      assert.equal(last.subresource, undefined);
      assert.equal(typeof last.user, "string");
      assert.match(String((last.headers as Record<string, string>)["content-type"]), /json/);

      // Objects without the label are never sent to the webhook (objectSelector).
      const before = seen.length;
      const other = await post(client, namespace, example("other", {}, { field: "bad" }));
      assert.equal(other.status, 201);
      await other.body?.cancel();
      assert.equal(seen.length, before);
    } finally {
      await deleteConfigurations(client, managed);
    }
  },
);

Deno.test(
  "a mutating handler's patch is applied as a JSON patch before storing (HK-ADM-03, WH-38)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("adm-mut");
    const managed = unique("mut") + ".kopf.dev";
    const mark = unique("m");
    const registry = new OperatorRegistry();
    on.mutate("kopfexamples", {
      registry,
      labels: { "adm-test": mark, "mutated": ABSENT },
      ignoreFailures: true,
    }, function add_defaults({ spec, patch, body }) {
      patch.labels["mutated"] = "yes";
      if (!("numbers" in spec)) patch.spec["numbers"] = [1, 2, 3];
      patch.spec["removeme"] = null;
      (body.metadata!.labels ??= {})["ignored"] = "body changes are not returned";
    });
    const settings = createSettings();
    settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    settings.admission.managed = managed;
    try {
      await using running = start({
        registry,
        settings,
        client: await testClient(),
        namespaces: [namespace],
        standalone: true,
      });
      await running.ready;
      const entry = (await configuration(client, "mutating", managed))?.webhooks?.[0]!;
      assert.deepEqual(entry.objectSelector, {
        matchExpressions: [
          { key: "adm-test", operator: "In", values: [mark] },
          { key: "mutated", operator: "DoesNotExist" },
        ],
      });
      const stored = await eventually(
        async () => {
          const name = unique("obj");
          const response = await post(
            client,
            namespace,
            example(name, { "adm-test": mark }, { removeme: 1, keep: "x" }),
          );
          const object = await response.json() as KubeObject;
          return object.metadata?.labels?.["mutated"] === "yes" ? object : undefined;
        },
        30_000,
        "the webhook to mutate the object",
      );
      assert.deepEqual(stored.spec, { numbers: [1, 2, 3], keep: "x" });
      assert.equal(stored.metadata?.labels?.["ignored"], undefined);
    } finally {
      await deleteConfigurations(client, managed);
    }
  },
);

Deno.test(
  "managed configurations keep only persistent webhooks after exit (WH-02, 03, 05, 07; HK-ADM-04)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("adm-cfg");
    const managed = unique("cfg") + ".kopf.dev";
    const mark = unique("m");
    const registry = new OperatorRegistry();
    const labels = { "adm-test": mark };
    on.validate("kopfexamples", {
      registry,
      labels,
      ignoreFailures: true,
      persistent: true,
      id: "keep_me/sub",
    }, () => {});
    on.validate("kopfexamples", {
      registry,
      labels,
      ignoreFailures: true,
      sideEffects: true,
      subresource: "*",
      operation: "UPDATE",
    }, function drop_me() {});
    on.mutate("kopfexamples", { registry, labels, ignoreFailures: true }, function mutate_me() {});
    const settings = createSettings();
    settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0, path: "/hooks" });
    settings.admission.managed = managed;
    try {
      {
        await using running = start({
          registry,
          settings,
          client: await testClient(),
          namespaces: [namespace],
          standalone: true,
        });
        await running.ready;
        const validating = (await configuration(client, "validating", managed))?.webhooks ?? [];
        assert.deepEqual(validating.map((w) => w.name), [
          `keep-me.sub.${managed}`,
          `drop-me.${managed}`,
        ]);
        const drop = validating[1]!;
        assert.equal(drop.sideEffects, "NoneOnDryRun");
        assert.deepEqual(drop.rules[0]!.resources, ["kopfexamples", "kopfexamples/*"]);
        assert.deepEqual(drop.rules[0]!.operations, ["UPDATE"]);
        assert.match(drop.clientConfig.url, /\/hooks\/drop_me$/);
        assert.match(
          validating[0]!.clientConfig.url,
          /\/hooks\/keep_me%2Fsub$/,
        );
        const mutating = (await configuration(client, "mutating", managed))?.webhooks ?? [];
        assert.deepEqual(mutating.map((w) => w.name), [`mutate-me.${managed}`]);
      }
      const validating = (await configuration(client, "validating", managed))?.webhooks ?? [];
      assert.deepEqual(validating.map((w) => w.name), [`keep-me.sub.${managed}`]);
      const mutating = await configuration(client, "mutating", managed);
      assert.deepEqual(mutating?.webhooks ?? [], []);
    } finally {
      await deleteConfigurations(client, managed);
    }
  },
);

Deno.test(
  "an operator with admission handlers but no webhook server fails at startup (HK-ADM-12, WH-10)",
  opts,
  async () => {
    const registry = new OperatorRegistry();
    on.validate("kopfexamples", { registry }, function validate1() {});
    using client = await testClient();
    await assert.rejects(
      operator({ registry, client, standalone: true }),
      (error: unknown) =>
        error instanceof OperatorStartError &&
        /no webhook server is configured/.test(error.message),
    );
  },
);

Deno.test(
  "a webhook server is told the cluster's version and the CA the operator trusts for it (WH-18)",
  opts,
  async () => {
    const registry = new OperatorRegistry();
    on.validate("kopfexamples", { registry, labels: { "adm-test": unique("m") } }, function v() {});
    const told: WebhookServeOptions[] = [];
    const settings = createSettings();
    // No managed configurations: the server's client config is not written anywhere.
    settings.admission.server = async function* (_fn, options) {
      told.push(options);
      yield { url: "https://127.0.0.1:1" };
      await new Promise((resolve) => options.signal.addEventListener("abort", resolve));
    };
    using client = await testClient();
    await using running = start({ registry, settings, client, standalone: true });
    await running.ready;
    assert.equal(told.length, 1);
    const version = await client.http.json<{ gitVersion: string }>({ path: "/version" });
    assert.equal(told[0]?.gitVersion, version.gitVersion);
    assert.ok(client.http.connection.caPem, "the test plane's kubeconfig carries its CA");
    assert.equal(told[0]?.caPem, client.http.connection.caPem);
  },
);

Deno.test(
  "WebhookServer serves reviews over HTTPS with a self-signed CA, or plain HTTP when insecure (WH-11, 12, 14, 21, 31, 35)",
  opts,
  async () => {
    const cadump = await Deno.makeTempFile({ suffix: ".pem" });
    const calls: Array<string | undefined> = [];
    const fn = (review: AdmissionReview, options: WebhookFnOptions = {}) => {
      calls.push(options.webhook);
      return Promise.resolve({
        apiVersion: review.apiVersion,
        kind: review.kind,
        response: { uid: review.request!.uid, allowed: true, warnings: [`for ${options.webhook}`] },
      });
    };
    const review = {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: { uid: "u1" },
    };
    try {
      for (const insecure of [false, true]) {
        const stop = new AbortController();
        const server = new WebhookServer({
          addr: "127.0.0.1",
          port: 0,
          path: "/root",
          cadump,
          insecure,
        });
        const configs = server.serve(fn, { signal: stop.signal });
        const { value: config } = await configs.next();
        const ca = insecure ? undefined : atob(config!.caBundle!);
        if (!insecure) assert.equal(await Deno.readTextFile(cadump), ca);
        assert.equal(config!.url, `${insecure ? "http" : "https"}://127.0.0.1:${server.port}/root`);
        using http = Deno.createHttpClient(ca ? { caCerts: [ca] } : {});
        const response = await fetch(`${config!.url}/validate1`, {
          method: "POST",
          body: JSON.stringify(review),
          headers: { "content-type": "application/json" },
          client: http,
        });
        assert.deepEqual((await response.json()).response, {
          uid: "u1",
          allowed: true,
          warnings: ["for validate1"],
        });
        const wrong = await fetch(`${config!.url.replace("/root", "/other")}/x`, {
          method: "POST",
          body: "{}",
          client: http,
        });
        assert.equal(wrong.status, 404);
        await wrong.body?.cancel();
        stop.abort();
        assert.equal((await configs.next()).done, true);
      }
      assert.deepEqual(calls, ["validate1", "validate1"]);
    } finally {
      await Deno.remove(cadump);
    }
  },
);

Deno.test(
  "17-admission: the example rejects, warns and mutates through managed webhooks (EX-17)",
  opts,
  async () => {
    await using fx = await fixture("ex17");
    const { client, namespace } = fx;
    const managed = unique("ex17") + ".kopf.dev";
    try {
      await using op = await spawnOperator(
        ["examples/17-admission/example.ts", "--verbose", "-n", namespace],
        { WEBHOOK_PORT: "0", WEBHOOK_MANAGED: managed },
      );
      await waitFor(op, /Reconfiguring the mutating webhook configuration/, 20_000);
      const labels = { admission: "on" };
      const rejected = await eventually(
        async () => {
          const response = await post(
            client,
            namespace,
            example(unique("kex"), labels, { numbers: ["1", 200] }),
          );
          return response.status === 422 ? response : undefined;
        },
        30_000,
        "the webhook to reject the object",
      );
      assert.match((await rejected.json()).message, /Numbers must be within 0\.\.100/);
      // The mutating configuration may reach the API server later than the validating one.
      const [name, created, stored] = await eventually(
        async () => {
          const name = unique("kex");
          const response = await post(client, namespace, example(name, labels, { field: "a" }));
          const object = await response.json() as KubeObject;
          return Array.isArray((object.spec as { numbers?: unknown })?.numbers)
            ? [name, response, object] as const
            : undefined;
        },
        30_000,
        "the webhook to mutate the object",
      );
      assert.equal(created.status, 201);
      assert.match(created.headers.get("warning") ?? "", /Verified with the operator's hook/);
      assert.deepEqual(stored.spec, { field: "a", numbers: [1, 2, 3] });
      await assert.rejects(
        client.api.patch(KOPFEXAMPLES, name, { spec: { field: "b" } }, { namespace }),
        (error: unknown) => error instanceof ApiError && /immutable/.test(error.message),
      );
      await stopCleanly(op);
      assert.deepEqual((await configuration(client, "validating", managed))?.webhooks ?? [], []);
    } finally {
      await deleteConfigurations(client, managed);
    }
  },
);

Deno.test(
  "admission reviews of changes get the object's own memo; creations a throwaway one (HK-ADM-09, MEMO-07)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("adm-memo");
    const managed = unique("memo") + ".kopf.dev";
    const mark = unique("m");
    const registry = new OperatorRegistry();
    on.create("kopfexamples", { registry }, ({ memo, name }) => {
      memo["createdAs"] = name;
    });
    const memos: Array<{ operation: string | undefined; createdAs: unknown }> = [];
    on.validate("kopfexamples", {
      registry,
      labels: { "adm-test": mark },
      operations: ["CREATE", "UPDATE"],
      ignoreFailures: true,
    }, function checkmemo({ memo, operation, warnings }) {
      memos.push({ operation, createdAs: memo["createdAs"] });
      memo["touchedByAdmission"] = true; // must not leak into the operator's memo on CREATE
      warnings.push(`memo:${String(memo["createdAs"] ?? "none")}`);
    });
    const settings = createSettings();
    settings.admission.server = new WebhookServer({ addr: "127.0.0.1", port: 0 });
    settings.admission.managed = managed;
    try {
      await using running = start({
        registry,
        settings,
        client: await testClient(),
        namespaces: [namespace],
        standalone: true,
      });
      await running.ready;
      const labels = { "adm-test": mark };
      // Wait until the API server calls the webhook (configurations are picked up with a delay).
      await eventually(
        async () => {
          const probe = await post(client, namespace, example(unique("probe"), labels), true);
          await probe.body?.cancel();
          return /memo:/.test(probe.headers.get("warning") ?? "") ? true : undefined;
        },
        30_000,
        "the webhook to be called",
      );
      const created = await post(client, namespace, example("kex1", labels, { field: "a" }));
      assert.equal(created.status, 201);
      await created.body?.cancel();
      assert.match(created.headers.get("warning") ?? "", /memo:none/);
      // Once the create handler has run, an update's review sees that object's memo.
      await eventually(
        async () => {
          const object = await client.api.get(KOPFEXAMPLES, "kex1", { namespace });
          return object.metadata?.annotations?.["kopf.zalando.org/last-handled-configuration"]
            ? true
            : undefined;
        },
        30_000,
        "the create handler to finish",
      );
      const response = await client.http.send({
        method: "PATCH",
        path: `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples/kex1`,
        body: { spec: { field: "b" } },
        contentType: "application/merge-patch+json",
        retries: 0,
      });
      await response.body?.cancel();
      assert.match(response.headers.get("warning") ?? "", /memo:kex1/);
      const update = memos.findLast((m) => m.operation === "UPDATE");
      assert.equal(update?.createdAs, "kex1");
    } finally {
      await deleteConfigurations(client, managed);
    }
  },
);
