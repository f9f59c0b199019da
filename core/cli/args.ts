/**
 * Wording of command-line parsing errors. `node:util`'s `parseArgs` words an unknown option,
 * when positionals are allowed, with a hint whose quotes do not balance
 * (`… as in '-- "--bogus"`); the CLI says it in its own words instead.
 * @module
 */

/**
 * The one-line message for an error thrown by `parseArgs`, or the first line of any other error.
 *
 * @example
 * ```ts
 * import { parseArgs } from "node:util";
 * import { argsErrorMessage } from "./args.ts";
 * try {
 *   parseArgs({ args: ["--bogus"], allowPositionals: true, options: {} });
 * } catch (error) {
 *   argsErrorMessage(error); // "Unknown option '--bogus'; a file name that starts with '-' goes after '--'"
 * }
 * ```
 *
 * @param error What was thrown.
 * @returns The message, without a trailing period.
 */
export function argsErrorMessage(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
    const option = /^Unknown option '(.*?)'(?:\.|$)/.exec(text)?.[1];
    if (option !== undefined) {
      return `Unknown option '${option}'; a file name that starts with '-' goes after '--'`;
    }
  }
  const line = text.split("\n").map((l) => l.trim()).find(Boolean) ?? "unknown error";
  return line.replace(/\.$/, "");
}
