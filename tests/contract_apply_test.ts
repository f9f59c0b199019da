/**
 * Contract tests of server-side apply, on the emulator and the real API server alike (the runner:
 * tests/_contract.ts): creation, merging, field ownership, conflicts as typed errors and `force`,
 * apply of the status subresource, and `kubectl apply --server-side` against either backend.
 */

import assert from "node:assert/strict";
import { APPLY_PATCH_CONTENT, ApplyConflictError, applyObject } from "../core/client/applying.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import {
  contract,
  crd,
  failure,
  GROUP,
  kubectl,
  kubectlCommand,
  stopEmulatorLast,
  WIDGETS,
} from "./_contract.ts";
import { applyCrdObjects, CONFIGMAPS, eventually, sleep, tempDir } from "./_support.ts";

contract(
  "server-side apply: creates, merges, owns fields, conflicts as typed errors, force takes over",
  async ({ backend, client, namespace }) => {
    const cm = (data: Record<string, string>): KubeObject => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "ssa", namespace },
      data,
    });
    await failure(
      applyObject(client.api, CONFIGMAPS, cm({ a: "1" }), { fieldManager: "" }).catch(
        (error) => {
          // Our client refuses before sending; check the server's answer with a raw request.
          assert.ok(error instanceof TypeError);
          return client.http.json({
            method: "PATCH",
            path: `/api/v1/namespaces/${namespace}/configmaps/ssa`,
            body: cm({ a: "1" }),
            contentType: APPLY_PATCH_CONTENT,
          });
        },
      ),
      422,
    );
    const created = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "2" }), {
      fieldManager: "first",
    });
    assert.deepEqual(created.data, { a: "1", b: "2" });
    // The same apply again changes nothing: no new resourceVersion.
    const again = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "2" }), {
      fieldManager: "first",
    });
    assert.equal(again.metadata?.resourceVersion, created.metadata?.resourceVersion);
    // Another manager may add its own field; stating the same value is no conflict.
    const shared = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", c: "3" }), {
      fieldManager: "second",
    });
    assert.deepEqual(shared.data, { a: "1", b: "2", c: "3" });
    // A different value for a field someone else owns is a typed conflict naming the field.
    const conflict = await applyObject(client.api, CONFIGMAPS, cm({ b: "X" }), {
      fieldManager: "second",
    }).then(() => undefined, (e) => e);
    assert.ok(conflict instanceof ApplyConflictError, String(conflict));
    assert.equal(conflict.code, 409);
    assert.deepEqual(conflict.conflicts.map((c) => c.field), [".data.b"]);
    // Force takes it over; the first manager then no longer owns it.
    const forced = await applyObject(client.api, CONFIGMAPS, cm({ a: "1", b: "X", c: "3" }), {
      fieldManager: "second",
      force: true,
    });
    assert.deepEqual(forced.data, { a: "1", b: "X", c: "3" });
    // A manager's fields it no longer states are removed, unless another manager owns them too.
    const dropped = await applyObject(client.api, CONFIGMAPS, cm({ c: "3" }), {
      fieldManager: "second",
    });
    assert.deepEqual(dropped.data, { a: "1", c: "3" }, "b went; a stays (also owned by first)");
    if (backend.name === "plane") {
      assert.ok(dropped.metadata?.managedFields, "kube-apiserver shows managedFields");
    } else {
      assert.equal(dropped.metadata?.managedFields, undefined, "the emulator does not show them");
    }
    // An ordinary write records a manager on kube-apiserver only: applying over it conflicts there.
    await client.api.patch(CONFIGMAPS, "ssa", { data: { c: "edited" } }, { namespace });
    const overEdit = await applyObject(client.api, CONFIGMAPS, cm({ c: "3" }), {
      fieldManager: "second",
    }).then((o) => o, (e) => e);
    if (backend.name === "plane") {
      assert.ok(overEdit instanceof ApplyConflictError, String(overEdit));
    } else assert.deepEqual((overEdit as KubeObject).data, { a: "1", c: "3" });
  },
);

