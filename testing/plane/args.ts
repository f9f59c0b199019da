/**
 * The command lines of the control plane's components: etcd, kube-apiserver and
 * kube-controller-manager, all on 127.0.0.1, with the files that `./pki.ts` writes under
 * `<dir>/pki`. Used by `../control_plane.ts`.
 * @module
 */

import type { ControlPlaneOptions } from "../control_plane.ts";

/**
 * etcd's flags: a single member with its data under `<dir>/etcd`, no fsync (test data is
 * throw-away, and fsync dominates etcd's latency).
 *
 * @param dir The plane's directory.
 * @param clientUrl The client URL, `http://127.0.0.1:<port>`.
 * @param peerUrl The peer URL, `http://127.0.0.1:<port>`.
 * @returns The flags.
 */
export function etcdArgs(dir: string, clientUrl: string, peerUrl: string): string[] {
  return [
    "--name=kopf-ts",
    `--data-dir=${dir}/etcd`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=kopf-ts=${peerUrl}`,
    "--initial-cluster-state=new",
    "--unsafe-no-fsync=true",
    "--log-level=warn",
  ];
}

/** Where and how kube-apiserver runs, for {@link apiServerArgs}. */
export interface ApiServerSetup {
  /** The plane's directory (certificates under `<dir>/pki`). */
  readonly dir: string;
  /** The secure port on 127.0.0.1. */
  readonly port: number;
  /** The server's own URL, `https://127.0.0.1:<port>` (the service-account issuer). */
  readonly server: string;
  /** etcd's client URL. */
  readonly etcdUrl: string;
  /** Whether kube-controller-manager runs (else the ServiceAccount admission is disabled). */
  readonly withKcm: boolean;
  /** The plane's options: watch cache, feature gates, extra flags. */
  readonly options: ControlPlaneOptions;
}

/**
 * kube-apiserver's flags: token and client-certificate authentication, RBAC, no priority and
 * fairness or inflight limits (tests are never throttled), then the watch cache, the feature
 * gates and the caller's `apiServerArgs` last, so that those override ours.
 *
 * @param setup Directory, port, URLs and options.
 * @returns The flags.
 */
export function apiServerArgs(setup: ApiServerSetup): string[] {
  const { dir, port, server, etcdUrl, withKcm, options } = setup;
  return [
    `--etcd-servers=${etcdUrl}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${dir}/pki`,
    `--tls-cert-file=${dir}/pki/apiserver.crt`,
    `--tls-private-key-file=${dir}/pki/apiserver.key`,
    `--client-ca-file=${dir}/pki/ca.crt`,
    `--token-auth-file=${dir}/pki/tokens.csv`,
    "--authorization-mode=RBAC",
    `--service-account-issuer=${server}`,
    `--service-account-key-file=${dir}/pki/sa.pub`,
    `--service-account-signing-key-file=${dir}/pki/sa.key`,
    "--service-cluster-ip-range=10.0.0.0/24",
    "--allow-privileged=true",
    "--endpoint-reconciler-type=none",
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=0",
    "--max-mutating-requests-inflight=0",
    "--profiling=false",
    ...watchCacheArgs(options),
    featureGatesArg(options),
    ...(withKcm ? [] : ["--disable-admission-plugins=ServiceAccount"]),
    ...(options.apiServerArgs ?? []),
  ];
}

/**
 * kube-controller-manager's flags: no leader election (one instance), the admin kubeconfig at
 * `<dir>/kcm.kubeconfig`, the CA for signing CSRs, then the caller's `controllerManagerArgs`.
 *
 * @param dir The plane's directory.
 * @param options The plane's options: controllers and extra flags.
 * @returns The flags.
 */
export function controllerManagerArgs(dir: string, options: ControlPlaneOptions): string[] {
  return [
    `--kubeconfig=${dir}/kcm.kubeconfig`,
    "--leader-elect=false",
    `--controllers=${(options.controllers ?? ["*"]).join(",")}`,
    "--use-service-account-credentials=false",
    `--service-account-private-key-file=${dir}/pki/sa.key`,
    `--root-ca-file=${dir}/pki/ca.crt`,
    `--cluster-signing-cert-file=${dir}/pki/ca.crt`,
    `--cluster-signing-key-file=${dir}/pki/ca.key`,
    "--bind-address=127.0.0.1",
    "--secure-port=0",
    "--profiling=false",
    ...(options.controllerManagerArgs ?? []),
  ];
}

/**
 * The watch-cache flags: on by default, with the `uncachedResources` given a cache size of 0
 * so that their watches are served from etcd (and see compaction).
 *
 * @param options The plane's options.
 * @returns The flags.
 */
export function watchCacheArgs(options: ControlPlaneOptions): string[] {
  if (options.watchCache === false) return ["--watch-cache=false"];
  const uncached = options.uncachedResources ?? ["podtemplates"];
  return uncached.length > 0
    ? ["--watch-cache=true", `--watch-cache-sizes=${uncached.map((r) => `${r}#0`).join(",")}`]
    : ["--watch-cache=true"];
}

/**
 * The `--feature-gates` flag: `ShardedListAndWatch` on, the caller's `featureGates` over it.
 *
 * @param options The plane's options.
 * @returns The flag.
 */
export function featureGatesArg(options: ControlPlaneOptions): string {
  const gates = { ShardedListAndWatch: true, ...options.featureGates };
  return `--feature-gates=${Object.entries(gates).map(([k, v]) => `${k}=${v}`).join(",")}`;
}
