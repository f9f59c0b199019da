/**
 * Object operations on resources: get, paginated list, create, merge/JSON patch (of objects
 * and subresources), replace, delete with preconditions, and opening raw watch streams.
 *
 * Every operation goes through {@link HttpClient}, which retries and counts. The higher-level
 * list+watch loop lives in `watching.ts`; Events in `events.ts`; discovery in `discovery.ts`.
 * @module
 */

import type { KubeList, KubeObject } from "../structs/objects.ts";
import { type Resource, resourcePath } from "../structs/resources.ts";
import type { KubeObjectLike, ObjectOf, TYPED } from "../structs/typed.ts";
import type { HttpClient } from "./http.ts";
import type { ByteStream } from "./raw_stream.ts";

/**
 * The resource fields needed to build paths. A typed resource constant from
 * `kopf generate types` (`Widgets`) is one too, and types the objects of the calls.
 */
export type ResourceRef = Pick<Resource, "group" | "version" | "plural" | "namespaced">;

/**
 * The type of the objects a call returns: `T` when given explicitly (`get<Lease>(…)`), else
 * the object type of a typed resource constant (`get(Widgets, …)` → `Widget`), else
 * {@link KubeObject}.
 */
export type ResultOf<T, R> = [T] extends [never] ? ObjectOf<R> : T;

/**
 * The type of the bodies a call accepts: the object type of a typed resource constant (a
 * misspelt field is a type error), else any object, typed or not.
 */
export type BodyFor<R> = R extends { readonly [TYPED]?: infer O }
  ? unknown extends O ? KubeObjectLike : O extends object ? O : KubeObjectLike
  : KubeObjectLike;

/** Options shared by all calls. */
export interface CallOptions {
  /** Namespace of the object(s); ignored for cluster-scoped resources. */
  readonly namespace?: string | undefined;
  /** Cancels the call. */
  readonly signal?: AbortSignal | undefined;
}

/** Options of {@link KubeApi.list}. */
export interface ListOptions extends CallOptions {
  /** Server-side label selector, e.g. `app=x,tier!=db`. */
  readonly labelSelector?: string | undefined;
  /** Server-side field selector, e.g. `metadata.name=x`. */
  readonly fieldSelector?: string | undefined;
  /** Server-side shard selector (Kubernetes 1.36+, gate `ShardedListAndWatch`); see structs/shards.ts. */
  readonly shardSelector?: string | undefined;
  /** Page size; pages are fetched until the list is complete. @default 500 */
  readonly limit?: number | undefined;
}

/** Options of {@link KubeApi.watch}. */
export interface WatchOptions extends CallOptions {
  /** Resume from this resourceVersion; `undefined` starts with synthetic ADDED events. */
  readonly resourceVersion?: string | undefined;
  /** Server-side label selector. */
  readonly labelSelector?: string | undefined;
  /** Server-side field selector. */
  readonly fieldSelector?: string | undefined;
  /** Server-side shard selector (ignored by servers without sharded watches). */
  readonly shardSelector?: string | undefined;
  /** Ask the server for BOOKMARK events. @default true */
  readonly allowBookmarks?: boolean | undefined;
  /**
   * Stream the existing objects as ADDED events first, ended by a BOOKMARK annotated
   * `k8s.io/initial-events-end` (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`;
   * Kubernetes' streaming lists); instead of `resourceVersion`.
   */
  readonly sendInitialEvents?: boolean | undefined;
  /** Server closes the stream after this many seconds. */
  readonly timeoutSeconds?: number | undefined;
  /**
   * Longest wait for the response headers, in milliseconds; unset: the client's connect
   * timeout, else its request timeout (as Kopf falls back).
   */
  readonly connectTimeoutMs?: number | undefined;
}

/** The patch flavours the API server accepts. */
export type PatchType = "merge" | "json" | "strategic";

