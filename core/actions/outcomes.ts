/**
 * What happens with an outcome after an attempt: the log line (worded as Kopf words it) and the
 * delivery of the result into `status.<handler id>` of the cycle's patch.
 * @module
 */

import { isMapping } from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import { HandlerResultError, type Outcome, TemporaryError } from "./execution.ts";
import type { Logger } from "./loggers.ts";

/**
 * Logs an outcome in Kopf's words (as Kopf 1.45 words them): success at info; Kopf's own errors
 * briefly; arbitrary errors with their stack and what happens next.
 * @param logger The object's logger.
 * @param id Handler id.
 * @param outcome What happened.
 */
export function reportOutcome(logger: Logger, id: string, outcome: Outcome): void {
  const known = ["TemporaryError", "PermanentError"];
  const formatted = ["HandlerTimeoutError", "HandlerRetriesError", "HandlerResultError"];
  switch (outcome.kind) {
    case "success":
      logger.info(`Handler '${id}' succeeded.`);
      break;
    case "ignored":
      logger.exception(
        `Handler '${id}' failed with an exception and will ignore it: ${text(outcome.error)}`,
        outcome.error,
      );
      break;
    case "temporary":
      if (outcome.error.name === "HandlerChildrenRetry") {
        logger.debug(`Handler '${id}' has unfinished sub-handlers. Will retry soon.`);
      } else if (known.includes(outcome.error.name)) {
        logger.error(`Handler '${id}' failed temporarily: ${text(outcome.error)}`);
      } else {
        logger.exception(
          `Handler '${id}' failed with an exception and will try again in ${outcome.delay} ` +
            `seconds: ${text(outcome.error)}`,
          outcome.error,
        );
      }
      break;
    case "permanent":
      if (formatted.includes(outcome.error.name)) {
        // Already says which handler and why; foreseen after an arbitrary error: with its stack.
        const cause = outcome.error.cause;
        if (cause instanceof Error && !(cause instanceof TemporaryError)) {
          logger.exception(outcome.error.message, cause);
        } else logger.error(outcome.error.message);
      } else if (known.includes(outcome.error.name)) {
        logger.error(`Handler '${id}' failed permanently: ${text(outcome.error)}`);
      } else {
        logger.exception(
          `Handler '${id}' failed with an exception and will stop now: ${text(outcome.error)}`,
          outcome.error,
        );
      }
      break;
  }
}

/** Kopf's `str(e) or repr(e)`: the message, else the error's name as a constructor call. */
function text(error: Error): string {
  return error.message || `${error.name}()`;
}

/**
 * What in a handler's result cannot be stored in `status` as it is: only JSON-representable
 * values are stored — `null`, booleans, finite numbers, strings, arrays and plain objects of
 * them. An object property that is `undefined` is left out (as an absent field); objects with a
 * `toJSON()` method (e.g. `Date`) are stored as what it returns. Everything else is reported
 * rather than silently changed: BigInt, Symbol, functions, NaN and ±Infinity, `undefined` in
 * arrays, Map, Set and other class instances, and circular references.
 *
 * @param value The result.
 * @returns The problem and where, e.g. `BigInt at .count`; `undefined` when it can be stored.
 */
export function storageProblem(value: unknown): string | undefined {
  const seen: object[] = [];
  const walk = (value: unknown, path: string, inArray: boolean): string | undefined => {
    const at = path ? ` at ${path}` : "";
    switch (typeof value) {
      case "string":
      case "boolean":
        return undefined;
      case "number":
        return Number.isFinite(value) ? undefined : `${value}${at}`;
      case "bigint":
        return `BigInt${at}`;
      case "symbol":
        return `a Symbol${at}`;
      case "function":
        return `a function${at}`;
      case "undefined":
        return inArray ? `undefined${at}` : undefined;
    }
    if (value === null) return undefined;
    const object = value as Record<string, unknown>;
    if (seen.includes(object)) return `a circular reference${at}`;
    if (typeof object.toJSON === "function") {
      let json: unknown;
      try {
        json = (object.toJSON as (key: string) => unknown)("");
      } catch (error) {
        return `a toJSON() that throws (${error instanceof Error ? error.message : error})${at}`;
      }
      if (json === object) return `a toJSON() that returns its own object${at}`;
      seen.push(object);
      const problem = walk(json, path, inArray);
      seen.pop();
      return problem;
    }
    const proto = Object.getPrototypeOf(object);
    if (!Array.isArray(object) && proto !== Object.prototype && proto !== null) {
      const name = proto?.constructor?.name;
      return `${name ? `a ${name}` : "an object of a class"}${at}`;
    }
    seen.push(object);
    try {
      if (Array.isArray(object)) {
        for (let i = 0; i < object.length; i++) {
          const problem = walk(object[i], `${path}[${i}]`, true);
          if (problem) return problem;
        }
        return undefined;
      }
      for (const key of Object.keys(object)) {
        const name = /^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`;
        const problem = walk(object[key], `${path}${name}`, false);
        if (problem) return problem;
      }
      return undefined;
    } finally {
      seen.pop();
    }
  };
  return walk(value, "", false);
}

/**
 * Checks a successful outcome's result right after the handler returned: a result that cannot
 * be stored (see {@link storageProblem}) fails the handler permanently, once, with its name —
 * instead of failing the object's whole cycle later, again and again.
 *
 * @param id Handler id.
 * @param outcome What the attempt came to.
 * @param where Where the result goes, for the message. @default "stored in status"
 * @returns The same outcome, or a permanent failure with a {@link HandlerResultError}.
 */
export function storableOutcome(
  id: string,
  outcome: Outcome,
  where = "stored in status",
): Outcome {
  if (outcome.kind !== "success") return outcome;
  const problem = storageProblem(outcome.result);
  if (problem === undefined) return outcome;
  return {
    kind: "permanent",
    error: new HandlerResultError(
      `Handler '${id}' returned a value that cannot be ${where}: ${problem}. ` +
        "Return JSON values only (null, booleans, finite numbers, strings, arrays, plain objects).",
    ),
  };
}

/**
 * Puts a successful handler's result into `status.<id>`: objects are merged with what the cycle
 * already delivered, other values replace it; `undefined`/`null` results deliver nothing.
 * @param patch The cycle's patch.
 * @param id Handler id.
 * @param outcome What happened.
 */
export function deliverResult(patch: Patch, id: string, outcome: Outcome): void {
  if (outcome.kind !== "success" || outcome.result === undefined || outcome.result === null) return;
  const result = JSON.parse(JSON.stringify(outcome.result));
  const current = patch.status[id];
  patch.status[id] = isMapping(result) && isMapping(current) ? { ...current, ...result } : result;
}
