/**
 * Applying a cycle's single patch to the API server.
 *
 * Normally one request: a merge patch of the object (with status in it), or a JSON patch for
 * finalizer changes. Only when the resource has a `status` subresource does status go in a
 * second request to `/status`, and only if there is status to write. When finalizer operations
 * and other changes meet in one cycle, the other changes are expressed as JSON-patch operations
 * against the last seen object, so it stays one request; the `test` operations make a concurrent
 * change fail the request (422), and the next cycle recomputes instead of clobbering anything.
 * Transformation functions (`patch.fns`) go last, as JSON-patch operations against the freshest
 * body (the previous request's response, else the body last seen), guarded by its
 * `resourceVersion` — split between the object and `/status` when status is a subresource; on a
 * conflict the object is re-read and they are applied to it once more.
 * @module
 */

// The package's ES module: its CommonJS entry would start the Node compatibility loader (MiBs).
// @ts-types="fast-json-patch"
import jsonpatch from "fast-json-patch/index.mjs";
import type { KubeApi, ResourceRef } from "../client/api.ts";
import { ApiError } from "../client/errors.ts";
import { type JsonObject, mergeInto } from "../structs/dicts.ts";
import type { Diff } from "../structs/diffs.ts";
import type { KubeObject } from "../structs/objects.ts";
import { inconsistencies, type JsonPatchOp, Patch } from "../structs/patches.ts";
import type { Logger } from "./loggers.ts";

/** What happened when a patch was applied. */
export type Application =
  | { readonly state: "unchanged" }
  | { readonly state: "applied"; readonly body: KubeObject }
  | { readonly state: "gone" }
  | { readonly state: "conflict"; readonly error: ApiError };

/**
 * The API server refused a write for lack of permission (403 Forbidden): which verb on which
 * resource (and subresource) in which namespace, what was written before the refusal, and what
 * is left to write. The writer keeps the remainder and tries again later: when the permission
 * is granted, the work lands (nothing is taken as done meanwhile).
 */
export class WriteRefusedError extends Error {
  /** The API server's answer. */
  readonly error: ApiError;
  /** The refused verb (`patch`). */
  readonly verb: string;
  /** The refused resource as RBAC names it: `plural` or `plural/subresource`. */
  readonly rbacResource: string;
  /** The object as stored after the requests that went through before the refusal, if any. */
  readonly written: KubeObject | undefined;
  /** What is left to write (apply it later with {@link rebasePatch}). */
  readonly remainder: Patch;

  /**
   * Creates the error for a refused request.
   *
   * @param error The 403 answer.
   * @param init What was refused and what is left.
   */
  constructor(error: ApiError, init: {
    readonly resource: ResourceRef;
    readonly subresource: string | undefined;
    readonly namespace: string | undefined;
    readonly written: KubeObject | undefined;
    readonly remainder: Patch;
  }) {
    const plural = init.resource.plural;
    const rbacResource = init.subresource ? `${plural}/${init.subresource}` : plural;
    const group = init.resource.group ? `"${init.resource.group}"` : "core";
    const where = init.namespace ? ` in namespace "${init.namespace}"` : " (cluster-wide)";
    super(
      `Permission missing: patch on ${rbacResource} (API group ${group})${where} — ` +
        `the API server refused to write ${init.subresource ? "the status" : "the object"}` +
        (error.serverMessage ? ` (${error.serverMessage})` : "") +
        `. Grant verb "patch" on resource "${rbacResource}" to the operator's account ` +
        "(kopf generate rbac lists what it needs)",
      { cause: error },
    );
    this.name = "WriteRefusedError";
    this.error = error;
    this.verb = "patch";
    this.rbacResource = rbacResource;
    this.written = init.written;
    this.remainder = init.remainder;
  }
}

/**
 * A patch made applicable to a newer body: its merge part and transformation functions as they
 * are, its finalizer operations recomputed against `fresh` (they are guarded by the list they
 * were computed from).
 *
 * @param patch The patch computed against an older body.
 * @param fresh The newer body.
 * @returns A new patch with the same intent.
 */
export function rebasePatch(patch: Patch, fresh: KubeObject): Patch {
  const rebased = new Patch(patch.body);
  rebased.fns.push(...patch.fns);
  for (const intent of finalizerIntents(patch)) {
    if (intent.add) rebased.addFinalizer(fresh, intent.add);
    else rebased.removeFinalizer(fresh, intent.remove!);
  }
  return rebased;
}

