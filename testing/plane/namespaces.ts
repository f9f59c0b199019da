/**
 * Test namespaces on a control plane: one per test, labelled so that leftovers can be found,
 * and deleted with their finalizers waited for (or forced away).
 * @module
 */

import type { ClusterAccess } from "../control_plane.ts";
import { sleep } from "./processes.ts";

export interface ApiResponse {
  readonly status: number;
  readonly text: string;
}

export async function apiRequest(
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
 * import { createTestNamespace, deleteNamespace, sharedControlPlane } from "../control_plane.ts";
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
 * import type { DeleteNamespaceOptions } from "../control_plane.ts";
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
 * import { ControlPlane, createTestNamespace, deleteNamespace } from "../control_plane.ts";
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