const PATCH_CONTENT: Readonly<Record<PatchType, string>> = {
  merge: "application/merge-patch+json",
  json: "application/json-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

/** Options of {@link KubeApi.patch}. */
export interface PatchOptions extends CallOptions {
  /** Patch flavour. @default "merge" */
  readonly type?: PatchType | undefined;
  /** Subresource to patch, e.g. `status`. */
  readonly subresource?: string | undefined;
}

/** Options of {@link KubeApi.delete}. */
export interface DeleteOptions extends CallOptions {
  /** `Orphan`, `Background` or `Foreground`. */
  readonly propagationPolicy?: "Orphan" | "Background" | "Foreground" | undefined;
  /** Delete only if the object still has this uid / resourceVersion. */
  readonly preconditions?: { uid?: string; resourceVersion?: string } | undefined;
  /** Grace period in seconds. */
  readonly gracePeriodSeconds?: number | undefined;
}

/** Object operations over one {@link HttpClient}. */
export class KubeApi {
  /** The HTTP funnel (counters, connection). */
  readonly http: HttpClient;

  /**
   * Creates the object operations over an HTTP funnel.
   *
   * @param http The HTTP funnel to send requests through.
   */
  constructor(http: HttpClient) {
    this.http = http;
  }

  /**
   * Reads one object.
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The object's resource.
   * @param name The object's name.
   * @param options Namespace and signal.
   * @returns The object.
   * @throws {ApiError} 404 NotFound when it does not exist.
   */
  get<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    name: string,
    options: CallOptions = {},
  ): Promise<ResultOf<NoInfer<T>, R>> {
    const path = resourcePath(resource, { namespace: options.namespace, name });
    return this.http.json<ResultOf<T, R>>({ path, signal: options.signal });
  }

  /**
   * Yields the pages of a list, following `continue` tokens until the list is complete.
   * If a continue token expires (410) mid-way, the error propagates: callers relist.
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The resource to list.
   * @param options Namespace, selectors, page size and signal.
   * @returns The pages, each with its items (never `undefined`) and list metadata.
   * @throws {ApiError} as the server answers, e.g. 410 Gone for an expired continue token.
   */
  async *listPages<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    options: ListOptions = {},
  ): AsyncGenerator<KubeList<ResultOf<NoInfer<T>, R>>> {
    const path = resourcePath(resource, { namespace: options.namespace });
    let token: string | undefined;
    do {
      const page = await this.http.json<KubeList<ResultOf<T, R>>>({
        path,
        signal: options.signal,
        query: {
          limit: options.limit ?? 500,
          continue: token,
          labelSelector: options.labelSelector,
          fieldSelector: options.fieldSelector,
          shardSelector: options.shardSelector,
        },
      });
      page.items ??= [];
      yield page;
      token = page.metadata?.continue || undefined;
    } while (token);
  }

  /**
   * Lists all objects (all pages) as one consistent snapshot.
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The resource to list.
   * @param options Namespace, selectors, page size and signal.
   * @returns Every item and the resourceVersion of the snapshot (to start a watch from).
   */
  async list<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    options: ListOptions = {},
  ): Promise<{ items: ResultOf<NoInfer<T>, R>[]; resourceVersion: string }> {
    const items: ResultOf<T, R>[] = [];
    let resourceVersion = "";
    for await (const page of this.listPages<T, R>(resource, options)) {
      items.push(...page.items);
      resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    }
    return { items, resourceVersion };
  }

  /**
   * Creates an object.
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The object's resource.
   * @param body The object; its `metadata.namespace` is used when no namespace is given.
   * @param options Namespace and signal.
   * @returns The object as stored.
   * @throws {ApiError} 409 AlreadyExists, 422 Invalid, …
   */
  create<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    body: BodyFor<R>,
    options: CallOptions & { readonly backoffDelaysMs?: readonly number[] | undefined } = {},
  ): Promise<ResultOf<NoInfer<T>, R>> {
    const namespace = options.namespace ?? (body as KubeObject).metadata?.namespace;
    const path = resourcePath(resource, { namespace });
    return this.http.json<ResultOf<T, R>>({
      method: "POST",
      path,
      body,
      signal: options.signal,
      ...(options.backoffDelaysMs ? { backoffDelaysMs: options.backoffDelaysMs } : {}),
    });
  }

  /**
   * Replaces an object (PUT); the body's resourceVersion makes it conditional.
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The object's resource.
   * @param name The object's name.
   * @param body The whole new object.
   * @param options Namespace, subresource and signal.
   * @returns The object as stored.
   * @throws {ApiError} 409 Conflict when the resourceVersion is outdated.
   */
  replace<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    name: string,
    body: BodyFor<R>,
    options: CallOptions & { subresource?: string } = {},
  ): Promise<ResultOf<NoInfer<T>, R>> {
    const namespace = options.namespace ?? (body as KubeObject).metadata?.namespace;
    const path = resourcePath(resource, { namespace, name, subresource: options.subresource });
    return this.http.json<ResultOf<T, R>>({ method: "PUT", path, body, signal: options.signal });
  }

  /**
   * Patches an object or its subresource with a merge patch (default), a JSON patch or a
   * strategic merge patch (built-in resources only).
   *
   * @typeParam T The objects' type when given explicitly (`get<Lease>(…)`); else inferred.
   * @typeParam R The resource reference; a typed resource constant types the objects.
   * @param resource The object's resource.
   * @param name The object's name.
   * @param patch The patch body, as the chosen patch type expects it.
   * @param options Patch type, subresource, namespace and signal.
   * @returns The object as stored after the patch.
   * @throws {ApiError} 404 NotFound, 422 Invalid (e.g. a failed JSON-patch `test`), …
   */
  patch<T extends KubeObjectLike = never, R extends ResourceRef = ResourceRef>(
    resource: R,
    name: string,
    patch: unknown,
    options: PatchOptions = {},
  ): Promise<ResultOf<NoInfer<T>, R>> {
    const path = resourcePath(resource, {
      namespace: options.namespace,
      name,
      subresource: options.subresource,
    });
    const contentType = PATCH_CONTENT[options.type ?? "merge"];
    return this.http.json<ResultOf<T, R>>({
      method: "PATCH",
      path,
      body: patch,
      contentType,
      signal: options.signal,
    });
  }

  /**
   * Deletes an object. With finalizers present, the object stays (with a deletionTimestamp)
   * and the answer is the object; otherwise a `Status`.
   *
   * @param resource The object's resource.
   * @param name The object's name.
   * @param options Namespace, propagation policy, preconditions, grace period and signal.
   * @returns The object (still being finalized) or the server's `Status`.
   * @throws {ApiError} 404 NotFound, 409 Conflict when a precondition fails, …
   */
  delete(resource: ResourceRef, name: string, options: DeleteOptions = {}): Promise<KubeObject> {
    const path = resourcePath(resource, { namespace: options.namespace, name });
    const body = {
      apiVersion: "v1",
      kind: "DeleteOptions",
      ...(options.propagationPolicy ? { propagationPolicy: options.propagationPolicy } : {}),
      ...(options.preconditions ? { preconditions: options.preconditions } : {}),
      ...(options.gracePeriodSeconds !== undefined
        ? { gracePeriodSeconds: options.gracePeriodSeconds }
        : {}),
    };
    return this.http.json<KubeObject>({ method: "DELETE", path, body, signal: options.signal });
  }

  /**
   * Opens a raw watch stream (newline-delimited JSON events). Not retried here: the watch loop
   * in `watching.ts` decides how to resume. No client-side request timeout applies.
   *
   * @param resource The resource to watch.
   * @param options Namespace, resourceVersion, selectors, bookmarks, server timeout and signal.
   * @returns The response with its body unread.
   * @throws {ApiError} when the server refuses the watch (e.g. 410 Gone for an old version).
   * @throws {TransportError} when the server cannot be reached.
   */
  watch(resource: ResourceRef, options: WatchOptions = {}): Promise<Response> {
    const path = resourcePath(resource, { namespace: options.namespace });
    return this.http.send({
      path,
      signal: options.signal,
      retries: 0,
      timeoutMs: 0,
      ...(options.connectTimeoutMs !== undefined
        ? { connectTimeoutMs: options.connectTimeoutMs }
        : {}),
      stream: true,
      query: {
        watch: true,
        resourceVersion: options.resourceVersion,
        ...(options.sendInitialEvents
          ? { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan" }
          : {}),
        allowWatchBookmarks: options.allowBookmarks ?? true,
        timeoutSeconds: options.timeoutSeconds,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        shardSelector: options.shardSelector,
      },
    });
  }
  /**
   * Opens a watch stream like {@link KubeApi.watch}, but returns the body as bytes, read from
   * a connection of its own with little overhead per event (see `HttpClient.openStream`).
   *
   * @param resource The resource to watch.
   * @param options Namespace, resourceVersion, selectors, bookmarks, server timeout and signal.
   * @returns The body (newline-delimited JSON events); close it when done.
   * @throws {ApiError} when the server refuses the watch (e.g. 410 Gone for an old version).
   * @throws {TransportError} when the server cannot be reached.
   */
  watchBytes(resource: ResourceRef, options: WatchOptions = {}): Promise<ByteStream> {
    const path = resourcePath(resource, { namespace: options.namespace });
    return this.http.openStream({
      path,
      signal: options.signal,
      retries: 0,
      timeoutMs: 0,
      ...(options.connectTimeoutMs !== undefined
        ? { connectTimeoutMs: options.connectTimeoutMs }
        : {}),
      stream: true,
      query: {
        watch: true,
        resourceVersion: options.resourceVersion,
        ...(options.sendInitialEvents
          ? { sendInitialEvents: true, resourceVersionMatch: "NotOlderThan" }
          : {}),
        allowWatchBookmarks: options.allowBookmarks ?? true,
        timeoutSeconds: options.timeoutSeconds,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        shardSelector: options.shardSelector,
      },
    });
  }
}
