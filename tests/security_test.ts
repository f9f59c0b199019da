/**
 * Secrets stay secret (issue 11): `kopf run --debug` logs in through a login handler (a 401 and a
 * re-login), through a kubeconfig's exec plugin (a 401 and a re-run of the plugin) and with a
 * client certificate, starts a TLS webhook server with a generated key, handles objects and
 * posts Events; no token, private key or plugin output appears in any output line or Event.
 * Files with secrets are private (`--embedded`'s kubeconfig), the emulator accepts only its
 * token, and the webhook server answers malformed admission requests with 400, never allowing.
 */

import assert from "node:assert/strict";
import { WEBHOOK_CONFIGURATIONS } from "../core/engines/admission/admission_configs.ts";
import { EVENTS_RESOURCE } from "../core/client/events.ts";
import type { KubeClient } from "../core/client/client.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  kubeconfigWith,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A random secret-looking string, unique to the test. */
function secret(prefix: string): string {
  return `${prefix}-${crypto.randomUUID().replaceAll("-", "")}`;
}

/** Markers of private keys, as PEM and as base64 of PEM (as in kubeconfigs and caBundles). */
const KEY_MARKERS = [
  "PRIVATE KEY",
  btoa("-----BEGIN PRIVATE KEY").slice(0, 28),
  btoa("-----BEGIN EC PRIVATE KEY").slice(0, 28),
  btoa("-----BEGIN RSA PRIVATE KEY").slice(0, 28),
];

/** The secrets (and key markers) found in the lines, with where. */
function leaks(lines: readonly string[], secrets: readonly string[]): string[] {
  const found: string[] = [];
  for (const [i, line] of lines.entries()) {
    for (const s of [...secrets, ...KEY_MARKERS]) {
      if (line.includes(s)) found.push(`line ${i + 1} contains ${s.slice(0, 12)}…: ${line}`);
    }
  }
  return found;
}

/** The messages of all Events in the namespace. */
async function eventMessages(client: KubeClient, namespace: string): Promise<string[]> {
  const list = await client.api.list(EVENTS_RESOURCE, { namespace });
  return list.items.map((e) => `${e.reason}: ${e.message}`);
}

/** Creates a kopfexample and waits until the operator's create handler logged it. */
async function handled(
  client: KubeClient,
  namespace: string,
  name: string,
  lines: readonly string[],
  labels: Record<string, string> = {},
): Promise<void> {
  await client.api.create(KOPFEXAMPLES, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name, labels },
    spec: { field: "value" },
  }, { namespace });
  await eventually(
    () => lines.some((l) => l.includes(`Created ${name}.`)),
    30_000,
    `the create handler for ${name}`,
  );
}

Deno.test(
  "kopf run --debug: a login handler's tokens (401, re-login), the webhook's generated key and the admission traffic never reach the output or Events; malformed admission requests get 400 (X-REL-09, X-REL-11)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("sec-login");
    const managed = `${secret("sec").slice(0, 16)}.kopf.dev`;
    const mark = secret("m").slice(0, 20);
    const bad = secret("bad-token");
    await using dir = await tempDir();
    try {
      await Deno.writeTextFile(`${dir.path}/ca.pem`, plane.caPem);
      await using op = await spawnOperator(
        ["tests/fixtures/secret_handlers.ts", "-n", namespace, "--standalone", "--debug"],
        {
          SEC_LOGIN: "handler",
          SEC_SERVER: plane.server,
          SEC_CA: `${dir.path}/ca.pem`,
          SEC_BAD_TOKEN: bad,
          SEC_GOOD_TOKEN: plane.adminToken,
          SEC_MANAGED: managed,
          SEC_MARK: mark,
        },
      );
      await op.waitForLine(/Re-authentication has finished/);
      // The webhook configuration is in place; the API server calls the webhook (over TLS).
      const config = await eventually(
        async () => {
          const c = await client.api.get(WEBHOOK_CONFIGURATIONS.validating, managed).catch(() =>
            undefined
          ) as
            | { webhooks?: Array<{ clientConfig: { url: string; caBundle: string } }> }
            | undefined;
          return c?.webhooks?.length ? c.webhooks[0]!.clientConfig : undefined;
        },
        30_000,
        "the validating webhook configuration",
      );
      assert.match(config.url, /^https:\/\//, "TLS unless insecure is asked for");
      let n = 0;
      await eventually(
        async () => {
          await handled(client, namespace, `sec-${n++}`, op.lines, { "sec-test": mark });
          return op.lines.some((l) => l.includes("Admission checked."));
        },
        60_000,
        "the API server to call the webhook",
      );

      // Malformed admission requests: 400, with a message, and never an allowing review.
      const http = Deno.createHttpClient({ caCerts: [atob(config.caBundle)] });
      try {
        for (
          const body of [
            "not json",
            "null",
            "[]",
            "{}",
            JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }),
            JSON.stringify({ kind: "AdmissionReview", request: { uid: "u-1" } }),
          ]
        ) {
          const response = await fetch(config.url, {
            method: "POST",
            body,
            headers: { "content-type": "application/json" },
            client: http,
          });
          const text = await response.text();
          assert.equal(response.status, 400, `${body} → ${response.status} ${text}`);
          assert.doesNotMatch(text, /"allowed"\s*:\s*true/);
          assert.ok(text.trim().length > 0, "the 400 says why");
        }
      } finally {
        http.close();
      }

      const events = await eventually(
        async () => {
          const found = await eventMessages(client, namespace);
          return found.some((m) => /succeeded/.test(m)) ? found : undefined;
        },
        30_000,
        `Events of the handler runs; output:\n${op.lines.slice(-40).join("\n")}`,
      );
      assert.equal(await op.stop(), 0);
      // The scanned output covers what it should: the 401, the re-login, the webhook start.
      assert.ok(op.lines.some((l) => /→ 401/.test(l)), "the 401 is in the debug output");
      assert.ok(op.lines.some((l) => /webhook/i.test(l)), "the webhook start is in the output");
      assert.deepEqual(leaks([...op.lines, ...events], [bad, plane.adminToken]), []);
    } finally {
      await client.api.delete(WEBHOOK_CONFIGURATIONS.validating, managed).catch(() => {});
      await client.api.delete(WEBHOOK_CONFIGURATIONS.mutating, managed).catch(() => {});
    }
  },
);

