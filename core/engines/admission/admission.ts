/**
 * Admission: from an AdmissionReview request to the review response. The framework's
 * {@link WebhookFn} finds the admission handlers the request is for (by webhook id, resource,
 * operation, subresource and the usual filters), runs them all at once — never retried — and
 * answers: allowed or not, with the most relevant error, the handlers' warnings, and (for
 * mutating handlers) their `patch` turned into a JSON patch.
 *
 * {@link startAdmission} runs the configured webhook server with that function and keeps the
 * managed webhook configurations in sync (`admission_configs.ts`). The servers themselves are in
 * `webhooks.ts`; the operator calls {@link startAdmission} from `core/reactor/lifetime/serving.ts`.
 * @module
 */

import { PermanentError, TemporaryError } from "../../actions/execution.ts";
import { withHandledObject } from "../../actions/handled_object.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import type { AdmissionContext, IndexView, Memo } from "../../intents/contexts.ts";
import type { Registration, WebhookHandler } from "../../intents/handlers.ts";
import { matchesBodyFilters, type OperatorRegistry } from "../../intents/registries.ts";
import { matchesResource } from "../../intents/selectors.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import {
  type AdmissionRequest,
  type AdmissionResponse,
  type AdmissionReview,
  jsonPatchFromMerge,
  type WebhookClientConfig,
  type WebhookFn,
  type WebhookFnOptions,
} from "../../structs/admission.ts";
import { diff } from "../../structs/diffs.ts";
import { isMapping, type JsonObject, nestedDeeperThan } from "../../structs/dicts.ts";
import type { KubeObject } from "../../structs/objects.ts";
import { Patch } from "../../structs/patches.ts";
import type { Resource } from "../../structs/resources.ts";
import { manageConfigurations } from "./admission_configs.ts";

/**
 * Rejects an admission with a message and an HTTP-like code, shown to the API client as
 * `admission webhook "<name>" denied the request: <message>`. Any other error rejects too, with
 * code 500. A {@link PermanentError}: admission handlers are never retried.
 *
 * @example
 * ```ts
 * import { AdmissionError, on } from "../../../mod.ts";
 *
 * on.validate("kopfexamples", function check_numbers({ spec }) {
 *   if (!Array.isArray(spec.numbers ?? [])) throw new AdmissionError("Numbers must be a list", 400);
 * });
 * ```
 */
export class AdmissionError extends PermanentError {
  /** The status code of the admission response; `null` sends none. */
  readonly code: number | null;

  /**
   * Creates the error.
   *
   * @param message Why the request is rejected.
   * @param code The status code. @default 500
   * @param options `cause`.
   */
  constructor(message = "", code: number | null = 500, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "AdmissionError";
    this.code = code;
  }
}

/** What answering reviews needs. */
export interface AdmissionDeps {
  /** The handlers. */
  readonly registry: OperatorRegistry;
  /** Settings, passed to handlers. */
  readonly settings: OperatorSettings;
  /** The operator's logger. */
  readonly logger: Logger;
  /** The operator's memo, shallow-copied for objects without a memo of their own. */
  readonly memo: Memo;
  /** Aborted when the operator stops; handlers see it as `signal`. */
  readonly signal: AbortSignal;
  /** Known resources, to describe the reviewed one to handlers; empty when unknown. */
  readonly resources?: (() => Promise<readonly Resource[]>) | undefined;
  /** The operator's indices by name. */
  readonly indices?: Readonly<Record<string, IndexView>> | undefined;
  /** The in-memory memo of an object the operator already holds, by uid. */
  readonly memoOf?: ((uid: string) => Memo | undefined) | undefined;
  /** The operator's client, given to handlers as `client`. */
  readonly client?: KubeClient | undefined;
}

/**
 * Builds the framework's review function for webhook servers.
 *
 * @param deps Handlers, settings, logger, memo, signal.
 * @returns The function to give to a webhook server.
 */
export function createWebhookFn(deps: AdmissionDeps): WebhookFn {
  return (review, options = {}) => serveReview(deps, review, options);
}

