/**
 * Whether traces could be recorded at all, told without loading `@opentelemetry/api` (about 4 MiB
 * of memory that an operator without tracing should not carry): Deno's own OpenTelemetry is on
 * (`OTEL_DENO=true`), or the program has loaded the API (which keeps its registrations on the
 * global object). Only then is `tracing.ts` loaded, which tells it exactly.
 *
 * Also the log formatter's access to the active span's ids: `tracing.ts` installs it when loaded.
 * @module
 */

/** The global slot of `@opentelemetry/api` 1.x. */
const OTEL_GLOBAL = Symbol.for("opentelemetry.js.api.1");

/**
 * Whether spans might be recorded (then load `tracing.ts` to know for sure).
 * @returns `false` when no OpenTelemetry is set up in this process.
 */
export function mayTrace(): boolean {
  if (OTEL_GLOBAL in globalThis) return true;
  try {
    return Deno.env.get("OTEL_DENO") === "true";
  } catch {
    return false; // no permission to read the environment
  }
}

let ids: () => { traceId: string; spanId: string } | undefined = () => undefined;

/**
 * The ids of the active span, for log lines; `undefined` outside spans or without tracing.
 * @returns The trace and span ids.
 */
export function activeTraceIds(): { traceId: string; spanId: string } | undefined {
  return ids();
}

/**
 * Installs the source of the active span's ids (by `tracing.ts`).
 * @param source The function that reads them.
 */
export function installTraceIds(
  source: () => { traceId: string; spanId: string } | undefined,
): void {
  ids = source;
}