/** Options for {@linkcode applyPatch}. */
export interface ApplyOptions {
  /** Cancels the requests. */
  readonly signal?: AbortSignal | undefined;
  /** Where to warn when the stored object lacks what the patch asked for; no check without it. */
  readonly logger?: Logger | undefined;
  /**
   * Where each request's body is logged at debug level, exactly as sent, in Kopf 1.44's words:
   * "Merge-patching the resource with: …", "JSON-patching the resource with: …", and "… the
   * status with: …" for the `/status` subresource; not logged without it.
   */
  readonly requestLogger?: Logger | undefined;
}

/**
 * Applies a patch; the object being gone (404) is not an error.
 *
 * When a logger is given, the stored object is compared with the merge patch (no extra request:
 * the patch response is the stored object) and mismatches are logged as a warning
 * "Merge-patching finished with inconsistencies: …" (Kopf 1.44's words), with a hint at the CRD schema when `status` fields
 * were dropped.
 *
 * @param api Object operations.
 * @param resource The object's resource (with its subresources).
 * @param body The object as last seen.
 * @param patch The cycle's patch.
 * @param options Cancellation and the logger for the consistency check.
 * @returns The outcome, with the object as stored after the last request.
 */
export async function applyPatch(
  api: KubeApi,
  resource: ResourceRef & { readonly subresources: readonly string[] },
  body: KubeObject,
  patch: Patch,
  options: ApplyOptions = {},
): Promise<Application> {
  const applied = await tryApplying(api, resource, body, patch, options);
  if (applied.state === "applied" && options.logger) {
    const found = inconsistencies(patch.view(), applied.body);
    if (found.length) options.logger.warning(describeInconsistencies(found));
  }
  return applied;
}

/**
 * The warning for a non-empty list of inconsistencies: each path with what was sent and what is
 * stored, then a hint when the mismatch is under `status`.
 * @param found The inconsistencies, `[op, path, sent, stored]`.
 * @returns The message.
 */
export function describeInconsistencies(found: Diff): string {
  const show = (value: unknown): string =>
    value === null || value === undefined ? "absent" : JSON.stringify(value);
  const items = found.map(([, path, sent, stored]) =>
    `${path.join(".")} (sent ${show(sent)}, stored ${show(stored)})`
  );
  let message = `Merge-patching finished with inconsistencies: ${items.join("; ")}.`;
  if (found.some(([, path]) => path[0] === "status")) {
    message += " The API server dropped fields under status: the CRD's schema probably prunes" +
      " them. Declare them in the schema or set `x-kubernetes-preserve-unknown-fields: true`" +
      " on status (or the whole object) in the CRD.";
  }
  return message;
}

async function tryApplying(
  api: KubeApi,
  resource: ResourceRef & { readonly subresources: readonly string[] },
  body: KubeObject,
  patch: Patch,
  options: ApplyOptions,
): Promise<Application> {
  const { signal } = options;
  if (patch.isEmpty) return { state: "unchanged" };
  try {
    return await send(api, resource, body, patch, options);
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return { state: "gone" };
    if (
      !(error instanceof ApiError && (error.code === 409 || error.code === 422) &&
        (patch.jsonOps.length || patch.fns.length))
    ) throw error;
    // The finalizer list changed meanwhile (another controller): re-read the object and apply
    // the same changes once more against it, so the cycle's outcomes are not lost.
    let fresh: KubeObject;
    try {
      fresh = await api.get(resource, body.metadata?.name ?? "", {
        namespace: body.metadata?.namespace,
        signal,
      });
    } catch (again) {
      if (again instanceof ApiError && again.code === 404) return { state: "gone" };
      throw again;
    }
    const retry = rebasePatch(patch, fresh);
    try {
      return await send(api, resource, fresh, retry, options);
    } catch (second) {
      if (second instanceof ApiError && second.code === 404) return { state: "gone" };
      if (second instanceof ApiError && (second.code === 409 || second.code === 422)) {
        return { state: "conflict", error: second };
      }
      throw second;
    }
  }
}

