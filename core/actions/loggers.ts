/**
 * Loggers: the operator's own and per-object ones. Every message goes to the log output (LogTape,
 * configured by the CLI or the embedding program) and to the operator's listeners — the Events
 * poster listens to object loggers, so `logger.info()` in a handler shows in `kubectl describe`.
 * @module
 */

import {
  getLogger,
  type Logger as LogTapeLogger,
  type LogLevel as LogTapeLevel,
  type LogRecord,
} from "@logtape/logtape";
import { LOG_LEVELS, type LogLevel } from "../settings/settings.ts";
import type { KubeObject } from "../structs/objects.ts";

/** The reference to an object in logs and Events. */
export interface ObjectRef {
  /** API version. */
  readonly apiVersion?: string | undefined;
  /** Kind. */
  readonly kind?: string | undefined;
  /** Name. */
  readonly name?: string | undefined;
  /** UID. */
  readonly uid?: string | undefined;
  /** Namespace (absent for cluster-scoped objects). */
  readonly namespace?: string | undefined;
}

/** One log message, as listeners receive it. */
export interface LogEntry {
  /** Severity. */
  readonly level: LogLevel;
  /** The message text. */
  readonly message: string;
  /** Logger category, e.g. `["kopf", "objects"]`. */
  readonly category: readonly string[];
  /** The object the message is about. */
  readonly object?: ObjectRef | undefined;
  /** An error attached to the message. */
  readonly error?: unknown;
  /** When it was logged. */
  readonly time: Date;
  /** Do not post this message as an Event (e.g. from event-watching handlers). */
  readonly local?: boolean | undefined;
}

/**
 * Receives every message of a logger and its children.
 *
 * A listener may carry an `accepts` predicate telling which messages it would use at all; a
 * logger then skips building messages that neither the log output nor any listener wants (see
 * {@link Logger.isEnabledFor}). Without the predicate, a listener is assumed to want everything.
 */
export interface LogListener {
  /** Receives one message. */
  (entry: LogEntry): void;
  /** Whether the listener would use a message of this level (and locality); default: yes. */
  accepts?: ((level: LogLevel, local: boolean) => boolean) | undefined;
}

const TO_LOGTAPE: Readonly<Record<LogLevel, LogTapeLevel>> = {
  debug: "debug",
  info: "info",
  warning: "warning",
  error: "error",
  critical: "fatal",
};

/** The category of all object loggers (one shared array: categories are never mutated). */
const OBJECTS_CATEGORY: readonly string[] = Object.freeze(["kopf", "objects"]);

/**
 * LogTape loggers by category. LogTape keeps its category tree in weak references and
 * configures loggers in place, so holding a logger keeps it the one `getLogger()` returns.
 */
const logtapeLoggers = new Map<string, LogTapeLogger>();
/** The same by the identity of the category array (most loggers share theirs). */
const logtapeLoggersByArray = new WeakMap<readonly string[], LogTapeLogger>();

function logtapeLogger(category: readonly string[]): LogTapeLogger {
  let logger = logtapeLoggersByArray.get(category);
  if (logger === undefined) {
    const key = category.join("\u0000");
    logger = logtapeLoggers.get(key);
    if (logger === undefined) {
      logger = getLogger([...category]);
      logtapeLoggers.set(key, logger);
    }
    logtapeLoggersByArray.set(category, logger);
  }
  return logger;
}

/**
 * LogTape's own check before it builds a record (`isCertainlyDropped`: no sink at this level and
 * no filter on the way), where this LogTape version has it; without it, records are emitted.
 */
function certainlyDropped(logger: LogTapeLogger, level: LogTapeLevel): boolean {
  const check = (logger as { isCertainlyDropped?: (level: LogTapeLevel) => boolean })
    .isCertainlyDropped;
  return typeof check === "function" && check.call(logger, level);
}

/**
 * Builds the reference of an object for logs and Events.
 * @param body The object.
 * @returns Its apiVersion, kind, name, uid and namespace (absent fields omitted).
 */
export function buildObjectReference(body: KubeObject): ObjectRef {
  const meta = body.metadata ?? {};
  const ref: Record<string, string> = {};
  if (body.apiVersion) ref.apiVersion = body.apiVersion;
  if (body.kind) ref.kind = body.kind;
  if (meta.name) ref.name = meta.name;
  if (meta.uid) ref.uid = meta.uid;
  if (meta.namespace) ref.namespace = meta.namespace;
  return ref;
}

/** A logger with Kopf's levels; object loggers carry the object reference. */
export class Logger {
  /** Category, e.g. `["kopf", "objects"]`. */
  readonly category: readonly string[];
  /** The object this logger is about. */
  readonly object: ObjectRef | undefined;
  #listeners: readonly LogListener[];
  #local: boolean;

