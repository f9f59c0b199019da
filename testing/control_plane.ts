/**
 * A real Kubernetes control plane for tests — etcd, kube-apiserver and (optionally)
 * kube-controller-manager as local processes on 127.0.0.1, like controller-runtime's envtest.
 *
 * The binaries are built from source once per machine by `tools/kube-binaries.sh` (needs Go and
 * the Go module proxy) into a version-keyed cache; {@link ControlPlane.start} finds them there
 * (or in `$KOPF_TS_KUBE_BIN`), generates throw-away credentials, starts the processes on free
 * ports, waits until they are ready and writes a kubeconfig. Everything lives in a fresh
 * directory (on `/dev/shm` when available) that is removed again on {@link ControlPlane.stop}.
 *
 * Teardown is thorough: `stop()`/`await using`, SIGINT/SIGTERM of the Deno process and its
 * `unload` all stop the child processes; a tiny watchdog process (Linux) kills them if the
 * Deno process dies hard; and every `start()` reaps what dead test processes left behind.
 *
 * Test suites usually share one plane: {@link sharedControlPlane} takes an externally started
 * one from `$KOPF_TS_TEST_KUBECONFIG` (see `tools/control_plane.ts`) or starts one lazily.
 *
 * @example
 * ```ts
 * import { ControlPlane, createTestNamespace } from "./control_plane.ts";
 *
 * await using plane = await ControlPlane.start();
 * const namespace = await createTestNamespace(plane, "demo");
 * // Point the operator (or any client) at plane.kubeconfigPath, or use plane.server,
 * // plane.caPem and plane.adminToken directly.
 * ```
 * @module
 */

import {
  checkBinaries,
  type Component,
  defaultBinDir,
  exitsWithin,
  killWatchdog,
  makeWorkDir,
  MARKER,
  reapOrphanedRuns,
  registerRun,
  removeQuietly,
  sleep,
  spawnWatchdog,
  trySignal,
} from "./plane/processes.ts";
import {
  type BootContext,
  startApiServer,
  startControllerManager,
  startEtcd,
} from "./plane/boot.ts";
import { componentLogs, stopComponents } from "./plane/components.ts";
import { register, unregister } from "./plane/exit_hooks.ts";
import { compactEtcd } from "./plane/etcd.ts";
import { adminKubeconfig, type Credentials, writePki } from "./plane/pki.ts";
import { ExternalControlPlane } from "./plane/external.ts";

export { compactEtcd } from "./plane/etcd.ts";
export {
  createTestNamespace,
  deleteNamespace,
  type DeleteNamespaceOptions,
} from "./plane/namespaces.ts";

/**
 * Options of {@link ControlPlane.start}.
 *
 * @example
 * ```ts
 * import { ControlPlane, type ControlPlaneOptions } from "./control_plane.ts";
 *
 * const options: ControlPlaneOptions = { controllerManager: false, startTimeoutMs: 60_000 };
 * await using plane = await ControlPlane.start(options);
 * ```
 */
