/**
 * Admission data as plain types: the `AdmissionReview` requests and responses Kubernetes sends to
 * webhooks, the client configs that tell it where the webhooks are, and the small protocol
 * between the framework and webhook servers (the framework's {@link WebhookFn}, the servers'
 * {@link WebhookServerProtocol}). Also the one pure computation admission needs: turning a
 * mutating handler's merge patch into the JSON patch Kubernetes expects.
 *
 * No I/O here: the servers live in `core/engines/admission/webhooks.ts`, the handling of reviews in
 * `core/engines/admission/admission.ts`.
 * @module
 */

// The package's ES module: its CommonJS entry would start the Node compatibility loader (MiBs).
// @ts-types="fast-json-patch"
import jsonpatch from "fast-json-patch/index.mjs";
import { deepCopy, isMapping, type JsonObject, type JsonValue } from "./dicts.ts";
import type { JsonPatchOp } from "./patches.ts";

/** The operations an admission request can be about. */
export type Operation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";

/** The operations, for validation of handler options. */
export const OPERATIONS: readonly Operation[] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/** Who makes the API request under review, exactly as Kubernetes sends it. */
export interface UserInfo {
  /** The user name, e.g. `system:admin`. */
  readonly username?: string;
  /** The user's uid. */
  readonly uid?: string;
  /** The user's groups. */
  readonly groups?: readonly string[];
  /** Anything else the authenticator provided. */
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/** The HTTP headers of a review request, lower-cased names. */
export type Headers = Readonly<Record<string, string>>;

/**
 * What is known about the TLS client certificate of a review request; `null` when the client
 * presented none or it was not verified. The built-in servers cannot verify client
 * certificates (Deno's server API has no such option), so they always pass `null`.
 */
export type SSLPeer = Readonly<Record<string, unknown>> | null;

/** A group/version/kind or group/version/resource as used in admission requests. */
export interface GroupVersionKind {
  /** API group, `""` for core. */
  readonly group: string;
  /** API version. */
  readonly version: string;
  /** Kind. */
  readonly kind: string;
}

/** A group/version/resource as used in admission requests. */
export interface GroupVersionResource {
  /** API group, `""` for core. */
  readonly group: string;
  /** API version. */
  readonly version: string;
  /** Plural resource name. */
  readonly resource: string;
}

/** The `request` of an AdmissionReview (only the fields the framework reads are typed). */
export interface AdmissionRequest {
  /** Identifies the request; echoed in the response. */
  readonly uid: string;
  /** The kind of the object. */
  readonly kind?: GroupVersionKind;
  /** The resource being admitted. */
  readonly resource?: GroupVersionResource;
  /** The subresource, e.g. `status`, if the request is for one. */
  readonly subResource?: string;
  /** The object's name (may be empty for generated names). */
  readonly name?: string;
  /** The object's namespace. */
  readonly namespace?: string;
  /** What is done. */
  readonly operation?: Operation;
  /** Who does it. */
  readonly userInfo?: UserInfo;
  /** The new object (absent for DELETE). */
  readonly object?: JsonObject | null;
  /** The old object (absent for CREATE). */
  readonly oldObject?: JsonObject | null;
  /** Whether the API request is a dry run. */
  readonly dryRun?: boolean;
  /** Anything else Kubernetes sends. */
  readonly [key: string]: unknown;
}

/** The `response` of an AdmissionReview. */
export interface AdmissionResponse {
  /** The request's uid. */
  readonly uid: string;
  /** Whether the request is admitted. */
  readonly allowed: boolean;
  /** Warnings for the API client (Kubernetes 1.19+). */
  readonly warnings?: readonly string[];
  /** Always `JSONPatch` when a patch is given. */
  readonly patchType?: "JSONPatch";
  /** Base64 of the JSON patch (mutating webhooks). */
  readonly patch?: string;
  /** Why the request is rejected. */
  readonly status?: { readonly message?: string; readonly code?: number };
}

/** An AdmissionReview: a request from Kubernetes, or the response to it. */
export interface AdmissionReview {
  /** `admission.k8s.io/v1` (or `v1beta1`). */
  readonly apiVersion?: string;
  /** `AdmissionReview`. */
  readonly kind?: string;
  /** The request (in requests). */
  readonly request?: AdmissionRequest;
  /** The response (in responses). */
  readonly response?: AdmissionResponse;
}

/** Where Kubernetes finds an in-cluster webhook service. */
export interface WebhookClientConfigService {
  /** The service's namespace. */
  readonly namespace?: string;
  /** The service's name. */
  readonly name?: string;
  /** The URL path (the handler id is appended). */
  readonly path?: string;
  /** The service port. */
  readonly port?: number;
}

/**
 * How Kubernetes reaches a webhook server: goes into `.webhooks[].clientConfig` of the managed
 * configurations as is, except that the handler id is appended to `url` / `service.path`.
 */
export interface WebhookClientConfig {
  /** Base64 of the PEM CA bundle that signed the server certificate. */
  readonly caBundle?: string;
  /** An `https://` URL without query or fragment. */
  readonly url?: string;
  /** An in-cluster service instead of a URL. */
  readonly service?: WebhookClientConfigService;
}

/** Extra data a webhook server passes with a review to the framework. */
export interface WebhookFnOptions {
  /**
   * The handler (webhook) id, usually the last URL path segment. Without it, every admission
   * handler runs, validating and mutating ones mixed: always pass it.
   */
  readonly webhook?: string | undefined;
  /** The request's HTTP headers (for the handlers' own authentication). */
  readonly headers?: Headers | undefined;
  /** The verified TLS client certificate, if any. */
  readonly sslpeer?: SSLPeer | undefined;
}

/**
 * What the framework gives a webhook server: call it with each parsed AdmissionReview request
 * and send the review it resolves to back as JSON.
 */
export type WebhookFn = (
  review: AdmissionReview,
  options?: WebhookFnOptions,
) => Promise<AdmissionReview>;

/** What a webhook server receives besides the {@link WebhookFn}. */
export interface WebhookServeOptions {
  /** Aborted when the operator stops: close the listener and return. */
  readonly signal: AbortSignal;
  /** The API server's `/version` `gitVersion`, for servers that adapt to the cluster type. */
  readonly gitVersion?: string | undefined;
  /**
   * The PEM CA bundle the operator trusts for the API server (its connection's, if any), for
   * servers that adapt to the cluster type: Minikube's and K3s's CAs name themselves so.
   */
  readonly caPem?: string | undefined;
}

/**
 * A webhook server or tunnel: serves reviews with `fn` and yields the client config under which
 * Kubernetes reaches it — once, or again whenever the endpoint changes. It must keep running
 * until `signal` aborts; returning earlier stops the operator.
 */
export interface WebhookServerProtocol {
  /**
   * Serves until the signal aborts.
   *
   * @param fn The framework's review function.
   * @param options The stop signal and cluster information.
   * @returns Client configs, one per endpoint change.
   */
  serve(fn: WebhookFn, options: WebhookServeOptions): AsyncIterable<WebhookClientConfig>;
}

/** A webhook server as a plain function (Kopf's simple form of custom servers). */
export type WebhookServeFn = (
  fn: WebhookFn,
  options: WebhookServeOptions,
) => AsyncIterable<WebhookClientConfig>;

/**
 * Turns a merge patch (what mutating handlers write into `patch`) into JSON-patch operations
 * against the object under review: the merge patch is applied to a copy (`null` removes keys,
 * objects merge, anything else replaces), and the copy is compared with the original.
 *
 * @param original The object as Kubernetes sent it.
 * @param merge The merge-patch body.
 * @returns The operations; empty when the patch changes nothing.
 */
export function jsonPatchFromMerge(original: JsonObject, merge: JsonObject): JsonPatchOp[] {
  const patched = applyMergePatch(deepCopy(original), merge);
  return jsonpatch.compare(original, patched as JsonObject) as JsonPatchOp[];
}

function applyMergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue {
  if (!isMapping(patch)) return deepCopy(patch);
  const result: JsonObject = isMapping(target) ? target as JsonObject : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value as JsonValue);
  }
  return result;
}
