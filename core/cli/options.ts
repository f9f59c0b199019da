/**
 * What the `kopf` commands share in reading their options: the logging options (as in Kopf, on
 * every command) and their configuration, the `KOPF_<COMMAND>_<NAME>` environment variables
 * that fill options not given, and the one line an error message is reduced to.
 * @module
 */

import type { LogFormat, LoggingOptions } from "../api/logging.ts";

/** The logging options' lines of a command's usage. */
export const LOGGING_USAGE = `  -v, --verbose             Framework debug messages.
  -d, --debug               Also the API traffic: one line per request.
  -q, --quiet               Warnings and errors only.
      --log-format FORMAT   plain, full (default) or json.
      --log-prefix          Prefix object messages with [namespace/name] (default for text formats).
      --no-log-prefix       Do not prefix object messages.
      --log-refkey KEY      JSON key of the object reference (default: object).
`;

/** The logging options, shared by all commands (as in Kopf). */
export const LOGGING_OPTIONS = {
  verbose: { type: "boolean", short: "v" },
  debug: { type: "boolean", short: "d" },
  quiet: { type: "boolean", short: "q" },
  "log-format": { type: "string" },
  "log-prefix": { type: "boolean" },
  "no-log-prefix": { type: "boolean" },
  "log-refkey": { type: "string" },
} as const;

/** The first non-empty line of an error's message. */
export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.split("\n").map((l) => l.trim()).find(Boolean) ?? "unknown error";
}

/**
 * The environment variable names of the options whose Kopf parameter is named differently from
 * the option (Kopf's CLI reads `KOPF_<COMMAND>_<PARAMETER>`, e.g. `KOPF_RUN_NAMESPACES`); the
 * other options use their own name, e.g. `--log-format` → `KOPF_RUN_LOG_FORMAT`. `null`: none.
 */
const ENV_NAMES: Readonly<Record<string, string | null>> = {
  module: "MODULES",
  namespace: "NAMESPACES",
  "all-namespaces": "CLUSTERWIDE",
  liveness: "LIVENESS_ENDPOINT",
  crd: "CRDS",
  "no-log-prefix": null, // KOPF_RUN_LOG_PREFIX=false
  help: null,
};

const TRUE = new Set(["1", "true", "t", "yes", "y", "on"]);
const FALSE = new Set(["0", "false", "f", "no", "n", "off"]);

/**
 * Fills the options not given on the command line from `KOPF_<COMMAND>_<NAME>` environment
 * variables, as Kopf's CLI does: flags take true/false (1/0, yes/no, on/off), repeatable options
 * take whitespace-separated values.
 * @returns An error message for an unusable value, else `undefined`.
 */
export function fromEnvironment(
  command: string,
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
  specs: Readonly<Record<string, { readonly type: string; readonly multiple?: boolean }>>,
): string | undefined {
  for (const [key, spec] of Object.entries(specs)) {
    const suffix = key in ENV_NAMES ? ENV_NAMES[key] : key.toUpperCase().replaceAll("-", "_");
    if (!suffix || values[key] !== undefined) continue;
    if (key === "log-prefix" && values["no-log-prefix"] !== undefined) continue;
    const name = `KOPF_${command.toUpperCase()}_${suffix}`;
    const raw = Deno.env.get(name)?.trim();
    if (!raw) continue;
    if (spec.type === "boolean") {
      const flag = raw.toLowerCase();
      if (!TRUE.has(flag) && !FALSE.has(flag)) {
        return `${name}=${raw} is not a boolean; use true or false`;
      }
      values[key] = TRUE.has(flag);
    } else values[key] = spec.multiple ? raw.split(/\s+/) : raw;
  }
  return undefined;
}

/** The logging options' values, as parsed. */
export interface LoggingValues {
  readonly verbose?: boolean | undefined;
  readonly debug?: boolean | undefined;
  readonly quiet?: boolean | undefined;
  readonly "log-format"?: string | undefined;
  readonly "log-prefix"?: boolean | undefined;
  readonly "no-log-prefix"?: boolean | undefined;
  readonly "log-refkey"?: string | undefined;
}

/** The logging configuration of the given options, or an error message. */
export function loggingOf(o: LoggingValues): LoggingOptions | string {
  const format = (o["log-format"] ?? "full") as LogFormat;
  if (!["plain", "full", "json"].includes(format)) {
    return `Unknown log format '${format}'; use plain, full or json`;
  }
  return {
    verbose: o.verbose ?? false,
    debug: o.debug ?? false,
    quiet: o.quiet ?? false,
    format,
    prefix: o["no-log-prefix"] ? false : o["log-prefix"] ?? format !== "json",
    refkey: o["log-refkey"] ?? "object",
  };
}
