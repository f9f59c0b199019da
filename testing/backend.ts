/**
 * One test body on either Kubernetes API: the in-memory emulator (`@kopf/ts/emulator`: no
 * cluster, started in milliseconds) or the real control plane ({@link sharedControlPlane}: etcd
 * and kube-apiserver). Write the test once against a {@link TestBackend}; run it on the emulator
 * while developing and on the real plane where Kubernetes' own behaviour is what is tested.
 *
 * `KOPF_TS_TEST_BACKEND` picks the backends of {@link backendTest} and {@link selectedBackends}:
 * `emulator`, `plane`, or both comma-separated (the default). Each backend is started once per
 * process and shared by the tests, each test in its own namespace
 * ({@link TestBackend.createNamespace}); {@link stopBackends} stops the emulator at the end.
 *
 * @example The same test on both backends
 * ```ts ignore
 * import { KubeClient, loadKubeconfig } from "@kopf/ts";
 * import { backendTest, stopBackends } from "@kopf/ts/testing";
 *
 * backendTest("a ConfigMap can be created and read", async (backend) => {
 *   using client = new KubeClient(await loadKubeconfig({ paths: [backend.kubeconfigPath] }));
 *   const namespace = await backend.createNamespace("configmaps");
 *   // … create, read, assert …
 * });
 *
 * Deno.test("stop the test backends", stopBackends);
 * ```
 * @module
 */

import type { Emulator } from "../kits/emulator/mod.ts";
import { type ClusterAccess, createTestNamespace, sharedControlPlane } from "./control_plane.ts";

/** A Kubernetes API for tests: the in-memory emulator, or the real control plane. */
export type BackendName = "emulator" | "plane";

/** Every backend, in the order tests run on them. */
export const BACKEND_NAMES: readonly BackendName[] = Object.freeze(["emulator", "plane"]);

/**
 * A running Kubernetes API that a test can use, whichever it is.
 *
 * @example
 * ```ts ignore
 * import { withBackend } from "@kopf/ts/testing";
 *
 * await withBackend("emulator", async (backend) => {
 *   console.log(backend.name, backend.server, backend.kubeconfigPath);
 * });
 * ```
 */
export interface TestBackend extends ClusterAccess {
  /** Which backend this is. */
  readonly name: BackendName;
  /** A kubeconfig whose current context is an administrator of this API. */
  readonly kubeconfigPath: string;
  /**
   * A fresh namespace with a random suffix, e.g. `prefix-a1b2c3d4`.
   * @param prefix The namespace's readable start.
   * @returns The namespace's name.
   */
  createNamespace(prefix?: string): Promise<string>;
  /**
   * Forgets the storage's history up to now: a watch from an older resourceVersion then gets
   * 410 Gone (on the plane only for the resources whose watches etcd serves; see
   * `ControlPlane.compact()`).
   */
  compact(): Promise<void>;
}

let emulator: Promise<Emulator> | undefined;

/**
 * The backend of the given name, started on first use and shared by the process: the emulator
 * in this process, the real plane as {@link sharedControlPlane} finds or starts it.
 *
 * @example
 * ```ts ignore
 * import { testBackend } from "@kopf/ts/testing";
 *
 * const backend = await testBackend("plane");
 * const namespace = await backend.createNamespace("mine");
 * ```
 *
 * @param name `"emulator"` or `"plane"`.
 * @returns The running backend.
 */
export async function testBackend(name: BackendName): Promise<TestBackend> {
  if (name === "emulator") {
    // Loaded only when used: tests on the real plane do not pay for the emulator.
    emulator ??= import("../kits/emulator/mod.ts").then(({ Emulator }) => Emulator.start());
    const api = await emulator;
    return {
      name,
      server: api.server,
      caPem: api.caPem,
      adminToken: api.adminToken,
      kubeconfigPath: api.kubeconfigPath,
      createNamespace: (prefix) => createTestNamespace(api, prefix),
      compact: () => Promise.resolve(api.compact()),
    };
  }
  if (name === "plane") {
    const plane = await sharedControlPlane();
    return {
      name,
      server: plane.server,
      caPem: plane.caPem,
      adminToken: plane.adminToken,
      kubeconfigPath: plane.kubeconfigPath,
      createNamespace: (prefix) => createTestNamespace(plane, prefix),
      compact: () => plane.compact(),
    };
  }
  throw new Error(`Unknown test backend '${name}'; use ${BACKEND_NAMES.join(" or ")}`);
}

