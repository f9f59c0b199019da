/**
 * What happens with an outcome after an attempt: the log line (worded as Kopf words it) and the
 * delivery of the result into `status.<handler id>` of the cycle's patch.
 * @module
 */

import { isMapping } from "../structs/dicts.ts";
import type { Patch } from "../structs/patches.ts";
import type { Outcome } from "./execution.ts";
import type { Logger } from "./loggers.ts";

/**
 * Logs an outcome: success at info; Kopf errors briefly; arbitrary errors with their stack.
 * @param logger The object's logger.
 * @param id Handler id.
 * @param outcome What happened.
 */
export function reportOutcome(logger: Logger, id: string, outcome: Outcome): void {
  const known = ["TemporaryError", "PermanentError", "HandlerTimeoutError", "HandlerRetriesError"];
  switch (outcome.kind) {
    case "success":
      logger.info(`Handler '${id}' succeeded.`);
      break;
    case "ignored":
      logger.exception(`Handler '${id}' failed with an exception. Will ignore.`, outcome.error);
      break;
    case "temporary":
      if (outcome.error.name === "HandlerChildrenRetry") break;
      if (known.includes(outcome.error.name)) {
        logger.error(
          `Handler '${id}' failed temporarily: ${outcome.error.message || "(no message)"}`,
        );
      } else {logger.exception(
          `Handler '${id}' failed with an exception. Will retry.`,
          outcome.error,
        );}
      break;
    case "permanent":
      if (known.includes(outcome.error.name)) {
        logger.error(
          `Handler '${id}' failed permanently: ${outcome.error.message || "(no message)"}`,
        );
      } else {logger.exception(
          `Handler '${id}' failed with an exception. Will stop.`,
          outcome.error,
        );}
      break;
  }
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
