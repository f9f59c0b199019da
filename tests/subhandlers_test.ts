/**
 * The forms of `execute()` on the real control plane: a list of functions, handler records, a
 * registry, and a lifecycle of its own (Kopf's `fns=`, `handlers=`, `registry=`, `lifecycle=`).
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { allAtOnce } from "../core/actions/lifecycles.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";
import { startOperator } from "./_operator.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

type Status = Record<string, unknown> | undefined;

function kex(name: string) {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: {} };
}

Deno.test(
  "execute() runs a registry's or handler records' matching handlers as sub-handlers, and only one source at a time (HK-SUB-05)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("subexec");
    const sub = new OperatorRegistry();
    on.create("kopfexamples", { registry: sub, id: "a" }, () => "from the registry");
    on.update("kopfexamples", { registry: sub, id: "b" }, () => "wrong reason");
    on.create(
      "kopfexamples",
      { registry: sub, id: "c", labels: { absent: "x" } },
      () => "filtered",
    );
    on.create("configmaps", { registry: sub, id: "d" }, () => "other resource");
    const other = new OperatorRegistry();
    on.create("kopfexamples", { registry: other, id: "custom" }, () => "from a record");
    on.resume("kopfexamples", { registry: other, id: "r" }, () => "wrong reason");
    const records = other.handlersFor(KOPFEXAMPLES).changing;
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, async function parent({ execute }) {
        let refused = "";
        try {
          await execute({ x: () => "never" }, { registry: sub });
        } catch (error) {
          refused = (error as Error).message;
        }
        await execute(undefined, { registry: sub });
        await execute(undefined, { handlers: records });
        return refused;
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("e1"), { namespace });
    const status = await eventually(
      async () => {
        const s = (await client.api.get(KOPFEXAMPLES, "e1", { namespace })).status as Status;
        return s?.parent !== undefined ? s : undefined;
      },
      15_000,
      "the parent to finish",
    );
    assert.equal(status.parent, "execute() takes only one of fns, handlers and registry");
    // As in Kopf, a registry's and handler records' ids are used as they are (no parent prefix).
    assert.equal(status.a, "from the registry");
    assert.equal(status.custom, "from a record");
    assert.equal(status["parent/a"], undefined);
    for (const id of ["b", "c", "d", "r", "x", "parent/x"]) {
      assert.equal(status[id], undefined, `${id} must not run`);
    }
  },
);

Deno.test(
  "execute() takes a list of functions and a lifecycle of its own (HK-SUB-05)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("sublife");
    const calls = { together: 0, apart: 0 };
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry }, async function together({ execute }) {
        calls.together++;
        await execute([function one() {
          return 1;
        }, function two() {
          return 2;
        }], { lifecycle: allAtOnce });
      });
      on.create("kopfexamples", { registry }, async function apart({ execute }) {
        calls.apart++;
        await execute([function three() {
          return 3;
        }, function four() {
          return 4;
        }]);
      });
    }, { namespaces: [namespace] });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("e2"), { namespace });
    await op.waitForLog(/Creation is processed: 2 succeeded; 0 failed/);
    assert.equal(calls.together, 1, "both sub-handlers ran in the parent's first call");
    assert.equal(calls.apart, 2, "the default lifecycle: one sub-handler per cycle");
    const logs = op.logs.map((entry) => entry.message);
    for (const id of ["together/one", "together/two", "apart/three", "apart/four"]) {
      assert.ok(logs.includes(`Handler '${id}' succeeded.`), id);
    }
  },
);
