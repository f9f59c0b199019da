/**
 * The operator's own start failure (and, from core/util/errors.ts, how any error is quoted in
 * one log line).
 * @module
 */

/** The operator could not start: the cluster is unreachable, or credentials are rejected. */
export class OperatorStartError extends Error {
  /**
   * Creates the error.
   *
   * @param message One line saying what is wrong and what to check.
   * @param options The cause.
   */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "OperatorStartError";
  }
}

export { firstLine } from "../../util/errors.ts";
