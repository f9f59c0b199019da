import assert from "node:assert/strict";
import {
  type ClusterAccess,
  ControlPlane,
  createTestNamespace,
  deleteNamespace,
  sharedControlPlane,
} from "./control_plane.ts";

const LINUX = Deno.build.os === "linux";
const REPO = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

// ---------------------------------------------------------------------------------------------
// Helpers.

interface Auth {
  readonly token?: string;
  readonly cert?: { readonly certPem: string; readonly keyPem: string };
}

async function api(
  access: ClusterAccess,
  auth: Auth,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<{ status: number; json: Record<string, unknown> }> {
  const client = Deno.createHttpClient({
    caCerts: [access.caPem],
    ...(auth.cert ? { cert: auth.cert.certPem, key: auth.cert.keyPem } : {}),
  });
  try {
    const headers: Record<string, string> = { accept: "application/json" };
    if (auth.token) headers["authorization"] = `Bearer ${auth.token}`;
    if (body !== undefined) headers["content-type"] = contentType;
    const response = await fetch(`${access.server}${path}`, {
      method,
      client,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : {} };
  } finally {
    client.close();
  }
}

function metadata(object: Record<string, unknown>): Record<string, string> {
  return object["metadata"] as Record<string, string>;
}

/** Starts a watch from `resourceVersion` and returns the HTTP status or the first event. */
async function watchFrom(
  access: ClusterAccess,
  path: string,
  resourceVersion: string,
): Promise<{ status: number; event?: { type: string; object: Record<string, unknown> } }> {
  const client = Deno.createHttpClient({ caCerts: [access.caPem] });
  const aborter = new AbortController();
  const timer = setTimeout(() => aborter.abort(), 10_000);
  try {
    const response = await fetch(
      `${access.server}${path}?watch=1&resourceVersion=${resourceVersion}`,
      { client, headers: { authorization: `Bearer ${access.adminToken}` }, signal: aborter.signal },
    );
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      return { status: response.status };
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    try {
      while (!buffer.includes("\n")) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
    const line = buffer.split("\n")[0] ?? "";
    return { status: response.status, event: line ? JSON.parse(line) : undefined };
  } finally {
    clearTimeout(timer);
    client.close();
  }
}

/**
 * Creates a PodTemplate (uncached by default, so its watches are served from etcd), changes it
 * twice, compacts, and expects 410 Gone for a watch from its first version.
 */
async function assertCompactionExpiresWatches(
  access: ClusterAccess,
  compact: () => Promise<void>,
  namespace: string,
): Promise<void> {
  const auth = { token: access.adminToken };
  const base = `/api/v1/namespaces/${namespace}/podtemplates`;
  const created = await api(access, auth, "POST", base, {
    metadata: { name: "history" },
    template: { spec: { containers: [{ name: "main", image: "example.invalid/none" }] } },
  });
  assert.equal(created.status, 201, JSON.stringify(created.json));
  const oldVersion = metadata(created.json)["resourceVersion"] ?? "";
  for (const step of ["1", "2"]) {
    const patch = { metadata: { labels: { step } } };
    const type = "application/merge-patch+json";
    const patched = await api(access, auth, "PATCH", `${base}/history`, patch, type);
    assert.equal(patched.status, 200);
  }
  await compact();
  const result = await watchFrom(access, base, oldVersion);
  const gone = result.status === 410 ||
    (result.event?.type === "ERROR" && result.event.object["code"] === 410);
  assert.ok(gone, `expected 410 Gone, got ${JSON.stringify(result)}`);
}

/** Pids of processes whose command line mentions `text` (Linux). */
function pidsMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).includes(text)) {
        pids.push(Number(entry.name));
      }
    } catch { /* exited meanwhile */ }
  }
  return pids;
}