async function send(
  api: KubeApi,
  resource: ResourceRef & { readonly subresources: readonly string[] },
  body: KubeObject,
  patch: Patch,
  options: ApplyOptions,
): Promise<Application> {
  const { signal, requestLogger } = options;
  // Rendering a patch costs more than the rest of logging: only when someone will read it.
  const show = (what: string, sent: unknown): void => {
    if (requestLogger?.isEnabledFor("debug")) {
      requestLogger.debug(`${what}: ${JSON.stringify(sent)}`);
    }
  };
  const statusSubresource = resource.subresources.includes("status");
  const requests = patch.toRequests({ statusSubresource });
  const name = body.metadata?.name ?? "";
  const namespace = body.metadata?.namespace;
  let latest: KubeObject | undefined;
  // A 403 says which permission is missing, and keeps what is left to write.
  const refused = (error: unknown, subresource: string | undefined, remainder: Patch): never => {
    if (!(error instanceof ApiError && error.code === 403)) throw error;
    throw new WriteRefusedError(error, {
      resource,
      subresource,
      namespace,
      written: latest,
      remainder,
    });
  };
  const fnsOnly = () => {
    const rest = new Patch();
    rest.fns.push(...patch.fns);
    return rest;
  };
  try {
    if (requests.json) {
      const ops: JsonPatchOp[] = [...requests.json];
      if (requests.merge) ops.push(...mergeAsJsonOps(body, requests.merge));
      show("JSON-patching the resource with", ops);
      latest = await api.patch(resource, name, ops, { namespace, type: "json", signal });
    } else if (requests.merge) {
      show("Merge-patching the resource with", requests.merge);
      latest = await api.patch(resource, name, requests.merge, { namespace, signal });
    }
  } catch (error) {
    refused(error, undefined, patch);
  }
  if (requests.statusMerge) {
    show("Merge-patching the status with", requests.statusMerge);
    try {
      latest = await api.patch(resource, name, requests.statusMerge, {
        namespace,
        subresource: "status",
        signal,
      });
    } catch (error) {
      const rest = new Patch(requests.statusMerge);
      rest.fns.push(...patch.fns);
      refused(error, "status", rest);
    }
  }
  if (patch.fns.length) {
    const base = (latest ?? body) as JsonObject;
    const ops = patch.fnsAsJsonPatch(base);
    const onStatus = (op: JsonPatchOp) => op.path === "/status" || op.path.startsWith("/status/");
    const parts = statusSubresource
      ? [ops.filter((op) => !onStatus(op)), ops.filter(onStatus)]
      : [ops, []];
    for (const [i, part] of parts.entries()) {
      if (part.length === 0) continue;
      const version = (latest ?? body).metadata?.resourceVersion;
      const guarded: JsonPatchOp[] = version === undefined
        ? part
        : [{ op: "test", path: "/metadata/resourceVersion", value: version }, ...part];
      const subresource = i === 1 ? "status" : undefined;
      show(`JSON-patching the ${subresource ? "status" : "resource"} with`, guarded);
      try {
        latest = await api.patch(resource, name, guarded, {
          namespace,
          type: "json",
          subresource,
          signal,
        });
      } catch (error) {
        refused(error, subresource, fnsOnly());
      }
    }
  }
  return latest ? { state: "applied", body: latest } : { state: "unchanged" };
}

/** What the finalizer operations of a patch intend: names added and removed. */
function finalizerIntents(patch: Patch): Array<{ add?: string; remove?: string }> {
  const intents: Array<{ add?: string; remove?: string }> = [];
  for (const op of patch.jsonOps) {
    if (op.op === "add" && op.path === "/metadata/finalizers") {
      intents.push({ add: (op.value as string[])[0]! });
    } else if (op.op === "add" && op.path === "/metadata/finalizers/-") {
      intents.push({ add: op.value as string });
    } else if (op.op === "test" && /^\/metadata\/finalizers\/\d+$/.test(op.path)) {
      intents.push({ remove: op.value as string });
    }
  }
  return intents;
}

/** JSON-patch operations that have the effect of a merge patch on a known body. */
function mergeAsJsonOps(body: KubeObject, merge: JsonObject): JsonPatchOp[] {
  const before = structuredClone(body) as JsonObject;
  const after = jsonpatch.deepClone(before) as JsonObject;
  mergeInto(after, merge);
  // Finalizers are handled by the explicit (test-guarded) operations only.
  const meta = (after.metadata ?? {}) as JsonObject;
  const beforeMeta = (before.metadata ?? {}) as JsonObject;
  if (beforeMeta.finalizers !== undefined) meta.finalizers = beforeMeta.finalizers;
  else delete meta.finalizers;
  return jsonpatch.compare(before, after) as JsonPatchOp[];
}