export interface ControlPlaneOptions {
  /**
   * Directory with the `etcd`, `kube-apiserver` and `kube-controller-manager` binaries.
   * Default: `$KOPF_TS_KUBE_BIN`, else the cache directory of `tools/kube-binaries.sh`
   * (`${KOPF_TS_CACHE:-~/.cache/kopf-ts}/kube/<k8s>-etcd-<etcd>/bin`).
   */
  binDir?: string;
  /**
   * Also run kube-controller-manager (garbage collection, namespace deletion, default
   * ServiceAccounts, Deployments → ReplicaSets, …). `start()` then also waits for the `default`
   * ServiceAccount. Default: `true`. Without it, the ServiceAccount admission plugin is disabled
   * (Pods would be rejected for lack of a ServiceAccount) and namespaces stay `Terminating`.
   */
  controllerManager?: boolean;
  /** kube-controller-manager's `--controllers`. Default: `["*"]` (all on-by-default ones). */
  controllers?: readonly string[];
  /**
   * The apiserver's watch cache (`--watch-cache`). Default: `true`, as in real clusters: watches
   * of cached resources are served from the apiserver's memory (with periodic BOOKMARK events)
   * and are immune to {@link ControlPlane.compact}. `false` serves every watch from etcd.
   */
  watchCache?: boolean;
  /**
   * Resources (`plural[.group]`, e.g. `"podtemplates"`, `"kopfexamples.kopf.dev"`, also for
   * CRDs created later) that bypass the watch cache, so that their watches are served from
   * etcd: after {@link ControlPlane.compact}, a watch from an older resourceVersion of them
   * gets `410 Gone`. Such watches get no periodic BOOKMARKs. Default: `["podtemplates"]`.
   */
  uncachedResources?: readonly string[];
  /**
   * kube-apiserver feature gates, merged over ours: `ShardedListAndWatch` is on by default
   * (Kubernetes 1.36 alpha: `shardSelector` on lists and watches; requests without the
   * parameter are served exactly as without the gate). `{ ShardedListAndWatch: false }` turns
   * it off, e.g. to test a client's fallback.
   */
  featureGates?: Readonly<Record<string, boolean>>;
  /** Extra kube-apiserver flags, appended last (so they override ours), e.g. `--v=4`. */
  apiServerArgs?: readonly string[];
  /** Extra kube-controller-manager flags, appended last. */
  controllerManagerArgs?: readonly string[];
  /**
   * Parent directory for the plane's fresh working directory (certificates, kubeconfig, etcd
   * data, logs). Default: `/dev/shm` when it exists (etcd on tmpfs is much faster), else the
   * system temp directory. The working directory is removed on stop unless `keepDir` is set.
   */
  dir?: string;
  /** Keep the working directory (logs, etcd data) after stopping. Default: `false`. */
  keepDir?: boolean;
  /** How long `start()` may take in total before it gives up. Default: 120 000 ms. */
  startTimeoutMs?: number;
  /** How long each process gets to exit after SIGTERM before SIGKILL. Default: 5 000 ms. */
  stopGraceMs?: number;
  /** Aborts a start in progress (everything started so far is torn down). */
  signal?: AbortSignal;
  /**
   * Stop the plane on SIGINT/SIGTERM and then exit the process with 128+signal, as the default
   * signal disposition would have done. Default: `true`. Set `false` when the program handles
   * these signals itself (and calls `stop()` there).
   */
  handleSignals?: boolean;
}

/**
 * What tests need to reach a control plane as an administrator.
 *
 * @example
 * ```ts
 * import type { ClusterAccess } from "./control_plane.ts";
 *
 * async function listNamespaces(access: ClusterAccess): Promise<unknown> {
 *   const client = Deno.createHttpClient({ caCerts: [access.caPem] });
 *   try {
 *     const response = await fetch(`${access.server}/api/v1/namespaces`, {
 *       client,
 *       headers: { authorization: `Bearer ${access.adminToken}` },
 *     });
 *     return await response.json();
 *   } finally {
 *     client.close();
 *   }
 * }
 * ```
 */
export interface ClusterAccess {
  /** The API server URL, e.g. `https://127.0.0.1:41234`. */
  readonly server: string;
  /** PEM of the CA that signed the API server's serving certificate. */
  readonly caPem: string;
  /** A bearer token of a `system:masters` user. */
  readonly adminToken: string;
}

/**
 * A control plane shared by a whole test run: either one started by this process or an
 * external one (`$KOPF_TS_TEST_KUBECONFIG`). See {@link sharedControlPlane}.
 *
 * @example
 * ```ts
 * import { sharedControlPlane } from "./control_plane.ts";
 *
 * const plane = await sharedControlPlane();
 * console.log(plane.kubeconfigPath, plane.external);
 * ```
 */
export interface SharedControlPlane extends ClusterAccess {
  /** A kubeconfig whose current context is a `system:masters` user. */
  readonly kubeconfigPath: string;
  /**
   * PEM client certificate of a `system:masters` user. For an external plane it comes from the
   * kubeconfig (user `<user>-cert`, as written by {@link ControlPlane}, or the current user);
   * reading it throws if the kubeconfig has none.
   */
  readonly adminCertPem: string;
  /** PEM PKCS#8 key of {@link adminCertPem}; throws likewise if unknown. */
  readonly adminKeyPem: string;
  /** etcd's client URL, if known (needed by {@link compact}). */
  readonly etcdUrl: string | undefined;
  /** `true` when the plane was started by another process (e.g. `tools/test.sh`). */
  readonly external: boolean;
  /** Compacts etcd to its current revision (see {@link ControlPlane.compact}). */
  compact(): Promise<void>;
  /**
   * The tails of the component logs, for messages of failing tests.
   *
   * @param lines How many lines of each log.
   * @returns The tails, one section per component.
   */
  logs(lines?: number): string;
}

