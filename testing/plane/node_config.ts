/**
 * The test node's configuration files: containerd's (everything under the node's directory, the
 * OOM score restricted), the kubelet's (cgroup v1 allowed, no QoS cgroups, no swap check, pod
 * logs under the node's directory), a loopback-only CNI configuration, the kubeconfig of the
 * kubelet and the scheduler, and the sandbox (`pause`) program. Used by `./node.ts`.
 * @module
 */

import { base64 } from "./etcd.ts";
import { CONTEXT } from "./pki.ts";

/** The name of the sandbox image; `.invalid` so that nothing can ever try to pull it. */
export const PAUSE_IMAGE = "kopf-ts.invalid/pause:1";

/** Where the node's files go, all under one directory. */
export interface NodePaths {
  /** The node's directory. */
  readonly dir: string;
  /** containerd's gRPC socket. */
  readonly socket: string;
  /** The CNI plugins (Debian: /usr/lib/cni). */
  readonly cniBinDir: string;
}

/**
 * containerd's configuration (version 2): root, state, sockets, runc's state and the CNI
 * configuration under the node's directory; the CRI plugin's OOM score restricted (the sandbox
 * has no CAP_SYS_RESOURCE for the pause container's negative score); runc with cgroupfs.
 *
 * @param paths The node's paths.
 * @returns The TOML text.
 */
export function containerdConfig(paths: NodePaths): string {
  const { dir, socket, cniBinDir } = paths;
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return [
    "version = 2",
    `root = "${dir}/containerd/root"`,
    `state = "${dir}/containerd/state"`,
    "disabled_plugins = [",
    '  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",',
    '  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",',
    '  "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp",',
    "]",
    "[grpc]",
    `  address = "${socket}"`,
    "[ttrpc]",
    `  address = "${socket}.ttrpc"`,
    `[${cri}]`,
    `  sandbox_image = "${PAUSE_IMAGE}"`,
    "  restrict_oom_score_adj = true",
    '  stream_server_address = "127.0.0.1"',
    `[${cri}.cni]`,
    `  bin_dir = "${cniBinDir}"`,
    `  conf_dir = "${dir}/cni"`,
    `[${cri}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `[${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `[${cri}.containerd.runtimes.runc.options]`,
    "  SystemdCgroup = false",
    `  Root = "${dir}/runc"`,
    "",
  ].join("\n");
}

/** The loopback-only CNI configuration: enough for hostNetwork Pods and a Ready node. */
export const CNI_CONFLIST = JSON.stringify({
  cniVersion: "1.0.0",
  name: "kopf-ts-loopback",
  plugins: [{ type: "loopback" }],
});

/**
 * The kubelet's configuration: cgroup v1 allowed (`failCgroupV1: false`), cgroupfs, no QoS
 * cgroups and no node-allocatable enforcement, swap tolerated, anonymous access off, pod logs
 * under the node's directory, no read-only port, no eviction by disk usage (the test machine's
 * disk is shared).
 *
 * @param paths The node's paths.
 * @param nodeIp The address the kubelet serves on.
 * @returns The YAML text.
 */
export function kubeletConfig(paths: NodePaths, nodeIp: string): string {
  return JSON.stringify(
    {
      apiVersion: "kubelet.config.k8s.io/v1beta1",
      kind: "KubeletConfiguration",
      failCgroupV1: false,
      cgroupDriver: "cgroupfs",
      cgroupsPerQOS: false,
      enforceNodeAllocatable: [],
      failSwapOn: false,
      containerRuntimeEndpoint: `unix://${paths.socket}`,
      podLogsDir: `${paths.dir}/pod-logs`,
      address: nodeIp,
      readOnlyPort: 0,
      healthzBindAddress: "127.0.0.1",
      healthzPort: 0,
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: false },
        x509: { clientCAFile: `${paths.dir}/ca.crt` },
      },
      authorization: { mode: "AlwaysAllow" },
      evictionHard: {
        "memory.available": "1Mi",
        "nodefs.available": "1%",
        "imagefs.available": "1%",
      },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      nodeStatusUpdateFrequency: "2s",
      syncFrequency: "5s",
      fileCheckFrequency: "5s",
      shutdownGracePeriod: "0s",
      resolvConf: "",
      serializeImagePulls: false,
    },
    null,
    2,
  );
}

/**
 * A kubeconfig with the admin's client certificate inline, for the kubelet and the scheduler.
 *
 * @param server The API server's URL.
 * @param caPem The CA.
 * @param certPem The client certificate.
 * @param keyPem Its key.
 * @returns The YAML text.
 */
export function nodeKubeconfig(
  server: string,
  caPem: string,
  certPem: string,
  keyPem: string,
): string {
  return JSON.stringify(
    {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{
        name: CONTEXT,
        cluster: { server, "certificate-authority-data": base64(caPem) },
      }],
      users: [{
        name: CONTEXT,
        user: {
          "client-certificate-data": base64(certPem),
          "client-key-data": base64(keyPem),
        },
      }],
      contexts: [{ name: CONTEXT, context: { cluster: CONTEXT, user: CONTEXT } }],
      "current-context": CONTEXT,
    },
    null,
    2,
  );
}

/**
 * The sandbox's program, compiled statically with the C compiler: it sleeps, reaps the children
 * it inherits, and exits on SIGINT/SIGTERM — what Kubernetes' `pause` does.
 */
export const PAUSE_C = `#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) { (void)signo; _exit(0); }
static void reap(int signo) { (void)signo; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction action = {0};
  action.sa_handler = stop;
  sigaction(SIGINT, &action, NULL);
  sigaction(SIGTERM, &action, NULL);
  action.sa_handler = reap;
  action.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &action, NULL);
  for (;;) pause();
}
`;