contract(
  "server-side apply of the status subresource changes only the status",
  async ({ client, namespace }) => {
    await applyCrdObjects(client, [crd("cwidgets", "CWidget", true)]);
    const widget = (name: string, extra: object): KubeObject => ({
      apiVersion: `${GROUP}/v1`,
      kind: "CWidget",
      metadata: { name, namespace },
      ...extra,
    });
    await eventually(() =>
      client.api.create(WIDGETS, widget("ssa-status", { spec: { field: "x" } }), { namespace })
        .catch(() => undefined)
    );
    const applied = await applyObject(
      client.api,
      WIDGETS,
      widget("ssa-status", { spec: { field: "ignored" }, status: { phase: "Ready" } }),
      { fieldManager: "op", subresource: "status" },
    );
    assert.deepEqual(applied.status, { phase: "Ready" });
    assert.deepEqual(applied.spec, { field: "x" });
    await failure(
      applyObject(client.api, WIDGETS, widget("missing", { status: { phase: "Ready" } }), {
        fieldManager: "op",
        subresource: "status",
      }),
      404,
    );
  },
);

contract(
  "kubectl apply --server-side: creates, an unchanged apply keeps the resourceVersion, another manager conflicts until --force-conflicts, unstated fields go; custom resources too",
  async ({ namespace, kubeconfigPath }) => {
    if (!kubectl) {
      console.warn("SKIPPED: no /usr/bin/kubectl on this machine");
      return;
    }
    const { run: kubectlRun, ok } = kubectlCommand(kubeconfigPath, "-n", namespace);
    await using dir = await tempDir();
    const file = `${dir.path}/cm.json`;
    const state = async (data?: Record<string, string>) => {
      await Deno.writeTextFile(
        file,
        JSON.stringify({
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "ssa-kubectl", namespace },
          ...(data ? { data } : {}),
        }),
      );
      return file;
    };
    const field = (path: string) => ok("get", "cm", "ssa-kubectl", "-o", `jsonpath={${path}}`);
    assert.match(
      await ok("apply", "--server-side", "-f", await state({ a: "1", b: "2" })),
      /configmap\/ssa-kubectl serverside-applied/,
    );
    const version = await field(".metadata.resourceVersion");
    await ok("apply", "--server-side", "-f", file);
    assert.equal(await field(".metadata.resourceVersion"), version, "nothing changed");
    // Another manager stating another value for a field "kubectl" owns: a conflict, exit 1.
    const conflict = await kubectlRun(
      "apply",
      "--server-side",
      "--field-manager=other",
      "-f",
      await state({ a: "9" }),
    );
    assert.equal(conflict.code, 1, conflict.text);
    assert.match(
      conflict.text,
      /Apply failed with 1 conflict: conflict with "kubectl".*\.data\.a/,
    );
    assert.equal(await field(".data.a"), "1");
    await ok("apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", file);
    assert.equal(await field(".data"), JSON.stringify({ a: "9", b: "2" }));
    // "kubectl" states no data now: b (its own) goes, a (taken over by "other") stays.
    await ok("apply", "--server-side", "-f", await state());
    assert.equal(await field(".data"), JSON.stringify({ a: "9" }));

    await ok("apply", "-f", "crds/example.yaml");
    await sleep(1000); // kubectl's discovery cache may predate the CRD
    const kex = `${dir.path}/kex.json`;
    await Deno.writeTextFile(
      kex,
      JSON.stringify({
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "kx-ssa", namespace },
        spec: { duration: "2m" },
      }),
    );
    assert.match(
      await ok("apply", "--server-side", "-f", kex),
      /kopfexample.kopf.dev\/kx-ssa serverside-applied/,
    );
    assert.equal(await ok("get", "kex", "kx-ssa", "-o", "jsonpath={.spec.duration}"), "2m");
  },
);

stopEmulatorLast();
