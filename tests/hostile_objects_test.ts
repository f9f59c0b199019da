/**
 * Hostile objects from the watch: the API server stores custom objects nested thousands of
 * levels deep (a field with `x-kubernetes-preserve-unknown-fields`), deeper than the framework's
 * recursive copies and diffs can go. Such an object is refused at the door
 * (`settings.watching.maxDepth`) with one error line and an Event naming it and the limit; every
 * other object is handled as usual, and the refused one is handled once it is changed to fit.
 */

import assert from "node:assert/strict";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import { on } from "../core/api/on.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { startOperator } from "./_operator.ts";
import { applyCrds, eventually, kex, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** `{a: {a: … {leaf: true}}}`, `depth` levels deep. */
function nested(depth: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: true };
  for (let level = 1; level < depth; level++) value = { a: value };
  return value;
}

Deno.test(
  "objects nested 6,000 levels deep are refused with one error line and an Event; the rest is handled",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("deep");
    // One before the operator starts (it comes with the listing), one after (with the watch).
    const listed = await client.api.create(
      KOPFEXAMPLES,
      kex("deep-listed", { x: nested(6000) }),
      { namespace },
    );
    await client.api.create(KOPFEXAMPLES, kex("normal", { size: 1 }), { namespace });
    const seen: string[] = [];
    await using operator = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, ({ name }) => {
        seen.push(`create ${name}`);
      });
      on.update("kopfexamples", { registry }, ({ name }) => {
        seen.push(`update ${name}`);
      });
      on.event("kopfexamples", { registry }, ({ type, name, spec }) => {
        if (type === "DELETED") seen.push(`deleted ${name} ${JSON.stringify(spec)}`);
      });
    }, { namespaces: [namespace] });
    await operator.ready;
    await client.api.create(KOPFEXAMPLES, kex("deep-watched", { x: nested(6000) }), {
      namespace,
    });
    // Changed, still too deep: refused again (unchecked, the diff overflows the stack).
    await client.api.patch(KOPFEXAMPLES, "deep-watched", { spec: { x: nested(5999) } }, {
      namespace,
    });
    await eventually(() => seen.includes("create normal"), 30_000, "the normal object's creation");
    await client.api.patch(KOPFEXAMPLES, "normal", { spec: { size: 2 } }, { namespace });
    await eventually(() => seen.includes("update normal"), 30_000, "the normal object's update");
    const refusals = (name: string) =>
      operator.logs.filter((e) =>
        e.level === "error" && e.object?.name === name && e.message.startsWith("Refused")
      );
    await eventually(() => refusals("deep-watched").length >= 2, 30_000, "the watched refusals");
    for (const [name, versions] of [["deep-listed", 1], ["deep-watched", 2]] as const) {
      const lines = refusals(name);
      assert.equal(lines.length, versions, lines.map((e) => e.message).join("; "));
      assert.equal(
        lines[0]!.message,
        `Refused KopfExample "${namespace}/${name}" nested deeper than 1000 levels ` +
          "(settings.watching.maxDepth); no handler runs for it until it is changed to fit or " +
          "deleted.",
      );
    }
    assert.ok(!seen.some((s) => s.includes(" deep")), `handled: ${seen.join(", ")}`);
    const failures = operator.logs.filter((e) => e.message.includes("Unexpected error"));
    assert.deepEqual(failures.map((e) => e.message), []);
    // The refusal is an Event of the object, as `kubectl describe` shows it.
    await eventually(
      async () => {
        const { items } = await client.api.list(EVENTS_RESOURCE, {
          namespace,
          fieldSelector: `involvedObject.uid=${listed.metadata!.uid}`,
        });
        return items.some((item) => {
          const event = item as KubeObject;
          return event.type === "Warning" && event.reason === "ObjectTooDeep" &&
            String(event.message).includes("nested deeper than 1000 levels");
        });
      },
      30_000,
      "the refusal's Event",
    );
    // Changed to fit, the object is handled as if just created (it never was).
    await client.api.patch(KOPFEXAMPLES, "deep-listed", { spec: { x: null } }, { namespace });
    await eventually(() => seen.includes("create deep-listed"), 30_000, "the fixed object");
    // The deletion of a refused object reaches the operator, with its metadata only.
    await client.api.delete(KOPFEXAMPLES, "deep-watched", { namespace });
    await eventually(() => seen.includes("deleted deep-watched {}"), 30_000, "the deletion");
    assert.deepEqual(
      operator.logs.filter((e) => e.message.includes("Unexpected error")).map((e) => e.message),
      [],
    );
  },
);
