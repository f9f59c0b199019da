/**
 * Sub-handlers: one handler that splits its work into dynamically declared parts, one per item
 * of `spec.items`. Port of Kopf's example 07-subhandlers.
 *
 * Each sub-handler (ids `create_fn/item1`, `create_fn/item2`, …) is tracked, retried and
 * persisted on its own (progress annotations `kopf.zalando.org/create_fn.item1`, …, while the
 * creation is in progress); `create_fn` is called again until all of them are finished, and the
 * ones already finished are not run again. The parent must therefore declare the same
 * sub-handlers each time it is called.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/07-subhandlers/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 */
import { on } from "../../mod.ts";

interface Spec {
  items?: string[];
}

on.create<Spec>("kopfexamples", function create_fn({ spec, subhandler }) {
  for (const item of spec.items ?? []) {
    subhandler(function create_item_fn() {
      console.log(`=== Handling creation for ${item}. ===`);
    }, { id: item });
  }
});