  /**
   * Creates a logger; handlers get theirs ready-made as `context.logger`.
   *
   * @param category Logger category.
   * @param options The object reference, listeners, and whether messages stay local (no Events).
   */
  constructor(
    category: readonly string[],
    options: {
      object?: ObjectRef | undefined;
      listeners?: readonly LogListener[];
      local?: boolean;
    } = {},
  ) {
    this.category = category;
    this.object = options.object;
    this.#listeners = options.listeners ?? [];
    this.#local = options.local ?? false;
  }

  /**
   * A logger for one object, sharing this logger's listeners.
   * @param body The object.
   * @param options `local: true` keeps its messages out of Events.
   * @returns The object logger.
   */
  forObject(body: KubeObject, options: { local?: boolean } = {}): Logger {
    return new Logger(OBJECTS_CATEGORY, {
      object: buildObjectReference(body),
      listeners: this.#listeners,
      local: options.local ?? false,
    });
  }

  /**
   * A logger with another category and the same listeners.
   * @param category The category.
   * @returns The logger.
   */
  child(category: readonly string[]): Logger {
    return new Logger(category, {
      listeners: this.#listeners,
      object: this.object,
      local: this.#local,
    });
  }

  /**
   * Whether a message of this level would go anywhere: to the log output (as LogTape is
   * configured now) or to a listener that accepts it. Callers use it to skip building costly
   * messages; logging without asking is always correct.
   * @param level Severity.
   * @returns `false` only if the message would certainly be dropped.
   */
  isEnabledFor(level: LogLevel): boolean {
    for (const listener of this.#listeners) {
      if (!listener.accepts || listener.accepts(level, this.#local)) return true;
    }
    return logtapeLogger(this.category).isEnabledFor(TO_LOGTAPE[level]);
  }

  /**
   * Logs at debug level.
   *
   * @param message Text.
   */
  debug(message: string): void {
    this.log("debug", message);
  }

  /**
   * Logs at info level.
   *
   * @param message Text.
   */
  info(message: string): void {
    this.log("info", message);
  }

  /**
   * Logs at warning level.
   *
   * @param message Text.
   */
  warning(message: string): void {
    this.log("warning", message);
  }

  /**
   * Logs at warning level; an alias of {@link Logger.warning}.
   *
   * @param message Text.
   */
  warn(message: string): void {
    this.log("warning", message);
  }

  /**
   * Logs at error level.
   *
   * @param message Text.
   * @param error An attached error, if any.
   */
  error(message: string, error?: unknown): void {
    this.log("error", message, error);
  }

  /**
   * Logs at error level with an error attached, whose stack trace the log output prints.
   *
   * @param message Text.
   * @param error The error.
   */
  exception(message: string, error: unknown): void {
    this.log("error", message, error);
  }

  /**
   * Logs a message.
   * @param level Severity.
   * @param message Text.
   * @param error An attached error (its stack is printed by the log formatter).
   */
  log(level: LogLevel, message: string, error?: unknown): void {
    let time: Date | undefined;
    const logtape = logtapeLogger(this.category);
    const logtapeLevel = TO_LOGTAPE[level];
    if (!certainlyDropped(logtape, logtapeLevel)) {
      time = new Date();
      // With its category given, LogTape dispatches the record as it is (without one, it copies
      // the record's property descriptors to add the category: the costly part of logging).
      const record: LogRecord = {
        category: this.category,
        level: logtapeLevel,
        message: [message],
        rawMessage: message,
        timestamp: time.getTime(),
        properties: { object: this.object, error },
      };
      logtape.emit(record);
    }
    // Built only for a listener that would use it (with `-q`, none would).
    let entry: LogEntry | undefined;
    for (const listener of this.#listeners) {
      if (listener.accepts && !listener.accepts(level, this.#local)) continue;
      entry ??= {
        level,
        message,
        category: this.category,
        object: this.object,
        error,
        time: time ?? new Date(),
        local: this.#local,
      };
      listener(entry);
    }
  }
}

/** Whether `level` is at least `minimum`. */
export function isAtLeast(level: LogLevel, minimum: LogLevel): boolean {
  return LOG_LEVELS[level] >= LOG_LEVELS[minimum];
}

/**
 * A logger that drops every message, and whose derived loggers do too: for a dry run of code
 * whose messages would be repeated by the real run (the cycle's phases on a scratch copy).
 */
export class SilentLogger extends Logger {
  /** @param category Logger category. */
  constructor(category: readonly string[] = OBJECTS_CATEGORY) {
    super(category);
  }

  /** Drops the message. */
  override log(): void {}

  /** @returns `false`: nothing is ever logged. */
  override isEnabledFor(): boolean {
    return false;
  }

  /** @returns This logger: silent too. */
  override forObject(): Logger {
    return this;
  }

  /** @returns This logger: silent too. */
  override child(): Logger {
    return this;
  }
}
