/**
 * The stop sequence of one term of service: the stop signal aborts the watch streams and the
 * handlers' signals; workers get `settings.process.gracePeriod` seconds to finish their current
 * cycle; queued Events are posted; the webhook server cleans up its managed configurations.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { AdmissionRun } from "../../engines/admission/admission.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { sleep } from "../../util/backoff.ts";

/** The running parts of one term, as the stop sequence waits for them. */
export interface RunningTerm {
  /** The term's stop signal: the operator's stop, or a lost Lease. */
  readonly signal: AbortSignal;
  /** The orchestration and the reconcile controllers; rejects if they fail. */
  readonly running: Promise<void>;
  /** The Events poster's run, which posts the queued Events after the signal. */
  readonly posting: Promise<void>;
  /** The webhook server, if any; `finished` rejects if it fails. */
  readonly admission: AdmissionRun | undefined;
  /** The operator's settings (`process.gracePeriod`, read when the stop comes). */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** Stops the operator with an error (a failing orchestration or webhook server). */
  readonly onFailure: (error: unknown) => void;
}

/**
 * Waits until the term is asked to stop (or a running part fails), then stops it in order.
 * @param term The running parts, signal, settings and logger.
 * @returns Resolves when the workers finished (or the grace period ran out), the queued Events
 *   are posted, and the webhook server stopped.
 * @throws what the orchestration or the webhook server failed with.
 */
export async function stopInOrder(term: RunningTerm): Promise<void> {
  const { signal, running, admission } = term;
  const stopped = new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  // A failing orchestration (or webhook server) ends the operator too, after a stop.
  await Promise.race([stopped, running, ...(admission ? [admission.finished] : [])])
    .catch(term.onFailure);
  term.logger.info("Stop requested; finishing the current cycles.");
  // The grace period's timer is cleared once done: it would keep the process alive.
  const graced = new AbortController();
  await Promise.race([
    running,
    sleep(term.settings.process.gracePeriod * 1000, graced.signal).catch(() => {}),
  ]).finally(() => graced.abort());
  await term.posting;
  await admission?.finished; // the managed webhook configurations are cleaned up by now
}
