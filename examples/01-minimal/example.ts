/**
 * The smallest operator: one create handler that logs the spec and returns a message,
 * which lands in `status.create_fn`. Port of Kopf's example 01-minimal.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/01-minimal/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 */
import { on } from "../../mod.ts";

on.create("kopfexamples", function create_fn({ spec, logger }) {
  logger.info(`And here we are! Created with spec: ${JSON.stringify(spec)}`);
  return { message: "hello world" };
});
