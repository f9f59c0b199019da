/**
 * Posting Kubernetes Events explicitly. Port of Kopf's example 04-events. These are posted
 * whether or not log messages are (`settings.posting.loggers`, off by default as in Kopf 1.44+).
 *
 * On creation, `create_fn` posts four Events about the object: one of a custom type with
 * `event()`, a `Normal` one with `info()`, a `Warning` one with `warn()`, and an `Error` one
 * with `exception()` describing a caught error. See them with
 * `kubectl describe kopfexample kopf-example-1` a few seconds later (Events are posted in
 * batches).
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/04-events/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 */
import { event, exception, info, on, warn } from "../../mod.ts";

on.create("kopfexamples", function create_fn({ body }) {
  // The general form: any type, reason and message.
  event(body, { type: "SomeType", reason: "SomeReason", message: "Some message" });

  // Shortcuts for the usual types.
  info(body, { reason: "SomeReason", message: "Some message" });
  warn(body, { reason: "SomeReason", message: "Some message" });

  // An error, with its message appended to ours. Unlike Python, there is no "current
  // exception" to pick up implicitly: pass the caught error.
  try {
    throw new Error("Exception text.");
  } catch (error) {
    exception(body, { error, reason: "SomeReason", message: "Some exception:" });
  }
});
