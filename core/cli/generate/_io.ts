/**
 * What every tooling command shares: the output it is given ({@link ToolingIo}), the error
 * that becomes one `error:` line ({@link UsageError}) and the reading of its command line with
 * `--help` ({@link commandLine}). Apart from `commands.ts`, which loads the commands lazily: a
 * command that imported the dispatcher would close a circle of imports.
 * @module
 */

import { parseArgs, type ParseArgsOptionsConfig } from "node:util";
import { argsErrorMessage } from "../args.ts";

/** What the tooling commands need from the command line around them. */
export interface ToolingIo {
  /** Prints a message line (progress, errors): standard error by default. */
  readonly print: (line: string) => void;
  /** Prints the command's output (generated text when no `-o`): standard output by default. */
  readonly output: (text: string) => void;
  /** Kubeconfig file to use unless `--kubeconfig` is given. */
  readonly kubeconfig?: string | undefined;
}

/** A user error: printed as one `error:` line. */
export class UsageError extends Error {
  /** The error's name: `UsageError`. */
  override name = "UsageError";
}

/** The option every tooling command takes. */
const HELP = { help: { type: "boolean", short: "h" } } as const;

/** What {@link commandLine} reads: the values of the options `O` (and `help`) and the positionals. */
export type CommandLine<O extends ParseArgsOptionsConfig> = ReturnType<
  typeof parseArgs<
    {
      args: string[];
      allowPositionals: boolean;
      options: O & { help: { type: "boolean"; short: "h" } };
    }
  >
>;

/** A tooling command's command line: how it is named and what it accepts. */
export interface CommandSpec<O extends ParseArgsOptionsConfig> {
  /** The command as its `--help` pointer names it, e.g. `kopf init`. */
  readonly name: string;
  /** What `--help` prints. */
  readonly usage: string;
  /** Its options (`-h, --help` is added). */
  readonly options: O;
  /** Whether it takes positional arguments (default: true). */
  readonly positionals?: boolean;
}

/**
 * Reads a tooling command's arguments: a bad one becomes a {@link UsageError} that points to
 * the command's `--help`, and `--help` prints the usage.
 *
 * @example
 * ```ts ignore
 * const parsed = commandLine(args, { name: "kopf init", usage: USAGE, options: {} }, io);
 * if (!parsed) return 0; // --help printed the usage
 * ```
 *
 * @param args The arguments after the command.
 * @param spec The command's name, usage and options.
 * @param io Where `--help` prints the usage.
 * @returns The parsed values and positionals, or `undefined` when `--help` printed the usage.
 * @throws {UsageError} for an unknown option, a missing value or an unexpected positional.
 */
export function commandLine<const O extends ParseArgsOptionsConfig>(
  args: readonly string[],
  spec: CommandSpec<O>,
  io: ToolingIo,
): CommandLine<O> | undefined {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: spec.positionals ?? true,
      options: { ...spec.options, ...HELP },
    });
  } catch (error) {
    throw new UsageError(`${argsErrorMessage(error)} (see ${spec.name} --help)`);
  }
  // O is open here, so the values' type is not worked out yet; `help` is among them (HELP).
  if (!(parsed.values as { help?: boolean }).help) return parsed;
  io.output(spec.usage);
  return undefined;
}
