/**
 * A write the API server refuses (RBAC) does not count as handled: one line names the missing
 * permission, the object stays due, and once the permission is granted the result lands —
 * without recreating the object or running the handler again.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import type { Resource } from "../core/structs/resources.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  kubeconfigWith,
  SERVICEACCOUNTS,
  STATUS_CRD,
  STATUS_EXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

const rbac = (plural: string): Resource => ({
  group: "rbac.authorization.k8s.io",
  version: "v1",
  plural,
  kind: plural === "roles" ? "Role" : "RoleBinding",
  singular: plural.slice(0, -1),
  namespaced: true,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
});

Deno.test(
  "write permissions: a refused status write names the missing permission, keeps the object due, and lands once granted",
  opts,
  async () => {
    using admin = await testClient();
    await applyCrds(admin, STATUS_CRD);
    const namespace = await testNamespace("perm");
    // An account that may watch and patch the objects, but not their status subresource.
    await admin.api.create(SERVICEACCOUNTS, { metadata: { name: "op" } }, { namespace });
    const role = (name: string, rules: unknown[]) =>
      admin.api.create(rbac("roles"), {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name },
        rules,
      }, { namespace });
    const bind = (name: string) =>
      admin.api.create(rbac("rolebindings"), {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
        subjects: [{ kind: "ServiceAccount", name: "op", namespace }],
      }, { namespace });
    await role("op", [
      {
        apiGroups: ["kopf.dev"],
        resources: ["kopfstatusexamples"],
        verbs: ["get", "list", "watch", "patch"],
      },
      { apiGroups: ["", "events.k8s.io"], resources: ["events"], verbs: ["create", "patch"] },
    ]);
    await bind("op");
    const { status: { token } } = await admin.http.json<{ status: { token: string } }>({
      method: "POST",
      path: `/api/v1/namespaces/${namespace}/serviceaccounts/op/token`,
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: { expirationSeconds: 600 },
      },
    });
    await using dir = await tempDir();
    const client = new KubeClient(
      await loadKubeconfig({ paths: [await kubeconfigWith(dir.path, { token })] }),
    );

    let calls = 0;
    const settings = createSettings({ posting: { aggregationWindow: 0.2 } });
    settings.queueing.errorDelays = [0.5];
    await using op = await startOperator((registry) => {
      on.create("kopfstatusexamples", { registry }, function create_fn() {
        calls++;
        return { message: "done" };
      });
    }, { namespaces: [namespace], settings, client });
    await op.ready;
    await admin.api.create(STATUS_EXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfStatusExample",
      metadata: { name: "one" },
      spec: {},
    }, { namespace });

    const refusal = await op.waitForLog(/Permission missing/);
    assert.match(
      refusal.message,
      new RegExp(
        `^Permission missing: patch on kopfstatusexamples/status \\(API group "kopf.dev"\\) ` +
          `in namespace "${namespace}" — the API server refused to write the status`,
      ),
    );
    assert.match(refusal.message, /The object stays due: retrying in 0\.5s\.$/);
    // Still refused for a while: logged once, the status is not written, nothing is "processed".
    await eventually(
      () =>
        op.logs.filter((e) => e.message.startsWith("Permission missing")).length >= 1 &&
        calls === 1,
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const before = await admin.api.get(STATUS_EXAMPLES, "one", { namespace });
    assert.equal(before.status, undefined);
    const errors = op.logs.filter((e) =>
      e.message.startsWith("Permission missing") && e.level === "error"
    );
    assert.equal(errors.length, 1, "the same refusal again is not logged at error level again");
    assert.equal(op.logs.filter((e) => /Unexpected error/.test(e.message)).length, 0);

    // Granted: the kept write lands, the handler is not run again.
    await role("op-status", [{
      apiGroups: ["kopf.dev"],
      resources: ["kopfstatusexamples/status"],
      verbs: ["patch"],
    }]);
    await bind("op-status");
    const status = await eventually(
      async () => (await admin.api.get(STATUS_EXAMPLES, "one", { namespace })).status,
      30_000,
      "the status written after the grant",
    );
    assert.deepEqual(status, { create_fn: { message: "done" } });
    assert.equal(calls, 1);
    await op.waitForLog(/The write refused earlier went through now\./);
  },
);
