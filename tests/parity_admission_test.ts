/**
 * Admission, as docs/parity.md lists it against Kopf's documentation: the handler options that
 * admission handlers refuse (HK-ADM-06), and custom webhook servers and tunnels whose endpoint
 * moves (WH-30, WH-34), served to the real API server.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { AdmissionError } from "../core/engines/admission/admission.ts";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import type {
  AdmissionReview,
  WebhookClientConfig,
  WebhookFn,
  WebhookServeOptions,
} from "../core/structs/admission.ts";
import { selfSignedServerCertificate } from "../kits/certificates.ts";
import { runOperator, statusOf, within } from "./_parity.ts";
import {
  applyCrds,
  eventually,
  kex,
  KOPFEXAMPLES,
  kubeconfigPath,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A name no other run uses. */
function unique(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
}

// ---------------------------------------------------------------------------------------------
// HK-ADM-06: options admission handlers refuse.

Deno.test(
  "admission handlers refuse errors/timeout/retries/backoff with a TypeError at registration (HK-ADM-06)",
  () => {
    const registry = new OperatorRegistry();
    const refused = { errors: "permanent", timeout: 1, retries: 1, backoff: 1 } as const;
    for (const [key, value] of Object.entries(refused)) {
      for (const kind of ["validate", "mutate"] as const) {
        assert.throws(
          () => on[kind]("kopfexamples", { registry, [key]: value } as never, () => {}),
          (error: unknown) =>
            error instanceof TypeError &&
            error.message === `Admission handlers are never retried: '${key}' is not accepted`,
          `${kind} with ${key}`,
        );
      }
    }
    assert.deepEqual(registry.webhooks(), [], "nothing was registered");
    // Nor are they in the option types (a type error if they were accepted).
    // @ts-expect-error: `retries` is not an admission option.
    assert.throws(() => on.validate("kopfexamples", { registry, retries: 1 }, () => {}));
    // @ts-expect-error: `backoff` is not an admission option.
    assert.throws(() => on.mutate("kopfexamples", { registry, backoff: 1 }, () => {}));
    on.validate("kopfexamples", { registry, id: "fine" }, () => {});
    assert.deepEqual(registry.webhooks().map((r) => r.handler.id), ["fine"]);
  },
);

// ---------------------------------------------------------------------------------------------
// WH-30, WH-34: custom webhook servers and tunnels.

Deno.test(
  "a custom webhook server as a plain function: it calls fn for reviews, each config it yields re-applies the managed configurations (a tunnel whose endpoint moves), and its return ends the operator (WH-30, WH-34)",
  opts,
  async () => {
    using client = await testClient({ retries: 0 });
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("wh30");
    const managed = unique("tunnel") + ".kopf.dev";
    const mark = unique("m");
    const labels = { "wh30-test": mark };
    const registry = new OperatorRegistry();
    on.validate("kopfexamples", { registry, labels, id: "check" }, ({ spec }) => {
      if (spec.bad) throw new AdmissionError("bad spec", 422);
    });
    on.create("kopfexamples", { registry, labels }, function seen() {
      return "seen";
    });

    const cert = await selfSignedServerCertificate(["127.0.0.1"]);
    const caBundle = btoa(cert.caPem);
    const hits: string[] = [];
    const move = Promise.withResolvers<void>();
    const exit = Promise.withResolvers<void>();
    const endpoint = (name: string, fn: WebhookFn, signal: AbortSignal) =>
      Deno.serve({
        hostname: "127.0.0.1",
        port: 0,
        cert: cert.certPem,
        key: cert.keyPem,
        signal,
        onListen: () => {},
      }, async (request) => {
        const webhook = decodeURIComponent(new URL(request.url).pathname.split("/").pop()!);
        hits.push(`${name} ${webhook}`);
        const review = await request.json() as AdmissionReview;
        return Response.json(await fn(review, { webhook }));
      });
    const until = (promise: Promise<void>, signal: AbortSignal) =>
      Promise.race([
        promise,
        new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve())),
      ]);
    // Kopf's simple form: a function of fn, yielding client configs, holding control.
    async function* tunnel(
      fn: WebhookFn,
      options: WebhookServeOptions,
    ): AsyncGenerator<WebhookClientConfig> {
      const firstStop = new AbortController();
      const lastStop = new AbortController();
      try {
        const first = endpoint("one", fn, AbortSignal.any([options.signal, firstStop.signal]));
        yield { url: `https://127.0.0.1:${first.addr.port}/one`, caBundle };
        await until(move.promise, options.signal);
        if (options.signal.aborted) return;
        const second = endpoint("two", fn, AbortSignal.any([options.signal, lastStop.signal]));
        yield { url: `https://127.0.0.1:${second.addr.port}/two`, caBundle };
        firstStop.abort(); // the old endpoint is gone
        await until(exit.promise, options.signal);
      } finally {
        firstStop.abort();
        lastStop.abort();
      }
    }
    const settings = createSettings();
    settings.admission.server = tunnel;
    settings.admission.managed = managed;
    const op = runOperator(registry, {
      namespaces: [namespace],
      kubeconfig: await kubeconfigPath(),
      settings,
    });
    const url = async () =>
      ((await client.api.get(WEBHOOK_CONFIGURATIONS.validating, managed)).webhooks as Array<
        { clientConfig: { url: string; caBundle: string } }
      >)[0]!.clientConfig;
    // A dry run: rejected by the handler once the API server uses the configuration.
    const rejected = async (by: string) => {
      hits.length = 0;
      const error = await client.http.json({
        method: "POST",
        path: `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`,
        query: { dryRun: "All" },
        body: kex(unique("bad"), { bad: true }, labels),
        retries: 0,
      }).then(() => undefined, (e: Error) => e);
      return /bad spec/.test(String(error)) && hits.includes(`${by} check`);
    };
    try {
      await op.ready;
      const one = await url();
      assert.match(one.url, /^https:\/\/127\.0\.0\.1:\d+\/one\/check$/);
      assert.equal(one.caBundle, caBundle);
      await eventually(() => rejected("one"), 30_000, "a review served by the first endpoint");
      await client.api.create(KOPFEXAMPLES, kex("good", {}, labels), { namespace });
      await eventually(async () => (await statusOf(client, "good", namespace)).seen === "seen");

      move.resolve();
      await eventually(async () => /\/two\/check$/.test((await url()).url), 30_000, "new url");
      await eventually(() => rejected("two"), 30_000, "a review served by the moved endpoint");

      exit.resolve(); // the server returns while the operator runs
      const error = await within(op.done, 30_000, "the operator to end with its server");
      assert.match(String(error), /webhook server exited unexpectedly/);
      // Ended for good: nothing handles new objects any more. (Its webhooks are removed on the
      // way out; until the API server notices, it may still call the gone endpoint.)
      await eventually(
        () => client.api.create(KOPFEXAMPLES, kex("late", {}, labels), { namespace }),
        30_000,
        "a creation admitted without the webhooks",
      );
      await sleep(1_500);
      assert.equal((await statusOf(client, "late", namespace)).seen, undefined);
    } finally {
      await op.stop().catch(() => {});
      for (const resource of Object.values(WEBHOOK_CONFIGURATIONS)) {
        await client.api.delete(resource, managed).catch(() => {});
      }
    }
  },
);
