/**
 * etcd's HTTP gateway for tests: compaction (a watch resumed from before it gets 410 Gone), and
 * small decoding helpers shared by the control plane modules.
 * @module
 */

export function base64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function unbase64(data: string): string {
  const binary = atob(data);
  return new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
}

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
 * import { ControlPlane, compactEtcd } from "../control_plane.ts";
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

export async function etcdPost(
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

export function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? value as Record<string, unknown>
    : undefined;
}

export function asString(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}