Deno.test(
  "kopf run --debug: an exec plugin's output (a rejected token, then the good one) and a client certificate's key never reach the output or Events (X-REL-09)",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("sec-exec");
    const bad = secret("bad-token");
    await using dir = await tempDir();
    // The plugin's first credential is rejected (401), then it is run again for the good one.
    const plugin = `${dir.path}/plugin.sh`;
    await Deno.writeTextFile(
      plugin,
      `#!/usr/bin/env bash
n=$(( $(cat "${dir.path}/count" 2>/dev/null || echo 0) + 1 )); echo $n > "${dir.path}/count"
token="${plane.adminToken}"; [ "$n" -le 1 ] && token="${bad}"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$token"
`,
    );
    await Deno.chmod(plugin, 0o700);
    const viaPlugin = await kubeconfigWith(dir.path, {
      exec: {
        apiVersion: "client.authentication.k8s.io/v1",
        command: plugin,
        interactiveMode: "Never",
      },
    });
    {
      await using op = await spawnOperator(
        ["tests/fixtures/secret_handlers.ts", "-n", namespace, "--standalone", "--debug"],
        { KUBECONFIG: viaPlugin },
      );
      await eventually(() => Deno.readTextFile(`${dir.path}/count`).catch(() => ""), 30_000);
      await handled(client, namespace, "via-plugin", op.lines);
      assert.equal(await op.stop(), 0);
      assert.equal((await Deno.readTextFile(`${dir.path}/count`)).trim(), "2", "a 401, one re-run");
      assert.deepEqual(leaks(op.lines, [bad, plane.adminToken]), []);
    }

    // A client certificate and key, inline in the kubeconfig.
    await Deno.remove(`${dir.path}/kubeconfig`);
    const viaCert = await kubeconfigWith(dir.path, {
      "client-certificate-data": btoa(plane.adminCertPem),
      "client-key-data": btoa(plane.adminKeyPem),
    });
    const keyBody = plane.adminKeyPem.split("\n").filter((l) => l && !l.startsWith("-----"));
    await using op = await spawnOperator(
      ["tests/fixtures/secret_handlers.ts", "-n", namespace, "--standalone", "--debug"],
      { KUBECONFIG: viaCert },
    );
    await handled(client, namespace, "via-cert", op.lines);
    const events = await eventually(
      async () => {
        const found = await eventMessages(client, namespace);
        return found.some((m) => /succeeded/.test(m)) ? found : undefined;
      },
      30_000,
      `Events of the handler runs; output:\n${op.lines.slice(-40).join("\n")}`,
    );
    assert.equal(await op.stop(), 0);
    assert.deepEqual(
      leaks([...op.lines, ...events], [
        bad,
        plane.adminToken,
        btoa(plane.adminKeyPem).slice(0, 40),
        ...keyBody,
      ]),
      [],
    );
  },
);

Deno.test(
  "kopf run --embedded writes its kubeconfig 0600 in a 0700 directory, and the emulator accepts only its token (X-REL-10)",
  opts,
  async () => {
    await using op = await spawnOperator(["--embedded", "examples/01-minimal/example.ts"]);
    const line = await op.waitForLine(/export KUBECONFIG=/);
    const path = line.split("export KUBECONFIG=")[1]!.trim();
    const dir = path.slice(0, path.lastIndexOf("/"));
    assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600, path);
    assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700, dir);
    const text = await Deno.readTextFile(path);
    const server = /server: (\S+)/.exec(text)![1]!;
    const token = /token: (\S+)/.exec(text)![1]!;
    const ca = /certificate-authority-data: (\S+)/.exec(text)?.[1];
    const http = Deno.createHttpClient(ca ? { caCerts: [atob(ca)] } : {});
    try {
      const get = async (authorization?: string) => {
        const response = await fetch(`${server}/api/v1/namespaces`, {
          client: http,
          headers: authorization ? { authorization } : {},
        });
        await response.body?.cancel();
        return response.status;
      };
      assert.equal(await get(), 401, "no token");
      assert.equal(await get(`Bearer ${secret("wrong")}`), 401, "a wrong token");
      assert.equal(await get(`Bearer ${token}`), 200, "its token");
    } finally {
      http.close();
    }
    assert.equal(await op.stop(), 0, op.lines.join("\n"));
  },
);
