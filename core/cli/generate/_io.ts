/**
 * What every tooling command shares: the output it is given ({@link ToolingIo}) and the error
 * that becomes one `error:` line ({@link UsageError}). Apart from `commands.ts`, which loads the
 * commands lazily: a command that imported the dispatcher would close a circle of imports.
 * @module
 */

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
  override name = "UsageError";
}
