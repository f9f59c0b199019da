/**
 * A real node for the test control plane: containerd + runc (Debian's packages), a kubelet and
 * kube-scheduler (built by `tools/kube-binaries.sh --node` into the plane's binary cache), so
 * that Deployments become running Pods. Opt-in and Linux-only; it runs as root inside network
 * and mount namespaces of its own (`tools/netns.sh`), where the node's address (192.0.2.10 by
 * default) exists only on that namespace's loopback: hostNetwork Pods, the kubelet's probes and
 * the API server's calls to the kubelet never leave the machine, and nothing can reach another
 * host (there is no route).
 *
 * Pods use the host network (a loopback-only CNI configuration makes the node Ready; there is
 * no Pod network and no kube-proxy): a Pod reaches the API server at 127.0.0.1 when its spec
 * sets `KUBERNETES_SERVICE_HOST=127.0.0.1` and `KUBERNETES_SERVICE_PORT` to
 * {@link TestNode.apiServerPort} (the kubelet would inject the `kubernetes` Service's cluster IP,
 * which nothing serves here). Service-account tokens are projected by the kubelet (TokenRequest).
 * Images are never pulled: load them with {@link TestNode.importImage} and use
 * `imagePullPolicy: Never`; the sandbox image is a static `pause` compiled here with the C
 * compiler.
 *
 * Everything lives in one directory (containerd's root and state, runc's state, the kubelet's
 * root, the pod logs, the CNI configuration) that {@link TestNode.stop} removes after killing the
 * containers and unmounting what the kubelet and containerd mounted there.
 * @module
 */

import { writeImageArchive } from "../../core/cli/generate/oci.ts";
import { spawnComponent } from "./components.ts";
import { register, unregister } from "./exit_hooks.ts";
import {
  CNI_CONFLIST,
  containerdConfig,
  kubeletConfig,
  nodeKubeconfig,
  type NodePaths,
  PAUSE_C,
  PAUSE_IMAGE,
} from "./node_config.ts";
import {
  cacheRoot,
  type Component,
  defaultBinDir,
  exists,
  killWatchdog,
  MARKER,
  registerRun,
  removeQuietly,
  spawnWatchdog,
  terminate,
  trySignal,
  waitUntil,
} from "./processes.ts";

/** What the node needs of its control plane: the URL, the CA and an admin's certificate. */
export interface NodeControlPlane {
  /** The API server's URL, `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** The CA (PEM). */
  readonly caPem: string;
  /** A `system:masters` client certificate (PEM): the kubelet and scheduler act with it. */
  readonly adminCertPem: string;
  /** Its key (PEM). */
  readonly adminKeyPem: string;
}

/** Options of {@link TestNode.start}. */
export interface TestNodeOptions {
  /** Where `kubelet` and `kube-scheduler` are. @default the control plane's binary directory */
  readonly binDir?: string;
  /** The Node's name. @default `kopf-ts-node` */
  readonly name?: string;
  /** The node's address; must be on an interface, not loopback. @default `$KOPF_TS_NODE_IP` */
  readonly nodeIp?: string;
  /** Parent of the node's directory (on disk: images are unpacked there). @default `/var/tmp` */
  readonly dir?: string;
  /** How long `start()` may take until the Node is Ready. @default 120 000 ms */
  readonly startTimeoutMs?: number;
  /** How long each process gets after SIGTERM before SIGKILL. @default 5 000 ms */
  readonly stopGraceMs?: number;
  /** Aborts a start in progress. */
  readonly signal?: AbortSignal;
  /** Stop the node on SIGINT/SIGTERM and exit. @default true */
  readonly handleSignals?: boolean;
}

const CNI_BIN_DIRS = ["/usr/lib/cni", "/opt/cni/bin"];
const TOOLS = ["containerd", "containerd-shim-runc-v2", "runc", "ctr"];

