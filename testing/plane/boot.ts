/**
 * The control plane's start-up sequence, one component at a time: etcd, kube-apiserver and
 * kube-controller-manager, each on free ports (retried on a port clash) and waited for until it
 * serves. Used by `../control_plane.ts`, which owns the resulting state.
 * @module
 */

import type { ControlPlaneOptions } from "../control_plane.ts";
import { apiServerArgs, controllerManagerArgs, etcdArgs } from "./args.ts";
import { spawnComponent, startWithFreePorts } from "./components.ts";
import { controllerManagerKubeconfig, type Credentials } from "./pki.ts";
import { type Component, type ComponentName, removeQuietly, waitUntil } from "./processes.ts";

/** What every start-up step needs: where things are, the plane's options and processes. */
export interface BootContext {
  /** The plane's working directory. */
  readonly dir: string;
  /** The run's registry directory (`children.pids` for the watchdog and the reaper). */
  readonly runDir: string;
  /** Directory with the binaries. */
  readonly binDir: string;
  /** Whether kube-controller-manager runs. */
  readonly withKcm: boolean;
  /** The plane's options (`signal` aborts the waits). */
  readonly options: ControlPlaneOptions;
  /** The plane's components; every spawned process is appended. */
  readonly components: Component[];
  /** The plane's credentials, already written under `<dir>/pki`. */
  readonly credentials: Credentials;
}

/** A kube-apiserver that serves, and how to start it again after it was killed. */
export interface ApiServerStart {
  /** Its URL, `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** Starts it again with the same flags on the same port; resolves when it is ready. */
  readonly start: (deadline: number) => Promise<void>;
}

/**
 * Starts etcd with a fresh data directory and waits for `/health`.
 *
 * @param ctx The start-up context.
 * @param deadline When to give up (epoch ms).
 * @returns etcd's client URL.
 */
export async function startEtcd(ctx: BootContext, deadline: number): Promise<string> {
  const { dir, binDir, options } = ctx;
  let etcdUrl = "";
  await startWithFreePorts(ctx.components, "etcd", 2, deadline, async ([client, peer]) => {
    etcdUrl = `http://127.0.0.1:${client}`;
    const peerUrl = `http://127.0.0.1:${peer}`;
    await removeQuietly(`${dir}/etcd`); // a fresh data dir, also after a port clash
    const etcd = await spawn(ctx, "etcd", `${binDir}/etcd`, etcdArgs(dir, etcdUrl, peerUrl));
    await waitUntil("etcd /health", deadline, options.signal, [etcd], () => etcdHealthy(etcdUrl));
  });
  return etcdUrl;
}

/**
 * Starts kube-apiserver on etcd and waits until `/readyz` says `ok`.
 *
 * @param ctx The start-up context.
 * @param etcdUrl etcd's client URL.
 * @param deadline When to give up (epoch ms).
 * @returns Its URL, and how to start it again (for `restartApiServer()`).
 */
export async function startApiServer(
  ctx: BootContext,
  etcdUrl: string,
  deadline: number,
): Promise<ApiServerStart> {
  const { dir, binDir, withKcm, options } = ctx;
  // The last attempt's port and flags, which a restart reuses.
  let server = "";
  let args: string[] = [];
  const start = async (until: number): Promise<void> => {
    await spawn(ctx, "kube-apiserver", `${binDir}/kube-apiserver`, args);
    await waitForApiServer(ctx, server, until);
  };
  await startWithFreePorts(ctx.components, "kube-apiserver", 1, deadline, async ([port]) => {
    server = `https://127.0.0.1:${port}`;
    // `port!`: freePorts(1) returns exactly one port.
    args = apiServerArgs({ dir, port: port!, server, etcdUrl, withKcm, options });
    await start(deadline);
  });
  return { server, start };
}

/**
 * Starts kube-controller-manager (as the admin, through `<dir>/kcm.kubeconfig`) and waits for
 * the `default` ServiceAccount, which shows that its ServiceAccount controller is up.
 *
 * @param ctx The start-up context.
 * @param server The API server URL.
 * @param deadline When to give up (epoch ms).
 */
export async function startControllerManager(
  ctx: BootContext,
  server: string,
  deadline: number,
): Promise<void> {
  const { dir, binDir, options, credentials } = ctx;
  const http = Deno.createHttpClient({ caCerts: [credentials.caPem] });
  try {
    await Deno.writeTextFile(`${dir}/kcm.kubeconfig`, controllerManagerKubeconfig(server, dir), {
      mode: 0o600,
    });
    await spawn(
      ctx,
      "kube-controller-manager",
      `${binDir}/kube-controller-manager`,
      controllerManagerArgs(dir, options),
    );
    await waitUntil(
      "the default ServiceAccount",
      deadline,
      options.signal,
      ctx.components,
      () => defaultServiceAccountExists(http, server, credentials.adminToken),
    );
  } finally {
    http.close();
  }
}

function spawn(
  ctx: BootContext,
  name: ComponentName,
  binary: string,
  args: string[],
): Promise<Component> {
  return spawnComponent(ctx.components, ctx.dir, ctx.runDir, name, binary, args);
}

async function waitForApiServer(
  ctx: BootContext,
  server: string,
  deadline: number,
): Promise<void> {
  const { caPem, adminToken } = ctx.credentials;
  const http = Deno.createHttpClient({ caCerts: [caPem] });
  try {
    await waitUntil(
      "kube-apiserver /readyz",
      deadline,
      ctx.options.signal,
      // Those running now; after a restart, not the killed instance.
      ctx.components.filter((c) => !c.status),
      () => apiServerReady(http, server, adminToken),
    );
  } finally {
    http.close();
  }
}

// Readiness probes, for `waitUntil()`: one attempt each, bounded by its own timeout.

async function etcdHealthy(etcdUrl: string): Promise<boolean> {
  const response = await fetch(`${etcdUrl}/health`, {
    signal: AbortSignal.timeout(2_000),
  });
  const body = await response.text();
  return response.ok && body.includes('"true"');
}

async function apiServerReady(
  http: Deno.HttpClient,
  server: string,
  token: string,
): Promise<boolean> {
  const response = await fetch(`${server}/readyz`, {
    client: http,
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(5_000),
  });
  return response.ok && (await response.text()).trim() === "ok";
}

async function defaultServiceAccountExists(
  http: Deno.HttpClient,
  server: string,
  token: string,
): Promise<boolean> {
  const response = await fetch(`${server}/api/v1/namespaces/default/serviceaccounts/default`, {
    client: http,
    headers: { authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(5_000),
  });
  await response.body?.cancel();
  return response.ok;
}
