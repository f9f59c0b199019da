/**
 * Fixtures for unit tests of the processing cycle without a cluster (after Kopf's own test
 * fixtures): a fake API that stores objects and records every request it receives, a wall clock
 * that moves only when told, handler records with defaults, and the stream's scope over them.
 * Not part of the public API.
 * @module
 */

// @ts-types="fast-json-patch"
import jsonpatch from "fast-json-patch/index.mjs";
import { asap, type Lifecycle } from "../../../actions/lifecycles.ts";
import { type LogEntry, Logger } from "../../../actions/loggers.ts";
import type { KubeApi, PatchOptions, ResourceRef } from "../../../client/api.ts";
import type { KubeClient } from "../../../client/client.ts";
import { ApiError } from "../../../client/errors.ts";
import type { ChangingHandler, Reason, WatchingHandler } from "../../../intents/handlers.ts";
import { createSettings, type OperatorSettings } from "../../../settings/settings.ts";
import { deepEqual, type JsonObject, mergeInto } from "../../../structs/dicts.ts";
import type { KubeObject } from "../../../structs/objects.ts";
import { Patch } from "../../../structs/patches.ts";
import type { Resource } from "../../../structs/resources.ts";
import { OperatorRegistry } from "../../../intents/registries.ts";
import { operatorScope, type ResourceScope, resourceScope } from "../../scope/scope.ts";
import type { ObjectMemory } from "./state.ts";

/** One request the fake API received. */
export interface FakeRequest {
  /** `get` or `patch`. */
  readonly verb: "get" | "patch";
  /** The object's name. */
  readonly name: string;
  /** The object's namespace. */
  readonly namespace: string | undefined;
  /** `merge` or `json` for patches. */
  readonly type?: string | undefined;
  /** `status` for the status subresource. */
  readonly subresource?: string | undefined;
  /** The patch as sent. */
  readonly body?: unknown;
}

/**
 * A fake of the object operations the cycle uses (`get`, `patch`): objects kept by
 * namespace/name, every request recorded, merge and JSON patches applied as the API server
 * would (a failed `test` operation is a 422; each write bumps `resourceVersion`); `refuse`
 * answers chosen requests with an error code instead (403 for a missing permission).
 */
export class FakeApi {
  /** Every request, in order. */
  readonly requests: FakeRequest[] = [];
  /** The stored objects by `namespace/name`. */
  readonly objects = new Map<string, KubeObject>();
  /** Returns an error code to answer a request with; none: the request is served. */
  refuse: ((request: FakeRequest) => number | undefined) | undefined;
  #version = 100;

  /** The fake, typed as the object operations the cycle takes. */
  get api(): KubeApi {
    return this as unknown as KubeApi;
  }

  /** The patch requests only. */
  get patches(): FakeRequest[] {
    return this.requests.filter((r) => r.verb === "patch");
  }

  /**
   * Stores an object as it is (a copy) and returns it.
   * @param body The object.
   * @returns The stored copy.
   */
  put(body: KubeObject): KubeObject {
    const copy = structuredClone(body);
    this.objects.set(keyOf(copy.metadata?.namespace, copy.metadata?.name ?? ""), copy);
    return structuredClone(copy);
  }

  /**
   * The stored object.
   * @param body An object with the same namespace and name.
   * @returns A copy of what is stored.
   */
  stored(body: KubeObject): KubeObject {
    const found = this.objects.get(keyOf(body.metadata?.namespace, body.metadata?.name ?? ""));
    if (!found) throw new Error(`Nothing stored as ${body.metadata?.name}`);
    return structuredClone(found);
  }

  /**
   * Reads an object (404 when absent).
   * @param _resource Ignored: one resource per fake.
   * @param name The name.
   * @param options The namespace.
   * @returns The object.
   */
  get(_resource: ResourceRef, name: string, options: { namespace?: string } = {}): Promise<
    KubeObject
  > {
    const request: FakeRequest = { verb: "get", name, namespace: options.namespace };
    this.requests.push(request);
    this.#check(request, "GET");
    const found = this.objects.get(keyOf(options.namespace, name));
    if (!found) throw apiError(404, "NotFound", "GET");
    return Promise.resolve(structuredClone(found));
  }

