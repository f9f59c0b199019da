/**
 * The operator's own start failure, and how any error is quoted in one log line.
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

/**
 * The first line of an error's message (or of the thrown value), for one-line log messages.
 * @param error Anything thrown.
 * @returns The message's first line.
 */
export function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}
