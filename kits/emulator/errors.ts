/**
 * Failures as the API server reports them: a `Status` object with `reason`, `code`, `message`
 * and `details`, with the same wording as kube-apiserver for the common cases.
 * @module
 */

import type { ResourceDef } from "./types.ts";

/** One cause of an `Invalid` failure. */
export interface StatusCause {
  /** e.g. `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`. */
  reason: string;
  /** Human-readable explanation. */
  message: string;
  /** The field path, e.g. `metadata.name`, if a field is concerned. */
  field?: string;
}

/** The `details` of a `Status`. */
export interface StatusDetails {
  /** Name of the object concerned. */
  name?: string;
  /** API group of the object concerned. */
  group?: string;
  /** Plural resource (for most reasons) or kind (for `Invalid`). */
  kind?: string;
  /** UID of the object concerned. */
  uid?: string;
  /** Causes of an `Invalid` failure. */
  causes?: StatusCause[];
  /** Seconds to wait before retrying. */
  retryAfterSeconds?: number;
}

/** A failed request: thrown inside the emulator and turned into a `Status` answer. */
export class ApiFailure extends Error {
  /** HTTP status code. */
  readonly code: number;
  /** Kubernetes reason, e.g. `NotFound`. */
  readonly reason: string;
  /** Structured details. */
  readonly details: StatusDetails | undefined;
  /** A continue token to put into the `Status` metadata (expired lists). */
  readonly continueToken: string | undefined;

  /**
   * Creates a failure.
   *
   * @param code HTTP status code.
   * @param reason Kubernetes reason.
   * @param message The message.
   * @param details Structured details, if any.
   * @param continueToken A continue token for the `Status` metadata, if any.
   */
  constructor(
    code: number,
    reason: string,
    message: string,
    details?: StatusDetails,
    continueToken?: string,
  ) {
    super(message);
    this.name = "ApiFailure";
    this.code = code;
    this.reason = reason;
    this.details = details;
    this.continueToken = continueToken;
  }

  /** The `Status` object for this failure. */
  toStatus(): Record<string, unknown> {
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: this.continueToken ? { continue: this.continueToken } : {},
      status: "Failure",
      message: this.message,
      ...(this.reason ? { reason: this.reason } : {}),
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

/** `plural` or `plural.group`, as the server names resources in messages. */
export function qualified(def: Pick<ResourceDef, "group" | "plural">): string {
  return def.group ? `${def.plural}.${def.group}` : def.plural;
}

/** `Kind` or `Kind.group`, as the server names kinds in validation messages. */
export function qualifiedKind(def: Pick<ResourceDef, "group" | "kind">): string {
  return def.group ? `${def.kind}.${def.group}` : def.kind;
}

function resourceDetails(def: Pick<ResourceDef, "group" | "plural">, name: string): StatusDetails {
  return { name, ...(def.group ? { group: def.group } : {}), kind: def.plural };
}

/** 404 NotFound for an object. */
export function notFound(def: Pick<ResourceDef, "group" | "plural">, name: string): ApiFailure {
  return new ApiFailure(
    404,
    "NotFound",
    `${qualified(def)} "${name}" not found`,
    resourceDetails(def, name),
  );
}

/** 404 NotFound for a path the server does not serve. */
export function noSuchPath(): ApiFailure {
  return new ApiFailure(404, "NotFound", "the server could not find the requested resource", {});
}

/** 409 AlreadyExists. */
export function alreadyExists(
  def: Pick<ResourceDef, "group" | "plural">,
  name: string,
): ApiFailure {
  return new ApiFailure(
    409,
    "AlreadyExists",
    `${qualified(def)} "${name}" already exists`,
    resourceDetails(def, name),
  );
}

/** 409 Conflict for an outdated resourceVersion, or with a custom explanation. */
export function conflict(
  def: Pick<ResourceDef, "group" | "plural">,
  name: string,
  why =
    "the object has been modified; please apply your changes to the latest version and try again",
): ApiFailure {
  return new ApiFailure(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(def)} "${name}": ${why}`,
    resourceDetails(def, name),
  );
}

/** 422 Invalid with field causes. */
export function invalid(
  def: Pick<ResourceDef, "group" | "kind">,
  name: string,
  causes: StatusCause[],
): ApiFailure {
  const text = causes.map((c) => `${c.field}: ${c.message}`);
  const summary = text.length === 1 ? text[0] : `[${text.join(", ")}]`;
  return new ApiFailure(422, "Invalid", `${qualifiedKind(def)} "${name}" is invalid: ${summary}`, {
    ...(name ? { name } : {}),
    ...(def.group ? { group: def.group } : {}),
    kind: def.kind,
    causes,
  });
}

/** 400 BadRequest. */
export function badRequest(message: string): ApiFailure {
  return new ApiFailure(400, "BadRequest", message);
}

/** 403 Forbidden for an object. */
export function forbidden(
  def: Pick<ResourceDef, "group" | "plural">,
  name: string,
  why: string,
): ApiFailure {
  return new ApiFailure(
    403,
    "Forbidden",
    `${qualified(def)} "${name}" is forbidden: ${why}`,
    resourceDetails(def, name),
  );
}

/** 405 MethodNotAllowed. */
export function methodNotAllowed(message: string): ApiFailure {
  return new ApiFailure(405, "MethodNotAllowed", message, {});
}

/** 410 Expired (resourceVersion or continue token too old). */
export function expired(message: string, continueToken?: string): ApiFailure {
  return new ApiFailure(410, "Expired", message, undefined, continueToken);
}

/** 413 RequestEntityTooLarge, as kube-apiserver words it. */
export function requestEntityTooLarge(limit: number): ApiFailure {
  return new ApiFailure(
    413,
    "RequestEntityTooLarge",
    `Request entity too large: limit is ${limit}`,
  );
}

/** 415 UnsupportedMediaType. */
export function unsupportedMediaType(accepted: readonly string[]): ApiFailure {
  return new ApiFailure(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${
      accepted.join(", ")
    }`,
  );
}

/** The API server's complaint about an unparsable resourceVersion. */
export function invalidResourceVersion(rv: string): string {
  return `resourceVersion: Invalid value: "${rv}": strconv.ParseUint: parsing "${rv}": invalid syntax`;
}

/** 401 Unauthorized. */
export function unauthorized(): ApiFailure {
  return new ApiFailure(401, "Unauthorized", "Unauthorized");
}