async function eventually(probe: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** Reads stdout of `child` up to the first line. */
async function firstLine(stream: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    while (!buffer.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return buffer.split("\n")[0] ?? "";
}

/** Starts a plane in another Deno process and returns that process and the plane's directory. */
async function planeInSubprocess(): Promise<{ child: Deno.ChildProcess; dir: string }> {
  const script = await Deno.makeTempFile({ prefix: "kopf-ts-orphan-", suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      script,
      [
        `import { ControlPlane } from ${
          JSON.stringify(import.meta.resolve("./control_plane.ts"))
        };`,
        "const plane = await ControlPlane.start({ controllerManager: false });",
        "console.log(JSON.stringify({ dir: plane.dir }));",
        "setInterval(() => {}, 1 << 30);",
      ].join("\n"),
    );
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-lock", `--config=${REPO}/deno.json`, script],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const line = await firstLine(child.stdout);
    if (!line) {
      await child.status;
      throw new Error("the subprocess did not start a control plane");
    }
    return { child, dir: JSON.parse(line).dir };
  } finally {
    await Deno.remove(script);
  }
}

// ---------------------------------------------------------------------------------------------
// Tests.

Deno.test("ControlPlane.start() explains how to get missing binaries", async () => {
  await assert.rejects(
    ControlPlane.start({ binDir: "/nonexistent/kopf-ts-bin" }),
    (error: Error) => {
      assert.match(error.message, /tools\/kube-binaries\.sh/);
      assert.match(error.message, /Go module proxy/);
      assert.match(error.message, /\/nonexistent\/kopf-ts-bin/);
      return true;
    },
  );
});

Deno.test("ControlPlane: a real control plane end to end", async (t) => {
  const started = Date.now();
  const plane = await ControlPlane.start();
  const startupMs = Date.now() - started;
  const token: Auth = { token: plane.adminToken };
  const cert: Auth = { cert: { certPem: plane.adminCertPem, keyPem: plane.adminKeyPem } };
  try {
    await t.step(`started in ${startupMs} ms, serves /version v1.36.3`, async () => {
      assert.match(plane.server, /^https:\/\/127\.0\.0\.1:\d+$/);
      assert.match(plane.etcdUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
      const version = await api(plane, token, "GET", "/version");
      assert.equal(version.status, 200);
      assert.equal(version.json["gitVersion"], "v1.36.3");
      const kubeconfig = await Deno.readTextFile(plane.kubeconfigPath);
      assert.match(kubeconfig, /current-context: kopf-ts-test\n/);
      assert.ok(kubeconfig.includes(`server: ${plane.server}\n`));
      assert.ok(kubeconfig.includes(`token: ${plane.adminToken}\n`));
    });

    const namespace = await createTestNamespace(plane, "Plane Test!");
    await t.step("creates a unique namespace", () => {
      assert.match(namespace, /^plane-test-[a-z0-9]{8}$/);
    });

    await t.step("serves ConfigMaps to the token and the client certificate", async () => {
      const base = `/api/v1/namespaces/${namespace}/configmaps`;
      for (const [name, auth] of [["by-token", token], ["by-cert", cert]] as const) {
        const created = await api(plane, auth, "POST", base, {
          metadata: { name },
          data: { who: name },
        });
        assert.equal(created.status, 201, JSON.stringify(created.json));
        const read = await api(plane, auth, "GET", `${base}/${name}`);
        assert.equal(read.status, 200);
        assert.deepEqual(read.json["data"], { who: name });
      }
      const anonymous = await api(plane, {}, "GET", base);
      assert.equal(anonymous.status, 403);
      const whoami = await api(
        plane,
        cert,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {
          apiVersion: "authentication.k8s.io/v1",
          kind: "SelfSubjectReview",
        },
      );
      const user = (whoami.json["status"] as Record<string, Record<string, unknown>>)["userInfo"];
      assert.equal(user?.["username"], "admin");
      assert.deepEqual(user?.["groups"], ["system:masters", "system:authenticated"]);
    });

    await t.step(
      "runs the controller manager: default ServiceAccount, namespace deletion",
      async () => {
        const saPath = `/api/v1/namespaces/${namespace}/serviceaccounts/default`;
        const deadline = Date.now() + 30_000;
        while ((await api(plane, token, "GET", saPath)).status !== 200) {
          assert.ok(Date.now() < deadline, "no default ServiceAccount in a new namespace");
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const doomed = await createTestNamespace(plane, "doomed");
        const created = await api(plane, token, "POST", `/api/v1/namespaces/${doomed}/configmaps`, {
          metadata: { name: "content" },
        });
        assert.equal(created.status, 201);
        await deleteNamespace(plane, doomed, { wait: true, timeoutMs: 60_000 });
        const gone = await api(plane, token, "GET", `/api/v1/namespaces/${doomed}`);
        assert.equal(gone.status, 404);
      },
    );

    await t.step("compact() makes watches from old resourceVersions 410 Gone", async () => {
      await assertCompactionExpiresWatches(plane, () => plane.compact(), namespace);
      await plane.compact(); // twice in a row is fine
    });

    await t.step("logs() has the component logs", () => {
      const logs = plane.logs(5);
      assert.match(logs, /----- etcd/);
      assert.match(logs, /----- kube-apiserver/);
      assert.match(logs, /----- kube-controller-manager/);
    });
  } finally {
    const dir = plane.dir;
    const before = LINUX ? pidsMentioning(dir) : [];
    await plane.stop();
    await plane.stop(); // idempotent
    if (LINUX) {
      assert.ok(before.length >= 4, `expected 3 components + watchdog, saw ${before.length}`);
      assert.deepEqual(pidsMentioning(dir), [], "processes survived stop()");
    }
    assert.equal(await exists(dir), false, "the working directory survived stop()");
    assert.match(plane.logs(), /kube-apiserver/, "logs() must still work after stop()");
  }
});

Deno.test({
  name: "ControlPlane: the watchdog stops a plane whose Deno process was SIGKILLed",
  ignore: !LINUX,
  async fn() {
    const { child, dir } = await planeInSubprocess();
    assert.ok(pidsMentioning(dir).length >= 3);
    child.kill("SIGKILL");
    await child.status;
    await eventually(() => pidsMentioning(dir).length === 0, 20_000, "the orphans to die");
    await eventually(() => !existsSync(dir), 10_000, "the working directory to be removed");
  },
});

Deno.test({
  name: "ControlPlane.start() reaps planes left behind by dead processes",
  ignore: !LINUX,
  async fn() {
    const { child, dir } = await planeInSubprocess();
    // Kill the owner and its watchdog hard, so that only the reaper can clean up.
    const watchdogs = pidsMentioning("kopf-ts-watchdog").filter((pid) =>
      Deno.readTextFileSync(`/proc/${pid}/cmdline`).includes(dir)
    );
    assert.equal(watchdogs.length, 1);
    child.kill("SIGKILL");
    for (const pid of watchdogs) Deno.kill(pid, "SIGKILL");
    await child.status;
    await eventually(
      () => pidsMentioning("kopf-ts-watchdog").every((p) => !watchdogs.includes(p)),
      5_000,
      "watchdog",
    );
    assert.ok(pidsMentioning(dir).length >= 2, "the orphaned etcd and kube-apiserver run");

    const plane = await ControlPlane.start({ controllerManager: false });
    await plane.stop();
    await eventually(() => pidsMentioning(dir).length === 0, 10_000, "the orphans to be reaped");
    assert.equal(existsSync(dir), false);
  },
});

Deno.test({
  name: "tools/control_plane.ts start: env file, kubeconfig, clean stop on SIGTERM",
  ignore: !LINUX,
  async fn() {
    const tmp = await Deno.makeTempDir({ prefix: "kopf-ts-cli-test-" });
    try {
      const envFile = `${tmp}/env`;
      const child = new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--no-lock",
          `--config=${REPO}/deno.json`,
          `${REPO}/tools/control_plane.ts`,
          "start",
          "--env-file",
          envFile,
          "--no-controller-manager",
        ],
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).spawn();
      const stderr = new Response(child.stderr).text();
      await eventually(() => existsSync(envFile), 120_000, "the env file");
      const env = Object.fromEntries(
        [...Deno.readTextFileSync(envFile).matchAll(/^export (\w+)='([^']*)'$/gm)].map((m) => [
          m[1],
          m[2],
        ]),
      );
      const kubeconfigPath = env["KOPF_TS_TEST_KUBECONFIG"] ?? "";
      assert.match(env["KOPF_TS_TEST_ETCD_URL"] ?? "", /^http:\/\/127\.0\.0\.1:\d+$/);
      const kubeconfig = Deno.readTextFileSync(kubeconfigPath);
      const server = kubeconfig.match(/server: (\S+)/)?.[1] ?? "";
      const caData = kubeconfig.match(/certificate-authority-data: (\S+)/)?.[1] ?? "";
      const token = kubeconfig.match(/token: (\S+)/)?.[1] ?? "";
      const access = { server, caPem: atob(caData), adminToken: token };
      const version = await api(access, { token }, "GET", "/version");
      assert.equal(version.json["gitVersion"], "v1.36.3");
      const dir = kubeconfigPath.replace(/\/kubeconfig$/, "");
      assert.ok(pidsMentioning(dir).length >= 2);

      child.kill("SIGTERM");
      const status = await child.status;
      const log = await stderr;
      assert.equal(status.code, 0, log);
      assert.match(log, /ready in/);
      assert.deepEqual(pidsMentioning(dir), []);
      assert.equal(existsSync(dir), false);
      assert.equal(existsSync(envFile), false, "the env file is removed on exit");
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
});

// The shared plane may be started lazily by this test (no $KOPF_TS_TEST_KUBECONFIG); then its
// processes and ops outlive the test by design.
Deno.test({
  name: "sharedControlPlane(): namespaces and compaction",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const plane = await sharedControlPlane();
    assert.equal(await sharedControlPlane(), plane, "one per process");
    assert.equal(plane.external, Boolean(Deno.env.get("KOPF_TS_TEST_KUBECONFIG")));
    const namespace = await createTestNamespace(plane, "shared");
    const read = await api(
      plane,
      { token: plane.adminToken },
      "GET",
      `/api/v1/namespaces/${namespace}`,
    );
    assert.equal(read.status, 200);
    const labels = (read.json["metadata"] as { labels?: Record<string, string> }).labels;
    assert.equal(labels?.["app.kubernetes.io/created-by"], "kopf-ts-testing");
    const cert = { certPem: plane.adminCertPem, keyPem: plane.adminKeyPem };
    const byCert = await api(plane, { cert }, "GET", `/api/v1/namespaces/${namespace}`);
    assert.equal(byCert.status, 200);
    if (plane.etcdUrl) {
      await assertCompactionExpiresWatches(plane, () => plane.compact(), namespace);
    }
    await deleteNamespace(plane, namespace);
    await deleteNamespace(plane, namespace); // already deleting/gone is fine
  },
});

function existsSync(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}
