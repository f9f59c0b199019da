/**
 * The soak's operator (`bench/soak.ts`): create, update and delete handlers for kopfexamples
 * that append every run to `$SOAK_RUNLOG` as `handler name value ms`, so that the harness can
 * account for each run (lost = a change without a run, duplicated = a second run of the same
 * change). `value` is `spec.value`: every change the harness makes sets a new one.
 *
 *   deno run -A cli.ts run bench/handlers/soak_ts.ts -n NAMESPACE --standalone
 * @module
 */
import { on } from "../../mod.ts";

const runlogPath = Deno.env.get("SOAK_RUNLOG");
if (!runlogPath) throw new Error("SOAK_RUNLOG is not set: where should the handler runs go?");
const runlog = Deno.openSync(runlogPath, { create: true, append: true, write: true });
const encoder = new TextEncoder();

function record(handler: string, name: string | undefined, value: unknown): void {
  runlog.writeSync(encoder.encode(`${handler} ${name} ${value} ${Date.now()}\n`));
}

on.create("kopfexamples", function create_fn({ name, spec }) {
  record("create", name, spec["value"]);
  return { value: spec["value"] ?? null };
});

on.update("kopfexamples", function update_fn({ name, spec }) {
  record("update", name, spec["value"]);
  return { value: spec["value"] ?? null };
});

on.delete("kopfexamples", function delete_fn({ name, spec }) {
  record("delete", name, spec["value"]);
});
