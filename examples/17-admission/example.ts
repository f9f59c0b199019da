/**
 * Admission webhooks: validating and mutating handlers served by a local HTTPS webhook server
 * with a self-signed certificate, and webhook configurations managed by the operator. Port of
 * Kopf's example 17-admission (Kopf's ngrok and auto-tunnel variants have no equivalent here).
 *
 * Only objects labelled `admission=on` are sent to the webhooks (the label filter becomes the
 * webhooks' `objectSelector`), and failures are ignored (`ignoreFailures`), so that a stopped or
 * broken operator never blocks the cluster — start like that, as Kopf's docs advise. A request
 * the running operator cannot process (e.g. an object nested deeper than
 * `settings.admission.maxDepth`) is still denied: the webhook answers it, it does not fail.
 *
 * The API server must reach the webhook at `https://127.0.0.1:9443` (a cluster running on this
 * host, like the test control plane); for K3d or Minikube use `WebhookK3dServer` or
 * `WebhookMinikubeServer` instead.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/17-admission/example.ts --verbose
 *   kubectl create -f - <<< '{"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
 *     "metadata": {"name": "kex1", "labels": {"admission": "on"}}, "spec": {"numbers": ["1", 200]}}'
 *   # → admission webhook "numbers-range.auto.kopf.dev" denied the request: Numbers must be within 0..100
 *   kubectl create -f - <<< '{"apiVersion": "kopf.dev/v1", "kind": "KopfExample",
 *     "metadata": {"name": "kex2", "labels": {"admission": "on"}}, "spec": {}}'
 *   # → Warning: Verified with the operator's hook.
 *   kubectl get kex kex2 -o jsonpath='{.spec.numbers}'   # → [1,2,3]: set by the mutating handler
 *
 * Environment: `WEBHOOK_PORT` (default 9443), `WEBHOOK_MANAGED` (default `auto.kopf.dev`).
 */
import { AdmissionError, on, WebhookServer } from "../../mod.ts";

const filters = { labels: { admission: "on" }, ignoreFailures: true } as const;

on.startup(function configure({ settings }) {
  settings.admission.server = new WebhookServer({
    addr: "127.0.0.1",
    port: Number(Deno.env.get("WEBHOOK_PORT") ?? 9443),
  });
  settings.admission.managed = Deno.env.get("WEBHOOK_MANAGED") ?? "auto.kopf.dev";
});

on.validate("kopfexamples", filters, function say_hello({ warnings }) {
  warnings.push("Verified with the operator's hook.");
});

on.validate("kopfexamples", filters, function check_numbers({ spec }) {
  if (!Array.isArray(spec.numbers ?? [])) {
    throw new AdmissionError("Numbers must be a list if present.");
  }
});

on.validate("kopfexamples", filters, function convertible_numbers({ spec, warnings }) {
  for (const value of Array.isArray(spec.numbers) ? spec.numbers : []) {
    if (typeof value === "number") continue;
    if (Number.isNaN(Number(value))) {
      throw new AdmissionError(`Cannot convert ${JSON.stringify(value)} to a number.`);
    }
    warnings.push(`${JSON.stringify(value)} is not a number but can be converted.`);
  }
});

on.validate("kopfexamples", filters, function numbers_range({ spec }) {
  const numbers = Array.isArray(spec.numbers) ? spec.numbers.map(Number) : [];
  if (!numbers.every((n) => 0 <= n && n <= 100)) {
    throw new AdmissionError("Numbers must be within 0..100.", 422);
  }
});

on.validate(
  "kopfexamples",
  { ...filters, operations: ["UPDATE"] },
  function immutable_field({ diff }) {
    if (diff.some(([op, path]) => op === "change" && path.join(".") === "spec.field")) {
      throw new AdmissionError("The field is immutable once set.", 422);
    }
  },
);

on.validate(
  "kopfexamples",
  { ...filters, sideEffects: true },
  function audit({ dryrun, userinfo, logger }) {
    // Side effects are declared (sideEffects), so they are skipped in dry runs.
    if (!dryrun) logger.info(`Admitted a request by ${userinfo.username}.`);
  },
);

on.mutate(
  "kopfexamples",
  { ...filters, operations: ["CREATE"] },
  function ensure_default_numbers({ spec, patch }) {
    if (!("numbers" in spec)) patch.spec["numbers"] = [1, 2, 3];
  },
);