  /**
   * Patches an object (merge or JSON patch, the object or its status).
   * @param _resource Ignored: one resource per fake.
   * @param name The name.
   * @param patch The patch.
   * @param options Type, subresource, namespace.
   * @returns The object as stored after the patch.
   */
  patch(
    _resource: ResourceRef,
    name: string,
    patch: unknown,
    options: PatchOptions = {},
  ): Promise<KubeObject> {
    const request: FakeRequest = {
      verb: "patch",
      name,
      namespace: options.namespace,
      type: options.type ?? "merge",
      subresource: options.subresource,
      body: structuredClone(patch),
    };
    this.requests.push(request);
    this.#check(request, "PATCH");
    const key = keyOf(options.namespace, name);
    const found = this.objects.get(key);
    if (!found) return Promise.reject(apiError(404, "NotFound", "PATCH"));
    let next = structuredClone(found) as JsonObject;
    if (request.type === "json") {
      try {
        for (const op of patch as jsonpatch.Operation[]) {
          // As the API server: a `test` of an absent path against `null` passes.
          if (op.op === "test") {
            if (!deepEqual(valueAt(next, op.path) ?? null, op.value)) throw new Error("test");
          } else next = jsonpatch.applyOperation(next, op, true, false).newDocument as JsonObject;
        }
      } catch {
        return Promise.reject(apiError(422, "Invalid", "PATCH"));
      }
    } else mergeInto(next, patch as JsonObject);
    const stored = next as KubeObject;
    stored.metadata = { ...stored.metadata, resourceVersion: String(++this.#version) };
    this.objects.set(key, stored);
    return Promise.resolve(structuredClone(stored));
  }

  #check(request: FakeRequest, method: string): void {
    const code = this.refuse?.(request);
    if (code !== undefined) throw apiError(code, code === 403 ? "Forbidden" : "Failed", method);
  }
}

/** A wall clock for progress records that moves only when told. */
export class FakeClock {
  #ms: number;

  /**
   * Starts the clock.
   * @param start The time it shows at first.
   */
  constructor(start = "2026-01-02T03:04:05Z") {
    this.#ms = Date.parse(start);
  }

  /** The time now, as the cycle's `now` option takes it. */
  readonly now = (): Date => new Date(this.#ms);

  /**
   * Moves the clock on.
   * @param seconds How far.
   */
  advance(seconds: number): void {
    this.#ms += seconds * 1000;
  }
}

/** A namespaced custom resource with no subresources. */
export const RESOURCE: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  kind: "KopfExample",
  singular: "kopfexample",
  namespaced: true,
  verbs: ["get", "list", "watch", "patch"],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

/**
 * An object of {@link RESOURCE}.
 * @param init Its spec and metadata on top of the defaults.
 * @returns The object.
 */
export function objectOf(
  init: { spec?: JsonObject; metadata?: KubeObject["metadata"] } = {},
): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: {
      name: "kex1",
      namespace: "ns1",
      uid: "uid-1",
      resourceVersion: "1",
      ...init.metadata,
    },
    spec: init.spec ?? { field: "value" },
  } as KubeObject;
}

/**
 * A resource-changing handler record.
 * @param id Its id.
 * @param reason Its cause; undefined for a field handler.
 * @param fn Its function.
 * @param extra Other fields (filters, retries…).
 * @returns The record.
 */
export function changingHandler(
  id: string,
  reason: Reason | undefined,
  fn: (context: Record<string, unknown>) => unknown = () => undefined,
  extra: Partial<ChangingHandler> = {},
): ChangingHandler {
  return {
    kind: "changing",
    id,
    fn: fn as ChangingHandler["fn"],
    param: undefined,
    reason,
    fieldMustChange: false,
    requiresFinalizer: reason === "delete" && !extra.optional,
    ...extra,
  };
}

