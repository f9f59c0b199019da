/**
 * Indices: in-memory lookups over watched objects, available to all handlers without API
 * requests. Port of Kopf's example 16-indexing.
 *
 * - `is_running` indexes Pods by `[namespace, name]`: whether each one is running;
 * - `by_label` indexes Pod names by each of their labels, as `[label, value]`;
 * - the probes `pod_count` and `pod_names` report the Pods known to `is_running` on the
 *   liveness endpoint (with `--liveness`);
 * - the timer `intervalled` prints `by_label` every 5 s for every KopfExample, and writes the
 *   running Pods of the object's namespace to its `status.running-pods` as `namespace::name`
 *   (Kopf's original lists those of `kube-system` and `default`).
 *
 * Indices are complete before any handler runs: every indexed resource is listed (and indexed)
 * first. Deleted Pods leave the indices.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/16-indexing/example.ts --verbose --liveness http://127.0.0.1:8080/healthz
 *   kubectl run kopf-pod --image=busybox --labels=app=demo -- sleep 1000
 *   kubectl apply -f examples/obj.yaml
 *   kubectl get kex kopf-example-1 -o jsonpath='{.status.running-pods}'
 *   curl http://127.0.0.1:8080/healthz
 */
import { type ActivityContext, index, type IndexView, on, timer } from "../../mod.ts";

index("pods", function is_running({ namespace, name, status }) {
  return new Map([[[namespace, name], status.phase === "Running"]]);
  // {["kube-system", "coredns-…"]: [true], ["default", "kopf-pod"]: [false], …}
});

index("pods", function by_label({ labels, name }) {
  return new Map(Object.entries(labels).map(([label, value]) => [[label, value], name]));
  // {["app", "demo"]: ["kopf-pod"], ["run", "kopf-pod"]: ["kopf-pod"], …}
});

/** As in Kopf, operator-level handlers get the indices too. */
type WithIndices = ActivityContext & { readonly indices?: Readonly<Record<string, IndexView>> };

function indicesOf(context: WithIndices): Readonly<Record<string, IndexView>> {
  if (!context.indices) throw new Error("The indices are not available to probes.");
  return context.indices;
}

on.probe(function pod_count(context: WithIndices) {
  return indicesOf(context).is_running?.size ?? 0;
});

on.probe(function pod_names(context: WithIndices) {
  const keys = indicesOf(context).is_running?.keys() ?? [];
  return keys.map((key) => (key as [string, string])[1]);
});

timer("kex", { interval: 5 }, function intervalled({ namespace, indices, patch }) {
  const { is_running, by_label } = indices;
  const labels = Object.fromEntries(
    (by_label?.keys() ?? []).map((key) => {
      const [label, value] = key as [string, string];
      return [`${label}=${value}`, by_label?.get(key)?.toArray().sort()];
    }),
  );
  console.log(`by_label: ${JSON.stringify(labels)}`);
  patch.status["running-pods"] = (is_running?.keys() ?? [])
    .map((key) => key as [string, string])
    .filter(([ns]) => ns === namespace)
    .filter((key) => is_running?.get(key)?.toArray().some(Boolean))
    .map(([ns, name]) => `${ns}::${name}`)
    .sort();
});
