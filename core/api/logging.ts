/**
 * Log output configuration (the CLI's `--verbose`, `--debug`, `--quiet`, `--log-format`,
 * `--log-prefix`, `--log-refkey`), on top of LogTape: Kopf's `full`, `plain` and `json` formats.
 * @module
 */

import { configure, type LogRecord, type Sink } from "@logtape/logtape";
import type { ObjectRef } from "../actions/loggers.ts";
import { activeTraceIds } from "../util/tracing_presence.ts";

/** Log line formats. */
export type LogFormat = "plain" | "full" | "json";

/** Options of {@link configureLogging}. */
export interface LoggingOptions {
  /** Debug messages of the framework. */
  readonly verbose?: boolean;
  /** Everything, including API traffic. */
  readonly debug?: boolean;
  /** Warnings and errors only. */
  readonly quiet?: boolean;
  /** Line format. @default "full" */
  readonly format?: LogFormat;
  /** Prefix object messages with `[namespace/name]`. @default true for text, false for JSON */
  readonly prefix?: boolean;
  /** JSON key for the object reference. @default "object" */
  readonly refkey?: string;
  /** Where lines go. @default standard error */
  readonly write?: (line: string) => void;
}

const LEVELS: Readonly<Record<string, string>> = {
  trace: "DEBUG",
  debug: "DEBUG",
  info: "INFO",
  warning: "WARNING",
  error: "ERROR",
  fatal: "CRITICAL",
};

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

function timestamp(ms: number): string {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${
    pad(d.getMinutes())
  }:` +
    `${pad(d.getSeconds())},${pad(d.getMilliseconds(), 3)}`;
}

/** C0 controls but the tab, DEL, and C1 controls (`\x9b` starts terminal escapes too). */
// deno-lint-ignore no-control-regex -- matching control characters is the point
const CONTROLS = /[\x00-\x08\x0a-\x1f\x7f-\x9f]/g;
/** The same, newlines allowed (between the frames of a stack trace). */
// deno-lint-ignore no-control-regex -- as above
const CONTROLS_BUT_NEWLINE = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
const ESCAPES: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r" };

function escapeControl(char: string): string {
  return ESCAPES[char] ?? `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`;
}

/**
 * Text with its control characters escaped (`\n`, `\r`, `\x1b`, …), so that a value from an
 * object or a request cannot start a forged log line or send terminal escapes; text without
 * them is returned as it is.
 */
function escaped(text: string, controls: RegExp = CONTROLS): string {
  controls.lastIndex = 0;
  return controls.test(text) ? text.replace(controls, escapeControl) : text;
}

function errorText(error: unknown, escape: boolean): string {
  if (!error) return "";
  if (!(error instanceof Error)) return `\n${escape ? escaped(String(error)) : String(error)}`;
  const stack = error.stack ?? `${error.name}: ${error.message}`;
  if (!escape) return `\n${stack}`;
  // The stack's lines after the message are its frames; the message is escaped as one line.
  const at = error.message ? stack.indexOf(error.message) : -1;
  let end = at >= 0 ? at + error.message.length : stack.search(/\n\s+at /);
  if (end < 0) end = stack.length;
  return `\n${escaped(stack.slice(0, end))}${escaped(stack.slice(end), CONTROLS_BUT_NEWLINE)}`;
}

/**
 * Formats one record as Kopf would print it.
 * @param record The LogTape record.
 * @param options Format, prefix and refkey.
 * @returns The line (without a trailing newline).
 */
export function formatRecord(record: LogRecord, options: LoggingOptions = {}): string {
  const format = options.format ?? "full";
  const message = record.message.map(String).join("");
  const object = record.properties.object as ObjectRef | undefined;
  const error = record.properties.error;
  if (format === "json") {
    const out: Record<string, unknown> = {
      message: options.prefix && object ? `${prefixOf(object)}${message}` : message,
      timestamp: new Date(record.timestamp).toISOString(),
      severity: (LEVELS[record.level] ?? "INFO").toLowerCase(),
    };
    if (object) out[options.refkey ?? "object"] = object;
    if (error) out.error = errorText(error, false).trim();
    // With OpenTelemetry on, lines logged inside a cycle or handler name its trace and span.
    const ids = activeTraceIds();
    if (ids) {
      out.trace_id = ids.traceId;
      out.span_id = ids.spanId;
    }
    return JSON.stringify(out);
  }
  // Text lines: a control character in a value (a spec field, a user name, an exception
  // message) must not start a line of its own or reach the terminal (JSON escapes them anyway).
  const prefix = options.prefix !== false && object ? escaped(prefixOf(object)) : "";
  const text = `${prefix}${escaped(message)}${errorText(error, true)}`;
  if (format === "plain") return text;
  const name = record.category.join(".").padEnd(20);
  const level = `[${(LEVELS[record.level] ?? "INFO").padEnd(8)}]`;
  return `[${timestamp(record.timestamp)}] ${name} ${level} ${text}`;
}

function prefixOf(object: ObjectRef): string {
  return object.namespace ? `[${object.namespace}/${object.name}] ` : `[${object.name}] `;
}

/**
 * Configures the log output for the whole process (LogTape is process-global).
 * @param options Levels and format.
 */
export async function configureLogging(options: LoggingOptions = {}): Promise<void> {
  const write = options.write ?? ((line: string) => {
    Deno.stderr.writeSync(new TextEncoder().encode(`${line}\n`));
  });
  const sink: Sink = (record) => write(formatRecord(record, options));
  const lowest = options.quiet ? "warning" : options.debug || options.verbose ? "debug" : "info";
  await configure({
    reset: true,
    sinks: { out: sink },
    loggers: [
      { category: ["kopf"], lowestLevel: lowest, sinks: ["out"] },
      // API traffic only with --debug (--verbose is the framework's own debug messages).
      { category: ["kopf", "client"], lowestLevel: options.debug ? "debug" : "info" },
      { category: ["logtape", "meta"], lowestLevel: "warning", sinks: ["out"] },
    ],
  });
}