/**
 * A raw-event handler record.
 * @param id Its id.
 * @param fn Its function.
 * @returns The record.
 */
export function watchingHandler(
  id: string,
  fn: (context: Record<string, unknown>) => unknown,
): WatchingHandler {
  return { kind: "watching", id, fn: fn as WatchingHandler["fn"], param: undefined };
}

/**
 * A fresh memory of an object.
 * @param handledOnce Whether the object was handled by this process already.
 * @returns The memory.
 */
export function memoryOf(handledOnce = false): ObjectMemory {
  return { memo: {}, handledOnce, wake: () => {} };
}

/** The stream's scope, built as the operator builds it, with the fakes it is made of. */
export interface CycleFixture {
  /** The scope, to pass to `processEvent` or to any phase. */
  readonly deps: ResourceScope;
  /** The fake API behind `deps.api`. */
  readonly api: FakeApi;
  /** The clock behind `deps.now`. */
  readonly clock: FakeClock;
  /** Every log message. */
  readonly logs: LogEntry[];
  /** The messages of one level. */
  messages(level: LogEntry["level"]): string[];
}

/**
 * The scope of one resource's stream (built by `operatorScope()` and `resourceScope()`, as the
 * operator builds it), over a fake API and a fake clock; no admission gate (no phase under test
 * enters it).
 * @param init The handlers, settings overrides, lifecycle and resource.
 * @returns The fixture.
 */
export function cycleFixture(init: {
  changing?: readonly ChangingHandler[];
  watching?: readonly WatchingHandler[];
  settings?: OperatorSettings;
  lifecycle?: Lifecycle;
  resource?: Resource;
} = {}): CycleFixture {
  const api = new FakeApi();
  const clock = new FakeClock();
  const logs: LogEntry[] = [];
  const scope = operatorScope({
    client: NO_CLIENT,
    api: api.api,
    registry: new OperatorRegistry(),
    settings: init.settings ?? createSettings(),
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    memo: {},
    lifecycle: init.lifecycle ?? asap,
    namespaces: [],
    clusterwide: true,
    signal: new AbortController().signal,
    now: clock.now,
  });
  scope.readiness.check(); // no index: handlers need not wait
  const deps: ResourceScope = {
    ...resourceScope(scope, init.resource ?? RESOURCE, {
      changing: init.changing ?? [],
      watching: init.watching ?? [],
      spawning: [],
      indexing: [],
    }),
    gate: undefined,
  };
  return {
    deps,
    api,
    clock,
    logs,
    messages: (level) => logs.filter((e) => e.level === level).map((e) => e.message),
  };
}

/** A client no phase under test calls (handlers get it as `ctx.client`). */
export const NO_CLIENT = {} as unknown as KubeClient;

/**
 * The object as if handled before: its diff-base (last-handled configuration) stored from its
 * current essence, as a handled cause leaves it.
 * @param settings The settings whose diff-base storage is used.
 * @param body The object.
 * @returns A copy with the diff-base.
 */
export function withDiffBase(settings: OperatorSettings, body: KubeObject): KubeObject {
  const storage = settings.persistence.diffbaseStorage;
  const patch = new Patch();
  storage.store({ body, patch, essence: storage.build({ body, extraFields: [] }) });
  const copy = structuredClone(body) as JsonObject;
  mergeInto(copy, patch.body as JsonObject);
  return copy as KubeObject;
}

function valueAt(doc: JsonObject, pointer: string): unknown {
  let at: unknown = doc;
  for (const part of pointer.split("/").slice(1)) {
    const key = part.replaceAll("~1", "/").replaceAll("~0", "~");
    if (at === null || typeof at !== "object") return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

function apiError(code: number, reason: string, method: string): ApiError {
  return new ApiError({
    code,
    reason,
    message: `fake ${reason.toLowerCase()}`,
    request: { method, path: "/fake", server: "fake" },
  });
}
