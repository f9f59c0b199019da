/**
 * An operator and its tests, side by side (port of Kopf's example 09-testing). The handlers are
 * ordinary; `example_test.ts` runs them with `KopfRunner` inside the test process, against the
 * real control plane from `testing/` (and against the in-memory emulator where available).
 *
 *   tools/deno.sh test -A examples/09-testing/example_test.ts
 */
import { on } from "../../mod.ts";

on.create("kopfexamples", function create_fn({ logger, spec }) {
  logger.info(`Object created with spec: ${JSON.stringify(spec)}`);
  return { message: "created" };
});

on.update("kopfexamples", function update_fn({ logger, diff }) {
  logger.info(`Object updated: ${JSON.stringify(diff)}`);
});

on.delete("kopfexamples", function delete_fn({ logger }) {
  logger.info("Object deleted, cleaning up.");
});