/**
 * A running etcd + kube-apiserver (+ kube-controller-manager) on 127.0.0.1.
 * Create it with {@link ControlPlane.start}; stop it with {@link ControlPlane.stop} or
 * `await using`.
 *
 * @example
 * ```ts
 * import { ControlPlane } from "./control_plane.ts";
 *
 * const plane = await ControlPlane.start();
 * try {
 *   const client = Deno.createHttpClient({ caCerts: [plane.caPem] });
 *   const response = await fetch(`${plane.server}/version`, {
 *     client,
 *     headers: { authorization: `Bearer ${plane.adminToken}` },
 *   });
 *   console.log((await response.json()).gitVersion); // "v1.36.3"
 *   client.close();
 * } finally {
 *   await plane.stop();
 * }
 * ```
 */
export class ControlPlane implements AsyncDisposable, SharedControlPlane {
  readonly #dir: string;
  readonly #runDir: string;
  readonly #options: ControlPlaneOptions;
  readonly #components: Component[] = [];
  #watchdog: Deno.ChildProcess | undefined;
  #server = "";
  #etcdUrl = "";
  #credentials: Credentials | undefined;
  #stopping: Promise<void> | undefined;
  #finalLogs: string | undefined;
  #stopped = false;
  #startApiServer: ((deadline: number) => Promise<void>) | undefined;

  private constructor(dir: string, runDir: string, options: ControlPlaneOptions) {
    this.#dir = dir;
    this.#runDir = runDir;
    this.#options = options;
  }

