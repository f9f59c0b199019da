/**
 * Private helper of the reconcile controller (`reconciling.ts`): what a failed reconcile leaves
 * in the work queue — a retry after the error's delay or the backoff, or none (given up,
 * permanent, ignored) — and the log line that says so.
 * @module
 */

import { PermanentError, TemporaryError } from "../../actions/execution.ts";
import type { Logger } from "../../actions/loggers.ts";
import type { ReconcilingHandler } from "../../intents/reconciliation.ts";
import type { WorkQueue } from "../../util/workqueue.ts";

/**
 * Requeues (or forgets) an object whose reconcile failed, counting the retry in the queue.
 *
 * The handler's `retries` limit comes first; then a {@link TemporaryError} retries after its
 * own delay, a {@link PermanentError} never; other errors follow the handler's `errors` mode,
 * retried after its fixed `backoff` or else the queue's exponential one.
 *
 * @param queue The controller's work queue (keeps the retry count and the delays).
 * @param handler The failed reconcile handler.
 * @param key The object's key in the queue.
 * @param failure What the handler threw.
 * @param logger The object's logger.
 */
export function requeueFailed(
  queue: WorkQueue<string>,
  handler: ReconcilingHandler,
  key: string,
  failure: unknown,
  logger: Logger,
): void {
  const id = handler.id;
  const error = failure instanceof Error ? failure : new Error(String(failure));
  const retries = queue.retries(key);
  if (handler.retries !== undefined && retries + 1 >= handler.retries) {
    logger.error(
      `Reconcile handler '${id}' failed ${
        retries + 1
      } times; giving up until the next change: ${error.message}`,
    );
    queue.forget(key);
    return;
  }
  if (failure instanceof TemporaryError) {
    const delay = failure.delay ?? 0;
    logger.error(
      `Reconcile handler '${id}' failed temporarily: ${error.message} (retrying in ${delay}s)`,
    );
    queue.nextDelay(key); // counts the retry
    queue.addAfter(key, delay * 1000);
    return;
  }
  const mode = failure instanceof PermanentError ? "permanent" : handler.errors ?? "temporary";
  if (mode === "permanent") {
    logger.error(`Reconcile handler '${id}' failed permanently: ${error.message}`);
    queue.forget(key);
    return;
  }
  if (mode === "ignored") {
    logger.error(`Reconcile handler '${id}' failed with an exception; ignored: ${error.message}`);
    queue.forget(key);
    return;
  }
  // A fixed backoff still counts the retry (ctx.retry), so the queue's delay is taken and unused.
  const delayMs = handler.backoff !== undefined
    ? (queue.nextDelay(key), handler.backoff * 1000)
    : queue.nextDelay(key);
  logger.error(
    `Reconcile handler '${id}' failed with an exception: ${error.message} (retrying in ${
      (delayMs / 1000).toFixed(3)
    }s)`,
  );
  queue.addAfter(key, delayMs);
}