/**
 * Answers one AdmissionReview request: runs the matching admission handlers in parallel and
 * builds the response review.
 *
 * It fails closed: a request nested deeper than `settings.admission.maxDepth` is denied before
 * any handler runs, and a review that the framework fails to process (a `when` filter that
 * throws, a mutation patch that cannot be computed) is denied with a message rather than
 * thrown, because a failed call is an admission under `failurePolicy: Ignore`. Only handlers'
 * {@link AdmissionError} messages reach the API client; other errors are reported by the
 * handler's id, their details go to the operator's log.
 *
 * @param deps Handlers, settings, logger, memo, signal.
 * @param review The request review as Kubernetes sent it.
 * @param options The webhook (handler) id, the HTTP headers, the TLS peer.
 * @returns The response review.
 * @throws {TypeError} when the review has no request or neither object nor oldObject (it is
 *   not a review: the server answers 400).
 */
export async function serveReview(
  deps: AdmissionDeps,
  review: AdmissionReview,
  options: WebhookFnOptions = {},
): Promise<AdmissionReview> {
  const request = review.request;
  if (!isMapping(request)) throw new TypeError("The AdmissionReview has no request");
  const newBody = isMapping(request.object) ? request.object as KubeObject : undefined;
  const oldBody = isMapping(request.oldObject) ? request.oldObject as KubeObject : undefined;
  const body = newBody ?? oldBody;
  if (!body) throw new TypeError("The admission request has neither object nor oldObject");
  const answer = (response: AdmissionResponse): AdmissionReview => ({
    apiVersion: typeof review.apiVersion === "string" ? review.apiVersion : "admission.k8s.io/v1",
    kind: typeof review.kind === "string" ? review.kind : "AdmissionReview",
    response,
  });
  const uid = typeof request.uid === "string" ? request.uid : "";
  const maxDepth = deps.settings.admission.maxDepth;
  // The request's own level does not count: its fields (object, oldObject, …) are measured.
  if (nestedDeeperThan(request, maxDepth + 1)) {
    deps.logger.warning(
      `Denied the admission request ${describe(request)}: nested deeper than ${maxDepth} ` +
        `levels (settings.admission.maxDepth); no handler ran.`,
    );
    return answer(denial(
      uid,
      `The object is nested deeper than ${maxDepth} levels, the operator's limit ` +
        `(settings.admission.maxDepth).`,
      400,
    ));
  }
  try {
    return answer(await runHandlers(deps, request, body, newBody, oldBody, options));
  } catch (error) {
    deps.logger.exception(
      `Denied the admission request ${describe(request)}: it could not be processed.`,
      error,
    );
    return answer(denial(
      uid,
      "The operator could not process the admission request; the details are in its log.",
      500,
    ));
  }
}

