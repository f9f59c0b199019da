/**
 * The HTTP face: authenticates, applies injected faults, maps REST paths to operations, answers
 * JSON (failures as `Status` objects), streams watches, and records every request.
 * @module
 */

import { createHash, timingSafeEqual } from "node:crypto";
import type { Cluster } from "./cluster.ts";
import { deleteCollection, deleteObject, type DeleteOptions } from "./deletion.ts";
import { discoveryDocument, openApiDocument, toTable, wantsTable } from "./discovery.ts";
import {
  ApiFailure,
  badRequest,
  invalidResourceVersion,
  methodNotAllowed,
  noSuchPath,
  notFound,
  requestEntityTooLarge,
  unauthorized,
  unsupportedMediaType,
} from "./errors.ts";
import type { Faults, RequestInfo } from "./faults.ts";
import type { History } from "./history.ts";
import { PATCH_TYPES } from "./patching.ts";
import { parse as parseYaml } from "yaml";
import { decodeProtobuf } from "./protobuf.ts";
import { parseFieldSelector, parseLabelSelector, type Selector } from "./selectors.ts";
import { parseShardSelector, type ShardSelector } from "./sharding.ts";
import { groupVersion, isObject, type KubeObject, type ResourceDef } from "./types.ts";
import { openWatch } from "./watches.ts";
import { concatBytes } from "../../core/util/bytes.ts";

/** The content type of server-side apply. */
const APPLY_PATCH_TYPE = "application/apply-patch+yaml";

/** What the router needs. */
export interface RouterOptions {
  /** The objects. */
  readonly cluster: Cluster;
  /** The bearer token every resource request must carry. */
  readonly token: string;
  /** Injected faults. */
  readonly faults: Faults;
  /** The request log. */
  readonly history: History;
  /** Interval of periodic watch bookmarks. */
  readonly bookmarkIntervalMs: number;
  /** `host:port` of the server. */
  readonly serverAddress: () => string;
  /** Closes the client connection whose server-side peer port is given. */
  readonly dropConnection: (peerPort: number) => void;
}

/** A request handler for `Deno.serve`. */
export type Handler = (request: Request, info: Deno.ServeHandlerInfo) => Promise<Response>;

interface Route extends RequestInfo {
  readonly version: string;
  readonly plural: string;
  readonly subresource: string | undefined;
}

// kube-apiserver serves `/version/` as `/version` (the Python client kr8s asks with the slash).
const PUBLIC = new Set(["/version", "/version/", "/healthz", "/readyz", "/livez"]);

function classify(method: string, path: string, query: URLSearchParams): Route {
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  let group = "";
  let version = "";
  let rest: string[] = [];
  if (parts[0] === "api" && parts.length >= 3) [version, rest] = [parts[1]!, parts.slice(2)];
  else if (parts[0] === "apis" && parts.length >= 4) {
    [group, version, rest] = [parts[1]!, parts[2]!, parts.slice(3)];
  }
  const other = (verb: string): Route => ({
    verb,
    method,
    path,
    group: "",
    version: "",
    resource: "",
    plural: "",
    subresource: undefined,
    namespace: undefined,
    name: undefined,
  });
  if (rest.length === 0) {
    return other(parts[0] === "api" || parts[0] === "apis" ? "discovery" : "other");
  }
  let namespace: string | undefined;
  if (
    rest[0] === "namespaces" && rest.length >= 3 &&
    !(rest.length === 3 && /^(status|finalize)$/.test(rest[2]!))
  ) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  if (rest.length > 3) return other("other");
  const [plural, name, subresource] = rest as [string, string | undefined, string | undefined];
  const watch = query.get("watch") === "true" || query.get("watch") === "1";
  const verb = ({
    GET: watch ? "watch" : name ? "get" : "list",
    POST: "create",
    PUT: "update",
    PATCH: "patch",
    DELETE: name ? "delete" : "deletecollection",
  } as Record<string, string>)[method] ?? "other";
  return {
    verb,
    method,
    path,
    group,
    version,
    resource: subresource ? `${plural}/${subresource}` : plural,
    plural,
    subresource,
    namespace,
    name,
  };
}

function json(code: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status: code,
    headers: { "content-type": "application/json", ...headers },
  });
}

/**
 * The largest request body accepted, in bytes: 3 MiB, as kube-apiserver's default
 * `MaxRequestBodyBytes` (a larger one is answered `413 RequestEntityTooLarge`).
 */