  /**
   * Starts etcd, kube-apiserver and (by default) kube-controller-manager and waits until they
   * serve. Fails with the tails of the component logs if they don't within `startTimeoutMs`,
   * and with a hint to run `tools/kube-binaries.sh` if the binaries are missing.
   *
   * @param options Binaries, components, watch cache, directories, timeouts, signal.
   * @returns The running plane.
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * await using plane = await ControlPlane.start({ controllerManager: false });
   * console.log(plane.server, plane.kubeconfigPath);
   * ```
   */
  static async start(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
    const started = Date.now();
    const deadline = started + (options.startTimeoutMs ?? 120_000);
    const withKcm = options.controllerManager ?? true;
    const binDir = options.binDir ?? defaultBinDir();
    await checkBinaries(binDir, withKcm);
    options.signal?.throwIfAborted();
    await reapOrphanedRuns().catch(() => {});

    const dir = await makeWorkDir(options.dir);
    await Deno.writeTextFile(`${dir}/${MARKER}`, `${Deno.pid}\n`);
    const runDir = await registerRun(dir);
    const plane = new ControlPlane(dir, runDir, options);
    register(plane, {
      killNow: () => plane.#killNowSync(),
      stop: () => plane.stop(),
      handleSignals: options.handleSignals ?? true,
    });
    try {
      await plane.#boot(binDir, withKcm, deadline);
      return plane;
    } catch (error) {
      const logs = plane.logs(30);
      await plane.stop();
      if (options.signal?.aborted) throw options.signal.reason;
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`control plane failed to start: ${message}\n${logs}`, { cause: error });
    }
  }

  /** The working directory: certificates, kubeconfig, etcd data and component logs. */
  get dir(): string {
    return this.#dir;
  }

  /** A kubeconfig (cluster, user and context `kopf-ts-test`) that uses {@link adminToken}. */
  get kubeconfigPath(): string {
    return `${this.#dir}/kubeconfig`;
  }

  /** The API server URL, `https://127.0.0.1:<port>`. */
  get server(): string {
    return this.#server;
  }

  /** etcd's client URL, `http://127.0.0.1:<port>` (plain HTTP, no auth). */
  get etcdUrl(): string {
    return this.#etcdUrl;
  }

  /** PEM of the CA that signed the API server's certificate and the admin client certificate. */
  get caPem(): string {
    return this.#creds().caPem;
  }

  /** Bearer token of user `admin` in group `system:masters` (`--token-auth-file`). */
  get adminToken(): string {
    return this.#creds().adminToken;
  }

  /** PEM client certificate with CN=admin, O=system:masters (`--client-ca-file` is the CA). */
  get adminCertPem(): string {
    return this.#creds().adminCertPem;
  }

  /** PEM PKCS#8 private key of {@link adminCertPem}. */
  get adminKeyPem(): string {
    return this.#creds().adminKeyPem;
  }

  /** Always `false`: this plane's processes belong to this Deno process. */
  get external(): boolean {
    return false;
  }

  /**
   * The last `lines` lines of each component's log (etcd, kube-apiserver,
   * kube-controller-manager) — put them into the message of a failing test.
   * After {@link stop}, returns what the logs held at that time.
   *
   * @param lines How many lines of each log.
   * @returns The tails, one section per component.
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * await using plane = await ControlPlane.start();
   * console.error(plane.logs(20));
   * ```
   */
  logs(lines = 40): string {
    return this.#finalLogs ?? componentLogs(this.#dir, lines);
  }

  /**
   * Compacts etcd's history up to the current revision (physically). Afterwards, a watch
   * that starts from an older `resourceVersion` and is served from etcd fails with `410 Gone`
   * ("too old resource version") — as after a long disconnection in a real cluster.
   *
   * That holds for resources whose watches are served from etcd: the `uncachedResources`
   * (default: PodTemplates), or all with `watchCache: false`. Watches of cached resources are
   * served from the apiserver's window of recent events, which compaction doesn't shorten.
   *
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * await using plane = await ControlPlane.start();
   * // ... list something, remember its resourceVersion, change things ...
   * await plane.compact();
   * // ... a watch from the remembered resourceVersion now gets 410 Gone.
   * ```
   */
  async compact(): Promise<void> {
    await compactEtcd(this.#etcdUrl);
  }

  /**
   * Stops all processes (SIGTERM, then SIGKILL after `stopGraceMs`) and removes the working
   * directory. Safe to call more than once and concurrently; later calls wait for the first.
   *
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * const plane = await ControlPlane.start();
   * await plane.stop();
   * ```
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#teardown();
    return this.#stopping;
  }

  /** Same as {@link stop}, for `await using plane = await ControlPlane.start()`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  #creds(): Credentials {
    if (!this.#credentials) throw new Error("the control plane has not started yet");
    return this.#credentials;
  }

  async #boot(binDir: string, withKcm: boolean, deadline: number): Promise<void> {
    this.#watchdog = await spawnWatchdog(this.#runDir, this.#dir);
    const credentials = await writePki(this.#dir);
    this.#credentials = credentials;
    const ctx: BootContext = {
      dir: this.#dir,
      runDir: this.#runDir,
      binDir,
      withKcm,
      options: this.#options,
      components: this.#components,
      credentials,
    };
    this.#etcdUrl = await startEtcd(ctx, deadline);
    const apiServer = await startApiServer(ctx, this.#etcdUrl, deadline);
    this.#server = apiServer.server;
    this.#startApiServer = apiServer.start;
    await Deno.writeTextFile(this.kubeconfigPath, adminKubeconfig(this.#server, credentials), {
      mode: 0o600,
    });
    if (withKcm) await startControllerManager(ctx, this.#server, deadline);
  }

  /**
   * Sends a signal to a running component, for fault tests: `SIGSTOP` freezes kube-apiserver
   * (connections stay open, nothing answers) until `SIGCONT`. Use a plane of the test's own
   * for this, never one shared with other tests.
   *
   * @param component Which process.
   * @param signal The signal.
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * await using plane = await ControlPlane.start({ controllerManager: false });
   * plane.signal("kube-apiserver", "SIGSTOP");
   * plane.signal("kube-apiserver", "SIGCONT");
   * ```
   */
  signal(
    component: "etcd" | "kube-apiserver" | "kube-controller-manager",
    signal: Deno.Signal,
  ): void {
    const running = this.#components.filter((c) => c.name === component && !c.status);
    if (running.length === 0) throw new Error(`${component} is not running`);
    for (const c of running) c.child.kill(signal);
  }

  /**
   * Kills kube-apiserver (SIGKILL: no graceful shutdown, every connection drops), waits
   * `downtimeMs`, and starts it again with the same flags on the same port; etcd keeps all data.
   * Resolves when it is ready again. For fault tests on a plane of their own.
   *
   * @param options How long it stays down, and how long the restart may take.
   * @example
   * ```ts
   * import { ControlPlane } from "./control_plane.ts";
   *
   * await using plane = await ControlPlane.start({ controllerManager: false });
   * await plane.restartApiServer({ downtimeMs: 1_000 });
   * ```
   */
  async restartApiServer(
    options: { downtimeMs?: number; timeoutMs?: number } = {},
  ): Promise<void> {
    const start = this.#startApiServer;
    if (!start) throw new Error("the control plane has not started yet");
    const old = this.#components.filter((c) => c.name === "kube-apiserver");
    for (const component of old) {
      trySignal(component.child, "SIGCONT"); // a frozen process cannot die until it runs
      trySignal(component.child, "SIGKILL");
      await exitsWithin(component.exited, 10_000);
      this.#components.splice(this.#components.indexOf(component), 1);
    }
    await sleep(options.downtimeMs ?? 0, this.#options.signal);
    await start(Date.now() + (options.timeoutMs ?? 60_000));
  }

  async #teardown(): Promise<void> {
    // Stays registered until the processes are gone: an `unload` meanwhile still kills them.
    await stopComponents(this.#components, this.#options.stopGraceMs ?? 5_000);
    this.#finalLogs = this.logs();
    await killWatchdog(this.#watchdog);
    this.#stopped = true;
    unregister(this);
    if (!this.#options.keepDir) await removeQuietly(this.#dir);
    await removeQuietly(this.#runDir);
  }

  /** Synchronous last resort for `unload`: SIGKILL everything, remove the directories. */
  #killNowSync(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    unregister(this);
    for (const component of this.#components) {
      if (!component.status) trySignal(component.child, "SIGKILL");
    }
    if (this.#watchdog) trySignal(this.#watchdog, "SIGKILL");
    for (const path of this.#options.keepDir ? [this.#runDir] : [this.#dir, this.#runDir]) {
      try {
        Deno.removeSync(path, { recursive: true });
      } catch { /* already gone */ }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The shared plane.

let shared: Promise<SharedControlPlane> | undefined;

/**
 * The control plane for a whole test run, once per process (per test module worker).
 *
 * If `$KOPF_TS_TEST_KUBECONFIG` is set — e.g. by `tools/test.sh`, which runs
 * `tools/control_plane.ts start` once for all test files — that plane is used (and
 * `$KOPF_TS_TEST_ETCD_URL` for {@link SharedControlPlane.compact}). Otherwise a plane is started
 * on the first call with `options` and stopped when the process unloads.
 *
 * A lazily started plane holds child processes and pending ops, which Deno's test sanitizers
 * attribute to the test that happened to start it. Call it at a module's top level
 * (`const plane = await sharedControlPlane();`) or disable `sanitizeOps`/`sanitizeResources`
 * for that test.
 *
 * @param options Options for a plane started by this process (ignored for an external one).
 * @returns The shared plane.
 * @example
 * ```ts
 * import { createTestNamespace, sharedControlPlane } from "./control_plane.ts";
 *
 * const plane = await sharedControlPlane();
 *
 * Deno.test("creates things", async () => {
 *   const namespace = await createTestNamespace(plane, "things");
 *   // ... use plane.kubeconfigPath ...
 * });
 * ```
 */
export function sharedControlPlane(
  options: ControlPlaneOptions = {},
): Promise<SharedControlPlane> {
  shared ??= (async (): Promise<SharedControlPlane> => {
    const kubeconfig = Deno.env.get("KOPF_TS_TEST_KUBECONFIG");
    if (kubeconfig) {
      return new ExternalControlPlane(
        kubeconfig,
        Deno.env.get("KOPF_TS_TEST_ETCD_URL") || undefined,
      );
    }
    return await ControlPlane.start(options);
  })();
  return shared;
}