async function runHandlers(
  deps: AdmissionDeps,
  request: AdmissionRequest,
  body: KubeObject,
  newBody: KubeObject | undefined,
  oldBody: KubeObject | undefined,
  options: WebhookFnOptions,
): Promise<AdmissionResponse> {
  const resource = await reviewedResource(deps, request);
  const subresource = request.subResource || undefined;
  const operation = request.operation;
  const uid = body.metadata?.uid;
  // A creation's memo is thrown away: the object may never come to exist (as in Kopf).
  const memo = (operation !== "CREATE" && uid ? deps.memoOf?.(uid) : undefined) ??
    { ...deps.memo };
  const logger = deps.logger.forObject(body, { local: true });
  const patch = new Patch();
  const warnings: string[] = [];
  const meta = body.metadata ?? {};
  const context: AdmissionContext = {
    body,
    spec: (isMapping(body.spec) ? body.spec : {}) as Record<string, unknown>,
    meta,
    status: (isMapping(body.status) ? body.status : {}) as Record<string, unknown>,
    name: meta.name,
    namespace: meta.namespace,
    uid,
    labels: meta.labels ?? {},
    annotations: meta.annotations ?? {},
    resource,
    patch,
    logger,
    memo,
    param: undefined,
    settings: deps.settings,
    signal: deps.signal,
    indices: deps.indices ?? {},
    client: deps.client,
    ...deps.indices,
    dryrun: Boolean(request.dryRun),
    subresource,
    warnings,
    userinfo: request.userInfo ?? {},
    headers: options.headers ?? {},
    sslpeer: options.sslpeer ?? null,
    operation,
    old: oldBody,
    new: newBody,
    diff: diff(oldBody, newBody),
  };
  const handlers = deps.registry.webhooks().filter((registration) =>
    matches(registration, { ...options, resource, request, subresource, body, context })
  );
  const failures: Failure[] = [];
  await Promise.all(handlers.map(async ({ handler }) => {
    try {
      await withHandledObject(
        { body },
        () => handler.fn({ ...context, param: handler.param } as never),
      );
      logger.debug(`Admission handler '${handler.id}' succeeded.`);
    } catch (error) {
      failures.push({ id: handler.id, error });
      if (error instanceof AdmissionError) {
        logger.info(`Admission handler '${handler.id}' rejected the request: ${error.message}`);
      } else {
        logger.exception(`Admission handler '${handler.id}' failed with an exception.`, error);
      }
    }
  }));
  return buildResponse(request, body, patch, warnings, failures, logger);
}

/** A handler's failure: its id and what it threw. */
interface Failure {
  readonly id: string;
  readonly error: unknown;
}

/** The request in a log line: operation, resource, namespace/name, user. */
function describe(request: AdmissionRequest): string {
  const text = (value: unknown) => typeof value === "string" ? value : "";
  const resource = isMapping(request.resource) ? text(request.resource.resource) : "";
  const name = [text(request.namespace), text(request.name)].filter(Boolean).join("/");
  const user = isMapping(request.userInfo) ? text(request.userInfo.username) : "";
  return JSON.stringify(`${text(request.operation)} ${resource} ${name}`.trim()) +
    (user ? ` by ${JSON.stringify(user)}` : "");
}

function denial(uid: string, message: string, code: number): AdmissionResponse {
  return { uid, allowed: false, status: { message, code } };
}

function matches(
  { selector, handler }: Registration<WebhookHandler>,
  request: WebhookFnOptions & {
    resource: Resource;
    request: AdmissionRequest;
    subresource: string | undefined;
    body: KubeObject;
    context: AdmissionContext;
  },
): boolean {
  if (request.webhook !== undefined && request.webhook !== handler.id) return false;
  if (!matchesResource(selector, request.resource)) return false;
  const operation = request.request.operation;
  if (handler.operations && !(operation && handler.operations.includes(operation))) return false;
  if (handler.subresource !== "*" && handler.subresource !== request.subresource) return false;
  return matchesBodyFilters(handler, request.body, () => ({
    ...request.context,
    param: handler.param,
  }));
}

/** The most relevant error first: rejections, then permanent, temporary, other failures. */
function rank(error: unknown): number {
  if (error instanceof AdmissionError) return 0;
  if (error instanceof PermanentError) return 1;
  if (error instanceof TemporaryError) return 2;
  return 9;
}

/**
 * The response: a rejection carries the most relevant failure — an {@link AdmissionError}'s own
 * message and code; for anything else only the handler's id and code 500, since an arbitrary
 * error's text (a failed HTTP call, a `TypeError` quoting a value) may hold secrets that must
 * not reach the API client. An admission carries the mutations as a JSON patch.
 */
