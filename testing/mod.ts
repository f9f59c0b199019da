/**
 * Testing tools for operator authors: a real Kubernetes control plane (etcd, kube-apiserver,
 * kube-controller-manager built from source) started on 127.0.0.1 for a test run, like
 * controller-runtime's envtest, with helpers for per-test namespaces.
 *
 * @example One control plane per test run, one namespace per test
 * ```ts ignore
 * import { createTestNamespace, sharedControlPlane } from "@kopf/ts/testing";
 *
 * Deno.test("my operator creates a ConfigMap", async () => {
 *   const plane = await sharedControlPlane();
 *   const namespace = await createTestNamespace(plane, "my-test");
 *   // … run the operator with KUBECONFIG=plane.kubeconfigPath and assert on the cluster …
 * });
 * ```
 *
 * @example One test body on the in-memory emulator and on the real plane
 * ```ts ignore
 * import { backendTest, stopBackends } from "@kopf/ts/testing";
 *
 * backendTest("my operator creates a ConfigMap", async (backend) => {
 *   const namespace = await backend.createNamespace("my-test");
 *   // … run the operator with KUBECONFIG=backend.kubeconfigPath and assert on the API …
 * });
 * Deno.test("stop the test backends", stopBackends);
 * ```
 * @module
 */

export {
  type ClusterAccess,
  compactEtcd,
  ControlPlane,
  type ControlPlaneOptions,
  createTestNamespace,
  deleteNamespace,
  type DeleteNamespaceOptions,
  type SharedControlPlane,
  sharedControlPlane,
} from "./control_plane.ts";
export {
  BACKEND_NAMES,
  type BackendName,
  backendTest,
  type BackendTestOptions,
  selectedBackends,
  stopBackends,
  type TestBackend,
  testBackend,
  withBackend,
} from "./backend.ts";
export { KopfRunner, type RunnerOptions } from "./runner.ts";
