/**
 * Server-side apply: `PATCH` with `application/apply-patch+yaml`, the way level-based controllers
 * own their fields. The caller states the fields it wants (an "applied configuration"); the API
 * server merges them, records the field manager as their owner, removes fields the same manager
 * applied before and no longer states, and refuses (409) to take fields another manager owns with
 * a different value unless `force` is given.
 *
 * The body is sent as JSON, which is valid YAML. Conflicts become an {@link ApplyConflictError}
 * listing each conflicting field and its owner.
 * @module
 */

import type { KubeObjectLike } from "../structs/typed.ts";
import { resourcePath } from "../structs/resources.ts";
import type { KubeApi, ResourceRef, ResultOf } from "./api.ts";
import { ApiError } from "./errors.ts";

/** The content type of server-side apply patches. */
export const APPLY_PATCH_CONTENT = "application/apply-patch+yaml";

/** Options of {@link applyObject}. */
export interface ApplyOptions {
  /** Who owns the applied fields, e.g. the operator's name. Required by the API server. */
  readonly fieldManager: string;
  /** Take over fields other managers own instead of failing with a conflict. @default false */
  readonly force?: boolean | undefined;
  /** Apply to a subresource, e.g. `status`. */
  readonly subresource?: string | undefined;
  /** Namespace (default: the object's `metadata.namespace`). */
  readonly namespace?: string | undefined;
  /** Cancels the request. */
  readonly signal?: AbortSignal | undefined;
}

/** One field another manager owns, as the API server reports an apply conflict. */
export interface ApplyConflict {
  /** The field path, e.g. `.data.key` or `.spec.replicas`. */
  readonly field: string;
  /** The server's message, naming the owning manager. */
  readonly message: string;
}

/**
 * A server-side apply was refused because other field managers own some of the fields with
 * different values. Apply with `force: true` to take them over, or stop stating those fields.
 */
export class ApplyConflictError extends ApiError {
  /** The conflicting fields. */
  readonly conflicts: readonly ApplyConflict[];

  /**
   * Wraps the API server's 409 answer to an apply.
   *
   * @param error The 409 answer.
   */
  constructor(error: ApiError) {
    super({
      code: error.code,
      reason: error.reason,
      message: `${error.serverMessage}; apply with force to take the fields over`,
      details: error.details,
      request: error.request,
    });
    this.name = "ApplyConflictError";
    this.conflicts = (error.details?.causes ?? []).map((cause) => ({
      field: cause.field ?? "",
      message: cause.message ?? "",
    }));
  }
}

/**
 * Applies an object (server-side apply): creates it if missing, else merges the stated fields
 * and makes `fieldManager` their owner.
 *
 * @typeParam T The object's type when given explicitly; else inferred from a typed resource.
 * @typeParam R The resource reference; a typed resource constant types the result.
 * @param api Object operations.
 * @param resource The object's resource.
 * @param body The applied configuration: `apiVersion`, `kind`, `metadata.name` and the fields
 *   to own; no `resourceVersion` needed.
 * @param options The field manager, force, subresource, namespace and signal.
 * @returns The object as stored.
 * @throws {TypeError} when the body has no `metadata.name` or no field manager is given.
 * @throws {ApplyConflictError} when other managers own stated fields (and `force` is not set).
 * @throws {ApiError} for other refusals (422 Invalid, 404 for a subresource of a missing object…).
 * @example Applying a ConfigMap
 * ```ts ignore
 * await applyObject(client.api, CONFIGMAPS, {
 *   apiVersion: "v1", kind: "ConfigMap",
 *   metadata: { name: "settings", namespace: "default" },
 *   data: { mode: "fast" },
 * }, { fieldManager: "my-operator" });
 * ```
 */
export async function applyObject<
  T extends KubeObjectLike = never,
  R extends ResourceRef = ResourceRef,
>(
  api: KubeApi,
  resource: R,
  body: KubeObjectLike,
  options: ApplyOptions,
): Promise<ResultOf<NoInfer<T>, R>> {
  const name = body.metadata?.name;
  if (!name) throw new TypeError("Server-side apply needs metadata.name in the applied object");
  if (!options.fieldManager) {
    throw new TypeError("Server-side apply needs a fieldManager (e.g. the operator's name)");
  }
  const path = resourcePath(resource, {
    namespace: options.namespace ?? body.metadata?.namespace,
    name,
    subresource: options.subresource,
  });
  try {
    return await api.http.json<ResultOf<NoInfer<T>, R>>({
      method: "PATCH",
      path,
      body,
      contentType: APPLY_PATCH_CONTENT,
      query: { fieldManager: options.fieldManager, force: options.force ? true : undefined },
      signal: options.signal,
    });
  } catch (error) {
    if (error instanceof ApiError && error.code === 409) throw new ApplyConflictError(error);
    throw error;
  }
}
