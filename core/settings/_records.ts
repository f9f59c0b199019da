/**
 * The progress record format shared with Python Kopf: fields, their order, and timestamps.
 * Re-exported by `progress.ts`; kept apart so the storages file stays about storages.
 * @module
 */

/**
 * The persisted state of one handler, as Kopf stores it. All fields are optional; `null` (or an
 * absent field) means "not set". Timestamps are strings (see {@linkcode formatTimestamp}).
 */
export interface ProgressRecord {
  /** When the handler was first attempted for the current cause. */
  readonly started?: string | null;
  /** When it finished (succeeded or failed permanently). */
  readonly stopped?: string | null;
  /** When it should be retried next (after an error or a requested delay). */
  readonly delayed?: string | null;
  /** The cause reason it runs for (e.g. `create`), to detect superseded causes. */
  readonly purpose?: string | null;
  /** How many attempts were made so far, the successful one included. */
  readonly retries?: number | null;
  /** Whether it has succeeded (final). */
  readonly success?: boolean | null;
  /** Whether it has failed permanently (final). */
  readonly failure?: boolean | null;
  /** The message of the last error. */
  readonly message?: string | null;
  /** Ids of its sub-handlers of all levels, sorted, so they can be purged with it. */
  readonly subrefs?: readonly string[] | null;
}

/** The field order Kopf writes records in. */
const FIELDS = [
  "started",
  "stopped",
  "delayed",
  "purpose",
  "retries",
  "success",
  "failure",
  "message",
  "subrefs",
] as const;

/**
 * A copy of a record with its fields in Kopf's order (unknown extra fields last), without
 * `undefined` fields; `null` fields are kept.
 * @param record The record.
 * @returns The ordered copy.
 */
export function orderRecord(record: ProgressRecord): Record<string, unknown> {
  const source: Readonly<Record<string, unknown>> = { ...record };
  const ordered: Record<string, unknown> = {};
  const keys = [...FIELDS, ...Object.keys(source).filter((k) => !FIELDS.includes(k as never))];
  for (const key of keys) {
    const value = source[key];
    if (value !== undefined) ordered[key] = Array.isArray(value) ? [...value] : value;
  }
  return ordered;
}

/**
 * Format a moment as current Kopf (checked: 1.45.2) does: ISO 8601, microseconds, explicit UTC offset,
 * e.g. `2020-02-14T16:58:25.396000+00:00` (JavaScript dates carry milliseconds only).
 * @param date The moment.
 * @returns The timestamp string.
 */
export function formatTimestamp(date: Date): string {
  return `${date.toISOString().slice(0, 23)}000+00:00`;
}

const TIMESTAMP =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)?$/;

/**
 * Parse a record timestamp: with or without fractions and with or without an offset (older Kopf
 * versions wrote UTC times without one; those are read as UTC).
 * @param text The timestamp, or `null`/`undefined`.
 * @returns The moment (fractions beyond milliseconds are truncated), or `null` for no value.
 * @throws {RangeError} If the text is not an ISO 8601 timestamp.
 */
export function parseTimestamp(text: string | null | undefined): Date | null {
  if (text === null || text === undefined) return null;
  const match = TIMESTAMP.exec(text);
  if (!match) throw new RangeError(`Not an ISO 8601 timestamp: ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi, s = "0", fraction = "", zone = "Z"] = match;
  const millis = Number(fraction.slice(0, 3).padEnd(3, "0"));
  let time = Date.UTC(
    Number(y),
    Number(mo) - 1,
    Number(d),
    Number(h),
    Number(mi),
    Number(s),
    millis,
  );
  if (zone.toUpperCase() !== "Z") {
    const sign = zone.startsWith("-") ? -1 : 1;
    const digits = zone.slice(1).replace(":", "");
    time -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || "0")) * 60_000;
  }
  if (Number.isNaN(time)) throw new RangeError(`Not a valid timestamp: ${JSON.stringify(text)}`);
  return new Date(time);
}