async function which(name: string): Promise<string | undefined> {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":").filter(Boolean)) {
    if (await exists(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return undefined;
}

/**
 * Why a test node cannot run here, or `undefined` when it can: Linux, root, containerd, runc and
 * the CNI loopback plugin installed (Debian: `apt-get install containerd runc
 * containernetworking-plugins`), the kubelet and kube-scheduler built
 * (`tools/kube-binaries.sh --node`), a C compiler or a cached pause binary, and a network
 * namespace of its own with the node's address (`tools/netns.sh`).
 *
 * @param options The binaries' directory and the node's address.
 * @returns One line saying what is missing, or `undefined`.
 */
export async function nodeUnavailable(
  options: Pick<TestNodeOptions, "binDir" | "nodeIp"> = {},
): Promise<string | undefined> {
  if (Deno.build.os !== "linux") return "the test node runs on Linux only";
  if (Deno.uid() !== 0) return "the test node needs root (containerd, the kubelet, mounts)";
  const missing = [];
  for (const tool of TOOLS) if (!(await which(tool))) missing.push(tool);
  if (!(await cniBinDir())) missing.push("the CNI loopback plugin");
  if (missing.length > 0) {
    return `the test node needs ${missing.join(", ")} (Debian: apt-get install containerd runc ` +
      "containernetworking-plugins)";
  }
  const binDir = options.binDir ?? defaultBinDir();
  for (const binary of ["kubelet", "kube-scheduler"]) {
    if (!(await exists(`${binDir}/${binary}`))) {
      return `${binary} is not in ${binDir}: build it with tools/kube-binaries.sh --node`;
    }
  }
  if (!(await exists(pauseBinaryPath())) && !(await which("gcc")) && !(await which("cc"))) {
    return "the test node's sandbox (pause) is compiled with a C compiler, and there is none";
  }
  const nodeIp = options.nodeIp ?? Deno.env.get("KOPF_TS_NODE_IP");
  if (!nodeIp) {
    return "the test node needs network and mount namespaces of its own: run under " +
      "tools/netns.sh (which sets KOPF_TS_NODE_IP)";
  }
  if (hasDefaultRoute()) {
    return "the test node runs only where no route leads off the machine (its Pods' probes and " +
      "the API server's calls go to the node's address): run under tools/netns.sh";
  }
  return undefined;
}

function hasDefaultRoute(): boolean {
  let table = "";
  try {
    table = Deno.readTextFileSync("/proc/self/net/route");
  } catch {
    return true;
  }
  return table.split("\n").slice(1).some((line) => line.split(/\s+/)[1] === "00000000");
}

async function cniBinDir(): Promise<string | undefined> {
  for (const dir of CNI_BIN_DIRS) if (await exists(`${dir}/loopback`)) return dir;
  return undefined;
}

function pauseBinaryPath(): string {
  return `${cacheRoot()}/node/pause-static`;
}

async function run(command: string, args: string[]): Promise<string> {
  const output = await new Deno.Command(command, { args, stdout: "piped", stderr: "piped" })
    .output();
  const text = new TextDecoder().decode(output.stdout);
  if (!output.success) {
    const error = new TextDecoder().decode(output.stderr).trim().split("\n").pop() ?? "";
    throw new Error(`${command} ${args.slice(0, 4).join(" ")} failed: ${error}`);
  }
  return text;
}

/** Compiles the static pause program into the cache once. */
async function pauseBinary(): Promise<Uint8Array> {
  const path = pauseBinaryPath();
  if (!(await exists(path))) {
    await Deno.mkdir(`${cacheRoot()}/node`, { recursive: true });
    const source = `${path}.c`;
    await Deno.writeTextFile(source, PAUSE_C);
    const compiler = (await which("gcc")) ?? "cc";
    await run(compiler, ["-static", "-Os", "-s", "-o", `${path}.tmp`, source]);
    await Deno.rename(`${path}.tmp`, path);
  }
  return await Deno.readFile(path);
}

/**
 * A running test node. Start it with {@link TestNode.start}; stop it with
 * {@link TestNode.stop} or `await using`.
 *
 * @example
 * ```ts
 * import { ControlPlane } from "../control_plane.ts";
 * import { nodeUnavailable, TestNode } from "./node.ts";
 *
 * if (!(await nodeUnavailable())) {
 *   await using plane = await ControlPlane.start();
 *   await using node = await TestNode.start(plane);
 *   await node.importImage("dist/my-operator.oci.tar");
 * }
 * ```
 */
export class TestNode implements AsyncDisposable {
  readonly #dir: string;
  readonly #runDir: string;
  readonly #name: string;
  readonly #server: string;
  readonly #options: TestNodeOptions;
  readonly #components: Component[] = [];
  #watchdog: Deno.ChildProcess | undefined;
  #stopping: Promise<void> | undefined;
  #stopped = false;

  private constructor(
    dir: string,
    runDir: string,
    name: string,
    server: string,
    options: TestNodeOptions,
  ) {
    this.#dir = dir;
    this.#runDir = runDir;
    this.#name = name;
    this.#server = server;
    this.#options = options;
  }

  /**
   * Starts containerd, kube-scheduler and the kubelet, imports the pause image and waits until
   * the Node is Ready.
   *
   * @param plane The control plane to register to.
   * @param options Binaries, name, address, directory, timeouts.
   * @returns The running node.
   * @throws {Error} when {@link nodeUnavailable} says why not, or the node does not get Ready
   *   in time (with the tails of its logs).
   */
  static async start(plane: NodeControlPlane, options: TestNodeOptions = {}): Promise<TestNode> {
    const reason = await nodeUnavailable(options);
    if (reason) throw new Error(reason);
    const nodeIp = options.nodeIp ?? Deno.env.get("KOPF_TS_NODE_IP") ?? "";
    const deadline = Date.now() + (options.startTimeoutMs ?? 120_000);
    const parent = options.dir ?? "/var/tmp";
    await Deno.mkdir(parent, { recursive: true });
    const dir = await Deno.makeTempDir({ dir: parent, prefix: "kopf-ts-node-" });
    await Deno.writeTextFile(`${dir}/${MARKER}`, `${Deno.pid}\n`);
    const runDir = await registerRun(dir);
    const node = new TestNode(dir, runDir, options.name ?? "kopf-ts-node", plane.server, options);
    register(node, {
      killNow: () => node.#killNowSync(),
      stop: () => node.stop(),
      handleSignals: options.handleSignals ?? true,
    });
    try {
      await node.#boot(plane, nodeIp, deadline);
      return node;
    } catch (error) {
      const logs = node.logs(30);
      await node.stop();
      if (options.signal?.aborted) throw options.signal.reason;
      const message = error instanceof Error ? error.message : String(error);
      throw new Error(`the test node failed to start: ${message}\n${logs}`, { cause: error });
    }
  }

  /** The node's directory. */
  get dir(): string {
    return this.#dir;
  }

  /** The Node's name. */
  get name(): string {
    return this.#name;
  }

  /** containerd's socket: `ctr --address SOCKET -n k8s.io images import TAR`. */
  get containerdSocket(): string {
    return `${this.#dir}/containerd.sock`;
  }

  /** The API server's port on 127.0.0.1, for `KUBERNETES_SERVICE_PORT` in Pod specs. */
  get apiServerPort(): number {
    return Number(new URL(this.#server).port);
  }

  /** Where the kubelet writes the containers' logs: `<ns>_<pod>_<uid>/<container>/<n>.log`. */
  get podLogsDir(): string {
    return `${this.#dir}/pod-logs`;
  }

  /**
   * Imports an image archive (OCI layout or `docker save` format) into the node's containerd,
   * where the kubelet finds it (`imagePullPolicy: Never`).
   *
   * @param path The archive.
   */
  async importImage(path: string): Promise<void> {
    await this.#ctr(["images", "import", path]);
  }

  /**
   * The last `lines` lines of the node's logs (containerd, kube-scheduler, kubelet).
   *
   * @param lines How many lines of each.
   * @returns The tails, one section per process.
   */
  logs(lines = 40): string {
    return ["containerd", "kube-scheduler", "kubelet"].map((name) => {
      try {
        const text = Deno.readTextFileSync(`${this.#dir}/${name}.log`);
        const tail = text.trimEnd().split("\n").slice(-lines).join("\n");
        return `----- ${name} (last ${lines} lines) -----\n${tail}\n`;
      } catch {
        return "";
      }
    }).join("");
  }

  /**
   * Kills every container, stops the processes, unmounts and removes the node's directory (and
   * the kubelet's links in /var/log/containers). Safe to call more than once.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#teardown();
    return this.#stopping;
  }

  /** Same as {@link stop}. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  async #ctr(args: string[]): Promise<string> {
    return await run("ctr", ["--address", this.containerdSocket, "-n", "k8s.io", ...args]);
  }

  async #boot(plane: NodeControlPlane, nodeIp: string, deadline: number): Promise<void> {
    const dir = this.#dir;
    const signal = this.#options.signal;
    this.#watchdog = await spawnWatchdog(this.#runDir, dir);
    const paths: NodePaths = {
      dir,
      socket: this.containerdSocket,
      cniBinDir: (await cniBinDir()) ?? CNI_BIN_DIRS[0]!,
    };
    await Deno.mkdir(`${dir}/cni`);
    await Deno.writeTextFile(`${dir}/cni/10-loopback.conflist`, CNI_CONFLIST);
    await Deno.writeTextFile(`${dir}/containerd.toml`, containerdConfig(paths));
    await Deno.writeTextFile(`${dir}/kubelet.yaml`, kubeletConfig(paths, nodeIp));
    await Deno.writeTextFile(`${dir}/ca.crt`, plane.caPem);
    await Deno.writeTextFile(
      `${dir}/node.kubeconfig`,
      nodeKubeconfig(plane.server, plane.caPem, plane.adminCertPem, plane.adminKeyPem),
      { mode: 0o600 },
    );
    const binDir = this.#options.binDir ?? defaultBinDir();
    const containerd = await this.#spawn("containerd", "containerd", [
      `--config=${dir}/containerd.toml`,
    ]);
    await waitUntil("containerd", deadline, signal, [containerd], async () => {
      await this.#ctr(["version"]);
      return true;
    });
    const archive = await writeImageArchive({
      name: PAUSE_IMAGE,
      layers: [[{ path: "pause", type: "file", mode: 0o755, data: await pauseBinary() }]],
      config: { entrypoint: ["/pause"], user: "65535:65535" },
    });
    await Deno.writeFile(`${dir}/pause.oci.tar`, archive.bytes);
    await this.importImage(`${dir}/pause.oci.tar`);
    await this.#spawn("kube-scheduler", `${binDir}/kube-scheduler`, [
      `--kubeconfig=${dir}/node.kubeconfig`,
      "--leader-elect=false",
      "--secure-port=0",
      "--profiling=false",
    ]);
    await this.#spawn("kubelet", `${binDir}/kubelet`, [
      `--config=${dir}/kubelet.yaml`,
      `--kubeconfig=${dir}/node.kubeconfig`,
      `--root-dir=${dir}/kubelet`,
      `--cert-dir=${dir}/kubelet-pki`,
      `--hostname-override=${this.#name}`,
      `--node-ip=${nodeIp}`,
    ]);
    const http = Deno.createHttpClient({
      caCerts: [plane.caPem],
      cert: plane.adminCertPem,
      key: plane.adminKeyPem,
    });
    try {
      await waitUntil("the Node to be Ready", deadline, signal, this.#components, async () => {
        const response = await fetch(`${plane.server}/api/v1/nodes/${this.#name}`, {
          client: http,
          signal: AbortSignal.timeout(5_000),
        });
        if (!response.ok) {
          await response.body?.cancel();
          return false;
        }
        const body = await response.json() as {
          status?: { conditions?: { type: string; status: string }[] };
        };
        return body.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ??
          false;
      });
    } finally {
      http.close();
    }
  }

  #spawn(
    name: "containerd" | "kube-scheduler" | "kubelet",
    binary: string,
    args: string[],
  ): Promise<Component> {
    return spawnComponent(this.#components, this.#dir, this.#runDir, name, binary, args);
  }

  async #teardown(): Promise<void> {
    const grace = this.#options.stopGraceMs ?? 5_000;
    const byName = (name: string) => this.#components.filter((c) => c.name === name);
    // The kubelet first, so that it restarts nothing; then every container, while containerd
    // still runs (its shims exit with their tasks), then containerd.
    await Promise.all(
      [...byName("kubelet"), ...byName("kube-scheduler")].map((c) => terminate(c, grace)),
    );
    if (byName("containerd").some((c) => !c.status)) await this.#removeContainers();
    await Promise.all(byName("containerd").map((c) => terminate(c, grace)));
    await killWatchdog(this.#watchdog);
    this.#stopped = true;
    unregister(this);
    await unmountUnder(this.#dir);
    await removePodLogLinks(this.#dir);
    await removeQuietly(this.#dir);
    await removeQuietly(this.#runDir);
  }

  async #removeContainers(): Promise<void> {
    let ids: string[] = [];
    try {
      ids = (await this.#ctr(["containers", "list", "-q"])).split("\n").filter(Boolean);
    } catch { /* containerd is gone: nothing to ask */ }
    await Promise.all(ids.map(async (id) => {
      await this.#ctr(["tasks", "kill", "--all", "--signal", "SIGKILL", id]).catch(() => {});
      for (let attempt = 0; attempt < 20; attempt++) {
        try {
          await this.#ctr(["tasks", "delete", "--force", id]);
          break;
        } catch (error) {
          if (/not found/i.test(String(error))) break;
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
      await this.#ctr(["containers", "delete", id]).catch(() => {});
    }));
  }

  /** Synchronous last resort for `unload`: SIGKILL the processes. */
  #killNowSync(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    unregister(this);
    for (const component of this.#components) {
      if (!component.status) trySignal(component.child, "SIGKILL");
    }
  }
}

/** Unmounts everything mounted at or below `dir`, deepest first. */
async function unmountUnder(dir: string): Promise<void> {
  let table = "";
  try {
    table = await Deno.readTextFile("/proc/self/mountinfo");
  } catch {
    return;
  }
  const points = table.split("\n")
    .map((line) => line.split(" ")[4]?.replace(/\\040/g, " "))
    .filter((point): point is string => !!point && (point === dir || point.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
  for (const point of points) {
    await new Deno.Command("umount", { args: ["--lazy", point], stdout: "null", stderr: "null" })
      .output().catch(() => {});
  }
}

/** The kubelet links each container's log into /var/log/containers: remove ours. */
async function removePodLogLinks(dir: string): Promise<void> {
  const links = "/var/log/containers";
  try {
    for await (const entry of Deno.readDir(links)) {
      if (!entry.isSymlink) continue;
      const target = await Deno.readLink(`${links}/${entry.name}`).catch(() => "");
      if (target.startsWith(`${dir}/`)) await Deno.remove(`${links}/${entry.name}`).catch(() => {});
    }
  } catch { /* no such directory */ }
}
