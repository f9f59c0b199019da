/**
 * How any thrown value is quoted in one log line.
 * @module
 */

/**
 * The first line of an error's message (or of the thrown value), for one-line log messages.
 * @param error Anything thrown.
 * @returns The message's first line.
 */
export function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0]!;
}