function buildResponse(
  request: AdmissionRequest,
  body: KubeObject,
  patch: Patch,
  warnings: readonly string[],
  failures: Failure[],
  logger: Logger,
): AdmissionResponse {
  const uid = typeof request.uid === "string" ? request.uid : "";
  const warned = warnings.length ? { warnings: warnings.map(String) } : {};
  const failure = failures.sort((a, b) => rank(a.error) - rank(b.error))[0];
  if (failure) {
    const { id, error } = failure;
    const status = error instanceof AdmissionError
      ? {
        message: error.message || "Unknown error",
        ...(error.code !== null ? { code: error.code } : {}),
      }
      : {
        message: `Admission handler '${id}' failed; the details are in the operator's log.`,
        code: 500,
      };
    return { uid, allowed: false, ...warned, status };
  }
  let ops: unknown[] = [];
  if (!patch.isEmpty) {
    try {
      ops = jsonPatchFromMerge(body as JsonObject, patch.body);
    } catch (error) {
      logger.exception("The mutating handlers' patch could not be computed; denied.", error);
      return denial(
        uid,
        "The operator could not compute the mutation patch; the details are in its log.",
        500,
      );
    }
  }
  return {
    uid,
    allowed: true,
    ...warned,
    ...(ops.length ? { patchType: "JSONPatch" as const, patch: btoa(JSON.stringify(ops)) } : {}),
  };
}

async function reviewedResource(deps: AdmissionDeps, request: AdmissionRequest): Promise<Resource> {
  const gvr = request.resource;
  const group = gvr?.group ?? request.kind?.group ?? "";
  const version = gvr?.version ?? request.kind?.version ?? "";
  const plural = gvr?.resource ?? "";
  const known = (await deps.resources?.().catch(() => []) ?? []).find((r) =>
    r.group === group && r.version === version && r.plural === plural
  );
  // Admission speaks of the version the rules named: it is "preferred" for matching purposes.
  return {
    ...(known ?? {
      group,
      version,
      plural,
      kind: request.kind?.kind ?? "",
      singular: (request.kind?.kind ?? "").toLowerCase(),
      namespaced: Boolean(request.namespace),
      verbs: [],
      shortNames: [],
      categories: [],
      subresources: [],
    }),
    preferred: true,
  };
}

/** What {@link startAdmission} needs. */
export interface RunAdmissionDeps extends AdmissionDeps {
  /** The API client (managed configurations, resource discovery, cluster version). */
  readonly client: KubeClient;
}

/** A running webhook server with its managed configurations. */
export interface AdmissionRun {
  /** Resolves when the server listens and the managed configurations are in place. */
  readonly ready: Promise<void>;
  /** Resolves after a clean stop (configurations cleaned up); rejects if the server fails. */
  readonly finished: Promise<void>;
}

/**
 * Starts the configured webhook server, feeding it the review function, and keeps the managed
 * webhook configurations (if any) in sync with the client configs it yields, until the signal
 * aborts. Then non-persistent webhooks are removed from the managed configurations.
 *
 * @param deps Client, handlers, settings, logger, memo, signal.
 * @returns The readiness and the end of the run; `finished` rejects when the server stops on
 *   its own, fails to start, or a configuration cannot be written.
 */
export function startAdmission(deps: RunAdmissionDeps): AdmissionRun {
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const finished = runAdmission(deps, markReady);
  return { ready: Promise.race([ready, finished]), finished };
}

async function runAdmission(deps: RunAdmissionDeps, onReady: () => void): Promise<void> {
  const server = deps.settings.admission.server;
  if (!server) throw new Error("Admission handlers exist, but no webhook server is configured");
  const fn = createWebhookFn({
    ...deps,
    resources: deps.resources ?? (() => deps.client.discovery.resources(deps.signal)),
  });
  const gitVersion = await deps.client.http.json<{ gitVersion?: string }>({
    path: "/version",
    signal: deps.signal,
  }).then((v) => v.gitVersion, () => undefined);
  const { caPem } = deps.client.http.connection;
  const serveOptions = { signal: deps.signal, gitVersion, caPem };
  const configs: AsyncIterable<WebhookClientConfig> = typeof server === "function"
    ? server(fn, serveOptions)
    : server.serve(fn, serveOptions);
  await manageConfigurations({
    client: deps.client,
    registry: deps.registry,
    settings: deps.settings,
    logger: deps.logger,
    configs,
    signal: deps.signal,
    onConfigured: onReady,
  });
  if (!deps.signal.aborted) throw new Error("The webhook server exited unexpectedly");
}
