/**
 * Raw watch-event handlers: called for every event of every object (no finalizers, no state,
 * no retries). Port of Kopf's example 08-events.
 *
 * `event_fn_with_error` always fails: the error is logged with its stack trace and ignored, and
 * the other handler runs regardless. `normal_event_fn` prints each event it receives: `ADDED`,
 * `MODIFIED` and `DELETED` from the watch, or type `null` for objects found by the initial
 * listing. Messages of event handlers are only logged, never posted as Kubernetes Events.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/08-events/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 */
import { on } from "../../mod.ts";

on.event("kopfexamples", function event_fn_with_error() {
  throw new Error("Oops!");
});

on.event("kopfexamples", function normal_event_fn({ event }) {
  console.log(`Event received: ${JSON.stringify(event)}`);
});
