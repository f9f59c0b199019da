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

import { parse as parseYaml } from "yaml";
import {
  createCertificateAuthority,
  generateKeyPair,
  issueCertificate,
} from "../kits/certificates.ts";

/** The Kubernetes version that `tools/kube-binaries.sh` builds by default. */
const DEFAULT_K8S_VERSION = "v1.36.3";
/** The etcd version that `tools/kube-binaries.sh` builds by default. */
const DEFAULT_ETCD_VERSION = "v3.6.16";
/** Name of the cluster, user and context in the written kubeconfig. */
const CONTEXT = "kopf-ts-test";
/** A file that marks a directory as a control plane's own (the reaper removes only those). */
const MARKER = ".kopf-ts-plane";
const COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager"] as const;
type ComponentName = typeof COMPONENTS[number];

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

interface Component {
  readonly name: ComponentName;
  readonly child: Deno.ChildProcess;
  readonly logPath: string;
  status: Deno.CommandStatus | undefined;
  readonly exited: Promise<Deno.CommandStatus>;
}

interface Credentials {
  readonly caPem: string;
  readonly adminToken: string;
  readonly adminCertPem: string;
  readonly adminKeyPem: string;
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
    if (this.#finalLogs !== undefined) return this.#finalLogs;
    return COMPONENTS.map((name) => {
      let text: string;
      try {
        text = Deno.readTextFileSync(`${this.#dir}/${name}.log`);
      } catch {
        return "";
      }
      const tail = text.trimEnd().split("\n").slice(-lines).join("\n");
      return `----- ${name} (last ${lines} lines) -----\n${tail}\n`;
    }).join("");
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
    const dir = this.#dir;
    const signal = this.#options.signal;
    this.#watchdog = await spawnWatchdog(this.#runDir, dir);

    // Credentials.
    const ca = await createCertificateAuthority({ commonName: "kopf-ts-test-ca" });
    const serving = await issueCertificate(ca, {
      commonName: "kube-apiserver",
      dnsNames: [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
      ],
      ipAddresses: ["127.0.0.1", "10.0.0.1"],
      usages: "server",
    });
    const admin = await issueCertificate(ca, {
      commonName: "admin",
      organization: "system:masters",
      usages: "client",
    });
    const sa = await generateKeyPair("rsa-2048");
    const token = Array.from(
      crypto.getRandomValues(new Uint8Array(24)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    this.#credentials = {
      caPem: ca.certPem,
      adminToken: token,
      adminCertPem: admin.certPem,
      adminKeyPem: admin.keyPem,
    };
    await Deno.mkdir(`${dir}/pki`, { mode: 0o700 });
    const secret = { mode: 0o600 };
    await Deno.writeTextFile(`${dir}/pki/ca.crt`, ca.certPem);
    await Deno.writeTextFile(`${dir}/pki/ca.key`, ca.keyPem, secret);
    await Deno.writeTextFile(`${dir}/pki/apiserver.crt`, serving.certPem);
    await Deno.writeTextFile(`${dir}/pki/apiserver.key`, serving.keyPem, secret);
    await Deno.writeTextFile(`${dir}/pki/admin.crt`, admin.certPem);
    await Deno.writeTextFile(`${dir}/pki/admin.key`, admin.keyPem, secret);
    await Deno.writeTextFile(`${dir}/pki/sa.key`, sa.privateKeyPem, secret);
    await Deno.writeTextFile(`${dir}/pki/sa.pub`, sa.publicKeyPem);
    await Deno.writeTextFile(
      `${dir}/pki/tokens.csv`,
      `${token},admin,admin-uid,"system:masters"\n`,
      secret,
    );

    // etcd.
    await this.#startWithFreePorts("etcd", 2, deadline, async ([client, peer]) => {
      this.#etcdUrl = `http://127.0.0.1:${client}`;
      const peerUrl = `http://127.0.0.1:${peer}`;
      await removeQuietly(`${dir}/etcd`); // a fresh data dir, also after a port clash
      const etcd = await this.#spawn("etcd", `${binDir}/etcd`, [
        "--name=kopf-ts",
        `--data-dir=${dir}/etcd`,
        `--listen-client-urls=${this.#etcdUrl}`,
        `--advertise-client-urls=${this.#etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=kopf-ts=${peerUrl}`,
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        "--log-level=warn",
      ]);
      await waitUntil("etcd /health", deadline, signal, [etcd], async () => {
        const response = await fetch(`${this.#etcdUrl}/health`, {
          signal: AbortSignal.timeout(2_000),
        });
        const body = await response.text();
        return response.ok && body.includes('"true"');
      });
    });

    // kube-apiserver.
    const http = Deno.createHttpClient({ caCerts: [ca.certPem] });
    try {
      await this.#startWithFreePorts("kube-apiserver", 1, deadline, async ([port]) => {
        this.#server = `https://127.0.0.1:${port}`;
        const args = [
          `--etcd-servers=${this.#etcdUrl}`,
          "--bind-address=127.0.0.1",
          "--advertise-address=127.0.0.1",
          `--secure-port=${port}`,
          `--cert-dir=${dir}/pki`,
          `--tls-cert-file=${dir}/pki/apiserver.crt`,
          `--tls-private-key-file=${dir}/pki/apiserver.key`,
          `--client-ca-file=${dir}/pki/ca.crt`,
          `--token-auth-file=${dir}/pki/tokens.csv`,
          "--authorization-mode=RBAC",
          `--service-account-issuer=${this.#server}`,
          `--service-account-key-file=${dir}/pki/sa.pub`,
          `--service-account-signing-key-file=${dir}/pki/sa.key`,
          "--service-cluster-ip-range=10.0.0.0/24",
          "--allow-privileged=true",
          "--endpoint-reconciler-type=none",
          "--enable-priority-and-fairness=false",
          "--max-requests-inflight=0",
          "--max-mutating-requests-inflight=0",
          "--profiling=false",
          ...watchCacheArgs(this.#options),
          featureGatesArg(this.#options),
          ...(withKcm ? [] : ["--disable-admission-plugins=ServiceAccount"]),
          ...(this.#options.apiServerArgs ?? []),
        ];
        this.#startApiServer = async (until: number) => {
          await this.#spawn("kube-apiserver", `${binDir}/kube-apiserver`, args);
          await this.#waitForApiServer(until);
        };
        await this.#startApiServer(deadline);
      });

      await Deno.writeTextFile(this.kubeconfigPath, this.#kubeconfig(), secret);
      if (!withKcm) return;

      // kube-controller-manager (uses the admin client certificate).
      await Deno.writeTextFile(`${dir}/kcm.kubeconfig`, this.#kcmKubeconfig(), secret);
      await this.#spawn(
        "kube-controller-manager",
        `${binDir}/kube-controller-manager`,
        [
          `--kubeconfig=${dir}/kcm.kubeconfig`,
          "--leader-elect=false",
          `--controllers=${(this.#options.controllers ?? ["*"]).join(",")}`,
          "--use-service-account-credentials=false",
          `--service-account-private-key-file=${dir}/pki/sa.key`,
          `--root-ca-file=${dir}/pki/ca.crt`,
          `--cluster-signing-cert-file=${dir}/pki/ca.crt`,
          `--cluster-signing-key-file=${dir}/pki/ca.key`,
          "--bind-address=127.0.0.1",
          "--secure-port=0",
          "--profiling=false",
          ...(this.#options.controllerManagerArgs ?? []),
        ],
      );
      // The ServiceAccount controller is up once the `default` namespace has its `default` SA.
      await waitUntil(
        "the default ServiceAccount",
        deadline,
        signal,
        this.#components,
        async () => {
          const response = await fetch(
            `${this.#server}/api/v1/namespaces/default/serviceaccounts/default`,
            {
              client: http,
              headers: { authorization: `Bearer ${token}` },
              signal: AbortSignal.timeout(5_000),
            },
          );
          await response.body?.cancel();
          return response.ok;
        },
      );
    } finally {
      http.close();
    }
  }

  /**
   * Runs `attempt` with `count` free ports; if the component died because a port was taken
   * meanwhile ("address already in use"), retries with new ports (3 attempts).
   */
  async #startWithFreePorts(
    name: ComponentName,
    count: number,
    deadline: number,
    attempt: (ports: number[]) => Promise<void>,
  ): Promise<void> {
    for (let round = 1;; round++) {
      const ports = freePorts(count);
      try {
        await attempt(ports);
        return;
      } catch (error) {
        const component = this.#components.find((c) => c.name === name);
        const log = component ? readText(component.logPath) : "";
        if (round >= 3 || !component?.status || !/address already in use/i.test(log)) throw error;
        if (Date.now() >= deadline) throw error;
        this.#components.splice(this.#components.indexOf(component), 1);
        await Deno.writeTextFile(component.logPath, `[retrying with new ports]\n`, {
          append: true,
        });
      }
    }
  }

  async #spawn(name: ComponentName, binary: string, args: string[]): Promise<Component> {
    const logPath = `${this.#dir}/${name}.log`;
    // The shell only redirects the output to the log file and then becomes the binary (exec),
    // so the pid is the component's own and nothing in this process pumps its output.
    const child = new Deno.Command("/bin/sh", {
      args: ["-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "sh", logPath, binary, ...args],
      stdin: "null",
      stdout: "null",
      stderr: "null",
    }).spawn();
    child.unref(); // never keeps the Deno process alive; `unload` kills it
    const component: Component = {
      name,
      child,
      logPath,
      status: undefined,
      exited: child.status.then((status) => (component.status = status)),
    };
    this.#components.push(component);
    await Deno.writeTextFile(`${this.#runDir}/children.pids`, `${child.pid}\n`, { append: true });
    return component;
  }

  #kubeconfig(): string {
    const creds = this.#creds();
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- name: ${CONTEXT}`,
      "  cluster:",
      `    server: ${this.#server}`,
      `    certificate-authority-data: ${base64(creds.caPem)}`,
      "users:",
      `- name: ${CONTEXT}`,
      "  user:",
      `    token: ${creds.adminToken}`,
      `- name: ${CONTEXT}-cert`,
      "  user:",
      `    client-certificate-data: ${base64(creds.adminCertPem)}`,
      `    client-key-data: ${base64(creds.adminKeyPem)}`,
      "contexts:",
      `- name: ${CONTEXT}`,
      "  context:",
      `    cluster: ${CONTEXT}`,
      `    user: ${CONTEXT}`,
      `- name: ${CONTEXT}-cert`,
      "  context:",
      `    cluster: ${CONTEXT}`,
      `    user: ${CONTEXT}-cert`,
      `current-context: ${CONTEXT}`,
      "",
    ].join("\n");
  }

  #kcmKubeconfig(): string {
    const dir = this.#dir;
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      `- name: ${CONTEXT}`,
      "  cluster:",
      `    server: ${this.#server}`,
      `    certificate-authority: ${dir}/pki/ca.crt`,
      "users:",
      `- name: ${CONTEXT}`,
      "  user:",
      `    client-certificate: ${dir}/pki/admin.crt`,
      `    client-key: ${dir}/pki/admin.key`,
      "contexts:",
      `- name: ${CONTEXT}`,
      "  context:",
      `    cluster: ${CONTEXT}`,
      `    user: ${CONTEXT}`,
      `current-context: ${CONTEXT}`,
      "",
    ].join("\n");
  }

  async #waitForApiServer(deadline: number): Promise<void> {
    const http = Deno.createHttpClient({ caCerts: [this.#creds().caPem] });
    try {
      await waitUntil(
        "kube-apiserver /readyz",
        deadline,
        this.#options.signal,
        this.#components.filter((c) => !c.status),
        async () => {
          const response = await fetch(`${this.#server}/readyz`, {
            client: http,
            headers: { authorization: `Bearer ${this.#creds().adminToken}` },
            signal: AbortSignal.timeout(5_000),
          });
          return response.ok && (await response.text()).trim() === "ok";
        },
      );
    } finally {
      http.close();
    }
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
    const grace = this.#options.stopGraceMs ?? 5_000;
    const byName = (name: ComponentName) => this.#components.filter((c) => c.name === name);
    // Clients of etcd first, so that they don't spin on a vanished etcd while shutting down.
    await Promise.all(byName("kube-controller-manager").map((c) => terminate(c, grace)));
    await Promise.all(byName("kube-apiserver").map((c) => terminate(c, grace)));
    await Promise.all(byName("etcd").map((c) => terminate(c, grace)));
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
// Process-wide registry: signal handlers and the unload hook for all live planes.

interface PlaneHooks {
  readonly killNow: () => void;
  readonly stop: () => Promise<void>;
  readonly handleSignals: boolean;
}

const livePlanes = new Map<ControlPlane, PlaneHooks>();
const SIGNALS = [["SIGINT", 2], ["SIGTERM", 15]] as const;
const signalHandlers = SIGNALS.map(([name, signo]) => [name, () => onSignal(signo)] as const);
let listening = false;

function onUnload(): void {
  for (const hooks of [...livePlanes.values()]) hooks.killNow();
}

function onSignal(signo: number): void {
  const stopping = [...livePlanes.values()].filter((h) => h.handleSignals).map((h) => h.stop());
  Promise.allSettled(stopping).finally(() => Deno.exit(128 + signo));
}

function register(plane: ControlPlane, hooks: PlaneHooks): void {
  livePlanes.set(plane, hooks);
  if (livePlanes.size === 1) globalThis.addEventListener("unload", onUnload);
  syncSignalListeners();
}

function unregister(plane: ControlPlane): void {
  if (!livePlanes.delete(plane)) return;
  if (livePlanes.size === 0) globalThis.removeEventListener("unload", onUnload);
  syncSignalListeners();
}

function syncSignalListeners(): void {
  const wanted = [...livePlanes.values()].some((hooks) => hooks.handleSignals);
  if (wanted === listening) return;
  listening = wanted;
  for (const [name, handler] of signalHandlers) {
    try {
      if (wanted) Deno.addSignalListener(name, handler);
      else Deno.removeSignalListener(name, handler);
    } catch { /* signals not supported on this platform */ }
  }
}

// ---------------------------------------------------------------------------------------------
// Process helpers.

function trySignal(child: Deno.ChildProcess, signal: Deno.Signal): void {
  try {
    child.kill(signal);
  } catch { /* already exited */ }
}

async function terminate(component: Component, graceMs: number): Promise<void> {
  if (component.status) return;
  component.child.ref(); // keep the Deno process alive until the child is gone
  trySignal(component.child, "SIGTERM");
  if (await exitsWithin(component.exited, graceMs)) return;
  trySignal(component.child, "SIGKILL");
  await exitsWithin(component.exited, 10_000);
}

async function exitsWithin(exited: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([exited.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

async function killWatchdog(watchdog: Deno.ChildProcess | undefined): Promise<void> {
  if (!watchdog) return;
  watchdog.ref();
  trySignal(watchdog, "SIGKILL");
  await exitsWithin(watchdog.status, 5_000);
}

/**
 * A detached-enough shell (Linux only) that outlives a hard-killed Deno process and then kills
 * the recorded children (verifying that their command line mentions the working directory,
 * so that a recycled pid is never hit) and removes the directories.
 */
async function spawnWatchdog(runDir: string, dir: string): Promise<Deno.ChildProcess | undefined> {
  if (!(await exists("/proc/self/cmdline"))) return undefined;
  const script = `
    owner=$1 run=$2 data=$3
    while kill -0 "$owner" 2>/dev/null; do sleep 1; done
    ours() { [ -r "/proc/$1/cmdline" ] && tr '\\0' '\\n' <"/proc/$1/cmdline" | grep -qF -- "$data"; }
    for sig in TERM KILL; do
      for pid in $(cat "$run/children.pids" 2>/dev/null); do
        ours "$pid" && kill -s "$sig" "$pid" 2>/dev/null
      done
      [ "$sig" = TERM ] && sleep 3
    done
    [ -e "$data/${MARKER}" ] && rm -rf -- "$data"
    rm -rf -- "$run"
  `;
  const child = new Deno.Command("/bin/sh", {
    args: ["-c", script, "kopf-ts-watchdog", String(Deno.pid), runDir, dir],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  return child;
}

async function waitUntil(
  what: string,
  deadline: number,
  signal: AbortSignal | undefined,
  components: readonly Component[],
  probe: () => Promise<boolean>,
): Promise<void> {
  // A probe may hang until its own timeout; a component's exit ends the wait at once.
  const anyExit = Promise.race(components.map((component) => component.exited)).then(() => false);
  for (;;) {
    signal?.throwIfAborted();
    for (const component of components) {
      if (component.status) {
        const how = component.status.signal ?? `code ${component.status.code}`;
        throw new Error(`${component.name} exited (${how}) while waiting for ${what}`);
      }
    }
    try {
      if (await Promise.race([probe(), anyExit])) return;
    } catch { /* not up yet */ }
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(150, signal);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function watchCacheArgs(options: ControlPlaneOptions): string[] {
  if (options.watchCache === false) return ["--watch-cache=false"];
  const uncached = options.uncachedResources ?? ["podtemplates"];
  return uncached.length > 0
    ? ["--watch-cache=true", `--watch-cache-sizes=${uncached.map((r) => `${r}#0`).join(",")}`]
    : ["--watch-cache=true"];
}

function freePorts(count: number): number[] {
  // Keep all listeners open until all ports are chosen, so that they are distinct.
  const listeners = Array.from(
    { length: count },
    () => Deno.listen({ hostname: "127.0.0.1", port: 0 }),
  );
  const ports = listeners.map((l) => (l.addr as Deno.NetAddr).port);
  for (const listener of listeners) listener.close();
  return ports;
}

// ---------------------------------------------------------------------------------------------
// Files, directories, and the registry of runs for reaping orphans.

function cacheRoot(): string {
  const explicit = Deno.env.get("KOPF_TS_CACHE");
  if (explicit) return explicit;
  const xdg = Deno.env.get("XDG_CACHE_HOME");
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE") ?? ".";
  return `${xdg || `${home}/.cache`}/kopf-ts`;
}

function defaultBinDir(): string {
  const explicit = Deno.env.get("KOPF_TS_KUBE_BIN");
  if (explicit) return explicit;
  const k8s = Deno.env.get("KOPF_TS_K8S_VERSION") || DEFAULT_K8S_VERSION;
  const etcd = Deno.env.get("KOPF_TS_ETCD_VERSION") || DEFAULT_ETCD_VERSION;
  return `${cacheRoot()}/kube/${k8s}-etcd-${etcd}/bin`;
}

async function checkBinaries(binDir: string, withKcm: boolean): Promise<void> {
  const wanted: string[] = [
    "etcd",
    "kube-apiserver",
    ...(withKcm ? ["kube-controller-manager"] : []),
  ];
  const missing: string[] = [];
  for (const name of wanted) {
    if (!(await exists(`${binDir}/${name}`))) missing.push(name);
  }
  if (missing.length > 0) {
    throw new Error(
      `the test control plane binaries are missing (${missing.join(", ")} not in ${binDir}). ` +
        "Build them once with `tools/kube-binaries.sh` — it needs a Go toolchain (>= 1.26) and " +
        "the Go module proxy, takes about 5 minutes the first time, and caches the result — or " +
        "set KOPF_TS_KUBE_BIN to a directory that has etcd, kube-apiserver and " +
        "kube-controller-manager.",
    );
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

function readText(path: string): string {
  try {
    return Deno.readTextFileSync(path);
  } catch {
    return "";
  }
}

async function removeQuietly(path: string): Promise<void> {
  try {
    await Deno.remove(path, { recursive: true });
  } catch { /* already gone */ }
}

async function makeWorkDir(parent: string | undefined): Promise<string> {
  const prefix = "kopf-ts-plane-";
  if (parent !== undefined) {
    await Deno.mkdir(parent, { recursive: true });
    return await Deno.makeTempDir({ dir: parent, prefix });
  }
  if (await exists("/dev/shm")) {
    try {
      return await Deno.makeTempDir({ dir: "/dev/shm", prefix });
    } catch { /* not writable: fall back to the temp dir */ }
  }
  return await Deno.makeTempDir({ prefix });
}

/** Linux: a process's start time in clock ticks since boot (field 22 of /proc/PID/stat). */
function processStartTime(pid: number): string | undefined {
  const stat = readText(`/proc/${pid}/stat`);
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[19];
}

async function processCommandLine(pid: number): Promise<string | undefined> {
  if (await exists("/proc/self/cmdline")) {
    const text = readText(`/proc/${pid}/cmdline`);
    return text ? text.replaceAll("\0", " ") : undefined;
  }
  try {
    const output = await new Deno.Command("ps", {
      args: ["-o", "command=", "-p", String(pid)],
      stdout: "piped",
      stderr: "null",
    }).output();
    const text = new TextDecoder().decode(output.stdout).trim();
    return output.success && text ? text : undefined;
  } catch {
    return undefined;
  }
}

async function processAlive(pid: number, startTime: string | undefined): Promise<boolean> {
  if (await exists("/proc/self/stat")) {
    const actual = processStartTime(pid);
    return actual !== undefined && (startTime === undefined || startTime === actual);
  }
  try {
    Deno.kill(pid, "SIGCONT"); // no-op for a running process; throws if there is none
    return true;
  } catch {
    return false;
  }
}

async function registerRun(dir: string): Promise<string> {
  const runsDir = `${cacheRoot()}/runs`;
  await Deno.mkdir(runsDir, { recursive: true });
  const runDir = await Deno.makeTempDir({ dir: runsDir, prefix: `${Deno.pid}-` });
  await Deno.writeTextFile(`${runDir}/data-dir`, `${dir}\n`);
  const startTime = processStartTime(Deno.pid) ?? "";
  await Deno.writeTextFile(`${runDir}/owner.pid.tmp`, `${Deno.pid} ${startTime}\n`);
  await Deno.rename(`${runDir}/owner.pid.tmp`, `${runDir}/owner.pid`);
  return runDir;
}

/** Kills the processes and removes the directories of runs whose owner process is dead. */
async function reapOrphanedRuns(): Promise<void> {
  const runsDir = `${cacheRoot()}/runs`;
  if (!(await exists(runsDir))) return;
  for await (const entry of Deno.readDir(runsDir)) {
    if (!entry.isDirectory) continue;
    const runDir = `${runsDir}/${entry.name}`;
    const owner = readText(`${runDir}/owner.pid`).trim().split(" ");
    const ownerPid = Number(owner[0]);
    if (!Number.isInteger(ownerPid) || ownerPid <= 0) {
      // Being created right now, or garbage: only reap once it is clearly stale.
      const info = await Deno.stat(runDir).catch(() => undefined);
      if (!info?.mtime || Date.now() - info.mtime.getTime() < 60_000) continue;
    } else if (await processAlive(ownerPid, owner[1] || undefined)) {
      continue;
    }
    const dir = readText(`${runDir}/data-dir`).trim();
    const pids = readText(`${runDir}/children.pids`).split("\n").map(Number).filter((p) => p > 0);
    for (const pid of pids) {
      const cmdline = await processCommandLine(pid);
      if (dir && cmdline?.includes(dir)) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch { /* gone */ }
      }
    }
    if (dir && (await exists(`${dir}/${MARKER}`))) await removeQuietly(dir);
    await removeQuietly(runDir);
  }
}

function base64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

function unbase64(data: string): string {
  const binary = atob(data);
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

// ---------------------------------------------------------------------------------------------
// etcd compaction.

/**
 * Compacts etcd to its current revision through etcd's HTTP/JSON gateway and returns that
 * revision: `POST /v3/kv/put` of a marker key outside the apiserver's `/registry` prefix (for a
 * fresh revision), then `POST /v3/kv/compaction` at it with `physical: true`. Afterwards every
 * watch that starts from a `resourceVersion` older than the newest object change is answered
 * with `410 Gone` — if it is served from etcd, not from the apiserver's watch cache (see
 * {@link ControlPlaneOptions.uncachedResources}).
 *
 * @param etcdUrl etcd's client URL, e.g. `http://127.0.0.1:2379`.
 * @returns The revision compacted to.
 * @example
 * ```ts
 * import { ControlPlane, compactEtcd } from "./control_plane.ts";
 *
 * await using plane = await ControlPlane.start();
 * const revision = await compactEtcd(plane.etcdUrl);
 * ```
 */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  // Write a marker key outside the apiserver's prefix and compact at its revision. Compacting
  // exactly at the revision of the latest object write would keep that write watchable while
  // dropping its previous version, which the apiserver reports as a 500 ("PrevKv=nil") instead
  // of 410 Gone; one extra revision on top avoids that.
  const put = await etcdPost(etcdUrl, "/v3/kv/put", {
    key: base64("kopf-ts/compaction-marker"),
    value: base64(new Date().toISOString()),
  });
  const revision = String(asRecord(put["header"])?.["revision"] ?? "");
  if (!/^\d+$/.test(revision)) {
    throw new Error(`etcd returned no revision: ${JSON.stringify(put)}`);
  }
  try {
    await etcdPost(etcdUrl, "/v3/kv/compaction", { revision, physical: true });
  } catch (error) {
    if (!(error instanceof Error && /has been compacted/.test(error.message))) throw error;
  }
  return Number(revision);
}

async function etcdPost(
  etcdUrl: string,
  path: string,
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const response = await fetch(`${etcdUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`etcd ${path}: HTTP ${response.status}: ${text}`);
  return asRecord(JSON.parse(text)) ?? {};
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

function asString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

function featureGatesArg(options: ControlPlaneOptions): string {
  const gates = { ShardedListAndWatch: true, ...options.featureGates };
  return `--feature-gates=${Object.entries(gates).map(([k, v]) => `${k}=${v}`).join(",")}`;
}

// ---------------------------------------------------------------------------------------------
// The shared plane.

class ExternalControlPlane implements SharedControlPlane {
  readonly kubeconfigPath: string;
  readonly server: string;
  readonly caPem: string;
  readonly adminToken: string;
  readonly etcdUrl: string | undefined;
  readonly #certPem: string | undefined;
  readonly #keyPem: string | undefined;

  constructor(kubeconfigPath: string, etcdUrl: string | undefined) {
    this.kubeconfigPath = kubeconfigPath;
    this.etcdUrl = etcdUrl;
    const config = asRecord(parseYaml(Deno.readTextFileSync(kubeconfigPath))) ?? {};
    const named = (list: string, name: string | undefined) => {
      const items = Array.isArray(config[list]) ? config[list] as unknown[] : [];
      return asRecord(items.map(asRecord).find((item) => item?.["name"] === name));
    };
    const contextName = asString(config["current-context"]);
    const context = asRecord(named("contexts", contextName)?.["context"]);
    const cluster = asRecord(named("clusters", asString(context?.["cluster"]))?.["cluster"]);
    const userName = asString(context?.["user"]);
    const user = asRecord(named("users", userName)?.["user"]);
    const certUser = asRecord(named("users", `${userName}-cert`)?.["user"]) ?? user;
    const server = asString(cluster?.["server"]);
    const caData = asString(cluster?.["certificate-authority-data"]);
    const caFile = asString(cluster?.["certificate-authority"]);
    const token = asString(user?.["token"]);
    if (!server || !(caData || caFile) || !token) {
      throw new Error(
        `${kubeconfigPath}: the current context needs a server, a CA and a bearer token`,
      );
    }
    this.server = server.replace(/\/+$/, "");
    this.caPem = caData ? unbase64(caData) : Deno.readTextFileSync(caFile ?? "");
    this.adminToken = token;
    const certData = asString(certUser?.["client-certificate-data"]);
    const keyData = asString(certUser?.["client-key-data"]);
    this.#certPem = certData ? unbase64(certData) : undefined;
    this.#keyPem = keyData ? unbase64(keyData) : undefined;
  }

  get adminCertPem(): string {
    if (this.#certPem === undefined) throw this.#noCertificate();
    return this.#certPem;
  }

  get adminKeyPem(): string {
    if (this.#keyPem === undefined) throw this.#noCertificate();
    return this.#keyPem;
  }

  #noCertificate(): Error {
    return new Error(`${this.kubeconfigPath} has no admin client certificate (client-*-data)`);
  }

  get external(): boolean {
    return true;
  }

  async compact(): Promise<void> {
    if (!this.etcdUrl) {
      throw new Error("compact() needs KOPF_TS_TEST_ETCD_URL for an external control plane");
    }
    await compactEtcd(this.etcdUrl);
  }

  logs(): string {
    return `(external control plane at ${this.server}: see the log of the process that started it)\n`;
  }
}

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

// ---------------------------------------------------------------------------------------------
// Namespaces.

interface ApiResponse {
  readonly status: number;
  readonly text: string;
}

async function apiRequest(
  access: ClusterAccess,
  method: string,
  path: string,
  body?: unknown,
): Promise<ApiResponse> {
  const client = Deno.createHttpClient({ caCerts: [access.caPem] });
  try {
    const headers: Record<string, string> = {
      authorization: `Bearer ${access.adminToken}`,
      accept: "application/json",
    };
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${access.server}${path}`, {
      method,
      client,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: response.status, text: await response.text() };
  } finally {
    client.close();
  }
}

/**
 * Creates a namespace with a unique name (`<prefix>-<random>`, at most 63 characters,
 * labelled `app.kubernetes.io/created-by=kopf-ts-testing`) and returns its name.
 *
 * @param access The plane (or any server, CA and admin token).
 * @param prefix Start of the name; cleaned to a valid name.
 * @returns The name of the new namespace.
 * @example
 * ```ts
 * import { createTestNamespace, deleteNamespace, sharedControlPlane } from "./control_plane.ts";
 *
 * const plane = await sharedControlPlane();
 * const namespace = await createTestNamespace(plane, "my-test");
 * try {
 *   // ...
 * } finally {
 *   await deleteNamespace(plane, namespace);
 * }
 * ```
 */
export async function createTestNamespace(access: ClusterAccess, prefix = "test"): Promise<string> {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "")
    .slice(0, 50) || "test";
  const suffix = Array.from(
    crypto.getRandomValues(new Uint8Array(4)),
    (b) => b.toString(36).padStart(2, "0").slice(-2),
  ).join("");
  const name = `${clean}-${suffix}`;
  const response = await apiRequest(access, "POST", "/api/v1/namespaces", {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name, labels: { "app.kubernetes.io/created-by": "kopf-ts-testing" } },
  });
  if (response.status !== 201) {
    throw new Error(`cannot create namespace ${name}: HTTP ${response.status}: ${response.text}`);
  }
  return name;
}

/**
 * Options of {@link deleteNamespace}.
 *
 * @example
 * ```ts
 * import type { DeleteNamespaceOptions } from "./control_plane.ts";
 *
 * const options: DeleteNamespaceOptions = { wait: true, timeoutMs: 30_000 };
 * ```
 */
export interface DeleteNamespaceOptions {
  /**
   * Wait until the namespace is gone. That needs kube-controller-manager (the namespace
   * controller empties and finalizes it). Default: `false`.
   */
  wait?: boolean;
  /** How long to wait when `wait` is set. Default: 60 000 ms. */
  timeoutMs?: number;
}

/**
 * Deletes a namespace (a missing one is fine), optionally waiting until it is gone.
 *
 * @param access The plane (or any server, CA and admin token).
 * @param name The namespace.
 * @param options Whether and how long to wait until it is gone.
 * @example
 * ```ts
 * import { ControlPlane, createTestNamespace, deleteNamespace } from "./control_plane.ts";
 *
 * await using plane = await ControlPlane.start();
 * const namespace = await createTestNamespace(plane);
 * await deleteNamespace(plane, namespace, { wait: true });
 * ```
 */
export async function deleteNamespace(
  access: ClusterAccess,
  name: string,
  options: DeleteNamespaceOptions = {},
): Promise<void> {
  const path = `/api/v1/namespaces/${encodeURIComponent(name)}`;
  const response = await apiRequest(access, "DELETE", path);
  if (response.status === 404) return;
  if (response.status >= 300) {
    throw new Error(`cannot delete namespace ${name}: HTTP ${response.status}: ${response.text}`);
  }
  if (!options.wait) return;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    const check = await apiRequest(access, "GET", path);
    if (check.status === 404) return;
    if (Date.now() >= deadline) {
      throw new Error(`namespace ${name} is still there after ${options.timeoutMs ?? 60_000} ms`);
    }
    await sleep(200);
  }
}
