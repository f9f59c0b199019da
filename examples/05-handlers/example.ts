/**
 * All kinds of resource-changing handlers, several of a kind. Port of Kopf's example 05-handlers.
 *
 * - `create_fn_1`, `create_fn_2`: once, when an object is seen for the first time;
 * - `update_fn`: whenever the spec, labels or annotations of a handled object change;
 * - `field_fn`: whenever `spec.field` changes, including its first appearance at creation;
 * - `resume_fn_1`, `resume_fn_2`: for every object that already existed (and was handled) when
 *   the operator starts — restart the operator to see them;
 * - `delete_fn_1`, `delete_fn_2`: when the object is deleted; their finalizer keeps the object
 *   until both have finished.
 * Handlers of one kind run in the order of declaration. Each prints one line to stdout.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/05-handlers/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"field": "changed"}}'
 *   (restart the operator)
 *   kubectl delete -f examples/obj.yaml
 */
import { on } from "../../mod.ts";

on.resume("kopfexamples", function resume_fn_1() {
  console.log("RESUMED 1st");
});

on.create("kopfexamples", function create_fn_1() {
  console.log("CREATED 1st");
});

on.resume("kopfexamples", function resume_fn_2() {
  console.log("RESUMED 2nd");
});

on.create("kopfexamples", function create_fn_2() {
  console.log("CREATED 2nd");
});

on.update("kopfexamples", function update_fn({ diff }) {
  console.log(`UPDATED: ${JSON.stringify(diff)}`);
});

on.delete("kopfexamples", function delete_fn_1() {
  console.log("DELETED 1st");
});

on.delete("kopfexamples", function delete_fn_2() {
  console.log("DELETED 2nd");
});

on.field("kopfexamples", { field: "spec.field" }, function field_fn({ old, new: value }) {
  console.log(`FIELD CHANGED: ${old} -> ${value}`);
});
