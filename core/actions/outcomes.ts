/**
 * What happens with an outcome after an attempt: the log line (worded as Kopf words it) and the
 * delivery of the result into `status.<handler id>` of the cycle's patch.
 * @module
 */

import { isMapping } from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import { type Outcome, TemporaryError } from "./execution.ts";
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
  const formatted = ["HandlerTimeoutError", "HandlerRetriesError"];
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