export const MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024;

/**
 * The request's body, at most {@link MAX_REQUEST_BODY_BYTES}: a larger one is refused by its
 * `Content-Length` before reading, or as soon as that many bytes have arrived.
 */
async function bodyBytes(request: Request): Promise<Uint8Array> {
  const declared = Number(request.headers.get("content-length") ?? "");
  const tooLarge = () => requestEntityTooLarge(MAX_REQUEST_BODY_BYTES);
  if (!request.body) return new Uint8Array(0);
  if (declared > MAX_REQUEST_BODY_BYTES) {
    await request.body.cancel().catch(() => {});
    throw tooLarge();
  }
  const reader = request.body.getReader();
  const parts: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > MAX_REQUEST_BODY_BYTES) {
      await reader.cancel().catch(() => {});
      throw tooLarge();
    }
    parts.push(value);
  }
  return concatBytes(parts, total);
}

async function bodyText(request: Request): Promise<string> {
  return new TextDecoder().decode(await bodyBytes(request));
}

async function readBody(request: Request): Promise<unknown> {
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim();
  if (type === "application/vnd.kubernetes.protobuf") {
    return decodeProtobuf(await bodyBytes(request));
  }
  if (type.includes("protobuf") || type.includes("cbor")) {
    await request.body?.cancel();
    throw unsupportedMediaType(["application/json", ...Object.keys(PATCH_TYPES)]);
  }
  const text = await bodyText(request);
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`the request body is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Creates the request handler.
 *
 * @param options The cluster, credentials, faults, history and pacing.
 * @returns The handler for `Deno.serve`.
 */
export function createHandler(options: RouterOptions): Handler {
  const { cluster, faults, history } = options;
  const expected = digest(`Bearer ${options.token}`);

  async function dispatch(
    request: Request,
    route: Route,
    url: URL,
    created: { name?: string },
  ): Promise<Response> {
    const query = url.searchParams;
    if (route.verb === "discovery" || route.path === "/version" || route.path === "/version/") {
      const doc = discoveryDocument(cluster.registry, route.path, options.serverAddress());
      if (doc === undefined) throw noSuchPath();
      return json(200, doc);
    }
    if (route.path.startsWith("/openapi/v3")) {
      const doc = openApiDocument(cluster.registry, route.path);
      if (doc === undefined) throw noSuchPath();
      return json(200, doc);
    }
    if (PUBLIC.has(route.path)) {
      return new Response("ok", { headers: { "content-type": "text/plain" } });
    }
    const known = route.group
      ? cluster.registry.groups().some((g) =>
        g.name === route.group && g.versions.includes(route.version)
      )
      : route.version === "v1";
    if (!known) {
      return new Response("404 page not found\n", {
        status: 404,
        headers: { "content-type": "text/plain; charset=utf-8" },
      });
    }
    if (!route.plural) throw noSuchPath();
    const def = cluster.registry.find(route.group, route.version, route.plural);
    if (!def) throw noSuchPath();
    if (!def.namespaced && route.namespace !== undefined) throw noSuchPath();
    if (def.namespaced && route.namespace === undefined && route.name) throw noSuchPath();
    const sub = route.subresource;
    if (sub && !(def.subresources.includes(sub) && (sub === "status" || sub === "finalize"))) {
      throw def.crd ? notFound(def, route.name!) : noSuchPath();
    }
    if (query.get("dryRun")) throw badRequest("dryRun is not supported by the emulator");
    const ns = route.namespace ?? "";
    const version = route.version;
    const out = (object: KubeObject) => cluster.present(def, object, version);
    switch (route.verb) {
      case "get": {
        const object = out(cluster.get(def, ns, route.name!));
        if (!wantsTable(request.headers.get("accept"))) return json(200, object);
        return json(200, toTable(def, version, [object], { resourceVersion: "" }));
      }
      case "list":
        return list(request, def, route, query);
      case "watch":
        return watch(def, route, query);
      case "create":
        if (def.namespaced && route.namespace === undefined) throw noSuchPath();
        if (route.name) {
          throw methodNotAllowed(`the server does not allow this method on the requested resource`);
        }
        {
          const object = out(cluster.create(def, ns, await readBody(request), version));
          created.name = object.metadata?.name;
          return json(201, object);
        }
      case "update":
        if (!route.name) {
          throw methodNotAllowed("the server does not allow this method on the requested resource");
        }
        return json(
          200,
          out(cluster.update(def, ns, route.name, await readBody(request), sub, version)),
        );
      case "patch": {
        if (!route.name) {
          throw methodNotAllowed("the server does not allow this method on the requested resource");
        }
        const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim();
        if (type === APPLY_PATCH_TYPE) return await serverSideApply(request, def, route, query);
        const kind = PATCH_TYPES[type];
        if (!kind) {
          throw new ApiFailure(415, "UnsupportedMediaType", "415: Unsupported Media Type", {});
        }
        if (kind === "strategic" && def.crd) {
          throw unsupportedMediaType(
            def.crd
              ? [
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
              ]
              : Object.keys(PATCH_TYPES),
          );
        }
        const body = await readBody(request);
        return json(200, out(cluster.patch(def, ns, route.name, kind, body, sub, version)));
      }
      case "delete":
      case "deletecollection": {
        const body = await readBody(request);
        const opts = (isObject(body) ? body : {}) as DeleteOptions & Record<string, unknown>;
        const merged: DeleteOptions = {
          ...opts,
          ...(query.get("propagationPolicy")
            ? { propagationPolicy: query.get("propagationPolicy")! }
            : {}),
        };
        if (route.verb === "deletecollection") {
          const items = deleteCollection(cluster, def, route.namespace, {
            labelSelector: query.get("labelSelector"),
            fieldSelector: query.get("fieldSelector"),
          }, merged);
          return json(
            200,
            listBody(def, version, items.map(out), {
              resourceVersion: String(cluster.store.resourceVersion),
            }),
          );
        }
        const { object, gone } = deleteObject(cluster, def, ns, route.name!, merged);
        if (!gone || def.returnsObjectOnDelete) return json(200, out(object));
        return json(200, {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Success",
          details: {
            name: route.name,
            ...(def.group ? { group: def.group } : {}),
            kind: def.plural,
            uid: object.metadata?.uid,
          },
        });
      }
      default:
        throw methodNotAllowed("the server does not allow this method on the requested resource");
    }
  }

  async function serverSideApply(
    request: Request,
    def: ResourceDef,
    route: Route,
    query: URLSearchParams,
  ): Promise<Response> {
    const manager = query.get("fieldManager");
    if (!manager) {
      throw new ApiFailure(
        422,
        "Invalid",
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
        {
          causes: [{
            reason: "FieldValueRequired",
            message: "Required value: is required for apply patch",
            field: "fieldManager",
          }],
        },
      );
    }
    let body: unknown;
    try {
      body = parseYaml(await bodyText(request)); // JSON is YAML too
    } catch (error) {
      if (error instanceof ApiFailure) throw error;
      throw badRequest(`error decoding YAML: ${(error as Error).message}`);
    }
    const { object, created } = cluster.apply(def, route.namespace ?? "", route.name!, body, {
      manager,
      force: query.get("force") === "true",
      ...(route.subresource ? { subresource: route.subresource } : {}),
      version: route.version,
    });
    return json(created ? 201 : 200, cluster.present(def, object, route.version));
  }

  function listBody(
    def: ResourceDef,
    version: string,
    items: KubeObject[],
    metadata: Record<string, unknown>,
  ): Record<string, unknown> {
    return {
      kind: def.listKind,
      apiVersion: groupVersion(def.group, version),
      metadata,
      // Typed (built-in) lists omit the items' apiVersion and kind; custom resources keep them.
      items: def.crd ? items : items.map(({ apiVersion: _a, kind: _k, ...rest }) => rest),
    };
  }

  function list(
    request: Request,
    def: ResourceDef,
    route: Route,
    query: URLSearchParams,
  ): Response {
    const limit = Number(query.get("limit") ?? 0);
    const rv = query.get("resourceVersion");
    if (rv && !/^\d+$/.test(rv)) {
      throw badRequest(`invalid resource version: ${invalidResourceVersion(rv)}`);
    }
    const sharded = parseShardSelector(query.get("shardSelector"));
    const page = cluster.list(def, route.namespace, {
      labelSelector: query.get("labelSelector"),
      fieldSelector: query.get("fieldSelector"),
      shardSelector: query.get("shardSelector"),
      limit: Number.isFinite(limit) ? limit : 0,
      continue: query.get("continue"),
      resourceVersion: query.get("resourceVersion"),
      resourceVersionMatch: query.get("resourceVersionMatch"),
    });
    const metadata = {
      resourceVersion: page.resourceVersion,
      ...(page.continue ? { continue: page.continue } : {}),
      ...(page.remainingItemCount !== undefined
        ? { remainingItemCount: page.remainingItemCount }
        : {}),
      // As the real API server: lists of built-in resources echo the applied selector; lists of
      // custom resources (unstructured) are filtered but do not.
      ...(sharded && !def.crd ? { shardInfo: { selector: sharded.text } } : {}),
    };
    const items = page.items.map((o) => cluster.present(def, o, route.version));
    if (wantsTable(request.headers.get("accept"))) {
      return json(200, toTable(def, route.version, items, metadata));
    }
    return json(200, listBody(def, route.version, items, metadata));
  }

  function watch(def: ResourceDef, route: Route, query: URLSearchParams): Response {
    const timeout = query.get("timeoutSeconds");
    const rv = query.get("resourceVersion");
    if (rv && !/^\d+$/.test(rv)) throw new ApiFailure(500, "", invalidResourceVersion(rv));
    const body = openWatch(cluster, {
      def,
      version: route.version,
      namespace: def.namespaced ? route.namespace : undefined,
      label: parseLabelSelector(query.get("labelSelector")),
      field: withShards(
        parseFieldSelector(query.get("fieldSelector"), def),
        parseShardSelector(query.get("shardSelector")),
      ),
      resourceVersion: query.get("resourceVersion"),
      sendInitialEvents: query.get("sendInitialEvents") === "true",
      allowBookmarks: query.get("allowWatchBookmarks") === "true",
      timeoutSeconds: timeout ? Number(timeout) : undefined,
    }, {
      bookmarkIntervalMs: options.bookmarkIntervalMs,
      stalled: () => faults.stalled(route),
      onResume: (callback) => faults.onResume(callback),
      onInjectedLines: (deliver) => faults.onInjectedLines(route, deliver),
    });
    return new Response(body, {
      status: 200,
      headers: { "content-type": "application/json", "cache-control": "no-cache" },
    });
  }

  return async (request, info) => {
    const started = Date.now();
    const url = new URL(request.url);
    const route = classify(request.method, url.pathname, url.searchParams);
    let code = 0;
    const created: { name?: string } = {};
    try {
      let response: Response;
      try {
        const auth = request.headers.get("authorization");
        if (!PUBLIC.has(route.path) && !timingSafeEqual(digest(auth ?? ""), expected)) {
          throw unauthorized();
        }
        for (const action of faults.plan(route)) {
          if (action.kind === "latency") {
            await new Promise((resolve) => setTimeout(resolve, action.ms));
          } else if (action.kind === "drop") {
            const peer = info.remoteAddr as Deno.NetAddr;
            options.dropConnection(peer.port);
            return new Response(null, { status: 500 });
          } else {
            throw new ApiFailure(action.code, action.reason, action.message, {
              ...(action.retryAfterSeconds !== undefined
                ? { retryAfterSeconds: action.retryAfterSeconds }
                : {}),
            });
          }
        }
        response = await dispatch(request, route, url, created);
      } catch (error) {
        const failure = error instanceof ApiFailure
          ? error
          : new ApiFailure(500, "InternalError", `Internal error occurred: ${error}`);
        const retry = failure.details?.retryAfterSeconds;
        response = json(
          failure.code,
          failure.toStatus(),
          retry !== undefined ? { "retry-after": String(retry) } : {},
        );
      }
      code = response.status;
      return response;
    } finally {
      history.record({
        verb: route.verb,
        method: request.method,
        path: url.pathname,
        query: url.search.replace(/^\?/, ""),
        group: route.group,
        resource: route.resource,
        namespace: route.namespace,
        name: route.name ?? created.name,
        code,
        time: started,
        durationMs: Date.now() - started,
      });
    }
  };
}

/**
 * The SHA-256 of a header value: tokens are compared as digests of equal length, in constant
 * time, so that the time of a comparison tells nothing about how much of a guess was right.
 */
function digest(text: string): Uint8Array {
  return createHash("sha256").update(text).digest();
}

/** A field selector narrowed by a shard selector (both must match). */
function withShards(field: Selector, shards: ShardSelector | undefined): Selector {
  return shards ? (object) => field(object) && shards.matches(object) : field;
}