/**
 * Runs `fn` with the backend of the given name ({@link testBackend}).
 *
 * @example
 * ```ts ignore
 * import { withBackend } from "@kopf/ts/testing";
 *
 * for (const name of ["emulator", "plane"] as const) {
 *   Deno.test(`[${name}] lists namespaces`, () =>
 *     withBackend(name, async (backend) => {
 *       const namespace = await backend.createNamespace("listing");
 *       // … the same assertions on either backend …
 *     }));
 * }
 * ```
 *
 * @param name `"emulator"` or `"plane"`.
 * @param fn The test body.
 * @returns What `fn` returns.
 */
export async function withBackend<T>(
  name: BackendName,
  fn: (backend: TestBackend) => Promise<T>,
): Promise<T> {
  return await fn(await testBackend(name));
}

/**
 * The backends to run on: from `value` (by default `$KOPF_TS_TEST_BACKEND`), a comma-separated
 * list of backend names; without one, `fallback`.
 *
 * @example
 * ```ts
 * import { selectedBackends } from "./backend.ts";
 *
 * selectedBackends("emulator"); // ["emulator"]
 * selectedBackends("emulator,plane"); // ["emulator", "plane"]
 * ```
 *
 * @param value The selection; empty means `fallback`.
 * @param fallback The backends when nothing is selected. @default both
 * @returns The backend names, in {@link BACKEND_NAMES}' order.
 * @throws {Error} one line naming an unknown backend.
 */
export function selectedBackends(
  value: string | undefined = Deno.env.get("KOPF_TS_TEST_BACKEND"),
  fallback: readonly BackendName[] = BACKEND_NAMES,
): BackendName[] {
  const names = (value ?? "").split(",").map((name) => name.trim()).filter(Boolean);
  if (!names.length) return [...fallback];
  for (const name of names) {
    if (!(BACKEND_NAMES as readonly string[]).includes(name)) {
      throw new Error(
        `KOPF_TS_TEST_BACKEND: unknown backend '${name}'; use ${BACKEND_NAMES.join(", ")} or both`,
      );
    }
  }
  return BACKEND_NAMES.filter((name) => names.includes(name));
}

/** Options of {@link backendTest}. */
export interface BackendTestOptions {
  /** The backends (default: {@link selectedBackends}). */
  readonly backends?: readonly BackendName[];
  /**
   * Deno's test options (sanitizers, `ignore`, `only`…). The sanitizers of operations and
   * resources are off by default: the shared backends outlive a single test.
   */
  readonly test?: Omit<Deno.TestDefinition, "name" | "fn">;
}

/**
 * Registers one `Deno.test` per backend, named `[emulator] NAME` and `[plane] NAME`, each
 * running `fn` with that backend.
 *
 * @example
 * ```ts ignore
 * import { backendTest } from "@kopf/ts/testing";
 *
 * backendTest("a namespace can be made", async (backend) => {
 *   await backend.createNamespace("made");
 * });
 * ```
 *
 * @param name The test's name, after the backend's.
 * @param fn The test body.
 * @param options The backends and Deno's test options.
 */
export function backendTest(
  name: string,
  fn: (backend: TestBackend) => Promise<void>,
  options: BackendTestOptions = {},
): void {
  for (const backend of options.backends ?? selectedBackends()) {
    Deno.test({
      sanitizeOps: false,
      sanitizeResources: false,
      ...options.test,
      name: `[${backend}] ${name}`,
      fn: () => withBackend(backend, fn),
    });
  }
}

/**
 * Stops the emulator if a test started it (the real plane is stopped by whoever started it:
 * the test run, or the process's exit). Call it from a last test of the file.
 *
 * @example
 * ```ts ignore
 * import { stopBackends } from "@kopf/ts/testing";
 *
 * Deno.test("stop the test backends", stopBackends);
 * ```
 */
export async function stopBackends(): Promise<void> {
  const running = emulator;
  emulator = undefined;
  if (running) await (await running).stop();
}
