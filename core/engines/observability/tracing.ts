/**
 * Traces: a span per processing cycle and per handler run, made with the standard
 * `@opentelemetry/api`. Deno exports them over OTLP when the user turns OpenTelemetry on
 * (`OTEL_DENO=true`, see docs/observability.md); Deno's own `fetch` spans of the cycle's API
 * requests become children of the active span. With OpenTelemetry off, the tracer is not even
 * installed ({@link tracingEnabled}), so nothing is recorded and nothing is exported.
 *
 * Also gives the log formatter the active trace and span ids ({@link activeTraceIds}).
 * @module
 */

import { type Attributes, type Span, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { ProxyTracerProvider } from "@opentelemetry/api";
import { installTraceIds } from "../../util/tracing_presence.ts";
import type { Outcome } from "../../actions/execution.ts";
import {
  type CycleInfo,
  type CycleSummary,
  type HandlerInfo,
  NULL_OBSERVER,
  type OperatorObserver,
  outcomeLabel,
} from "./observers.ts";

/** The instrumentation scope of the spans. */
export const TRACER_NAME = "kopf";

/**
 * Whether a tracer provider is installed: Deno's (`OTEL_DENO=true`) or one the program
 * registered through `@opentelemetry/api`.
 * @returns `true` when spans would be recorded.
 */
export function tracingEnabled(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) ||
    provider.getDelegateTracer(TRACER_NAME) !== undefined;
}

/**
 * The ids of the active span, for log lines.
 * @returns The trace and span ids, or `undefined` outside any recorded span.
 */
export function activeTraceIds(): { traceId: string; spanId: string } | undefined {
  const context = trace.getActiveSpan()?.spanContext();
  if (!context || !trace.isSpanContextValid(context)) return undefined;
  return { traceId: context.traceId, spanId: context.spanId };
}

installTraceIds(activeTraceIds);

function objectAttributes(info: CycleInfo): Attributes {
  const attributes: Attributes = { "kopf.resource": info.resource };
  if (info.namespace) attributes["k8s.namespace.name"] = info.namespace;
  if (info.name) attributes["kopf.object.name"] = info.name;
  if (info.uid) attributes["kopf.object.uid"] = info.uid;
  return attributes;
}

function fail(span: Span, error: unknown): void {
  const message = error instanceof Error ? error.message : String(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  if (error instanceof Error) span.recordException(error);
}

/** An observer that makes spans of cycles and handler runs; everything else it ignores. */
export class TracingObserver implements OperatorObserver {
  #tracer: Tracer;

  /** @param tracer The tracer. @default the `kopf` tracer of the global provider */
  constructor(tracer: Tracer = trace.getTracer(TRACER_NAME)) {
    this.#tracer = tracer;
  }

  /** Runs a cycle in a `kopf.cycle` span. */
  cycle<R extends CycleSummary>(info: CycleInfo, run: () => Promise<R>): Promise<R> {
    const attributes = objectAttributes(info);
    if (info.event) attributes["kopf.event"] = info.event;
    return this.#tracer.startActiveSpan(
      `kopf.cycle ${info.resource}`,
      { attributes },
      async (span) => {
        try {
          const result = await run();
          if (result.delay !== undefined) span.setAttribute("kopf.delay", result.delay);
          if (result.failed) span.setStatus({ code: SpanStatusCode.ERROR });
          return result;
        } catch (error) {
          fail(span, error);
          throw error;
        } finally {
          span.end();
        }
      },
    );
  }

  /** Runs a handler attempt in a `kopf.handler` span. */
  handler(info: HandlerInfo, run: () => Promise<Outcome>): Promise<Outcome> {
    const attributes = objectAttributes(info);
    attributes["kopf.handler.id"] = info.handler;
    attributes["kopf.handler.kind"] = info.kind;
    attributes["kopf.retry"] = info.retry;
    if (info.cause) attributes["kopf.cause"] = info.cause;
    return this.#tracer.startActiveSpan(
      `kopf.handler ${info.handler}`,
      { attributes },
      async (span) => {
        try {
          const outcome = await run();
          const label = outcomeLabel(outcome);
          span.setAttribute("kopf.outcome", label);
          if (outcome.kind !== "success" && label !== "waiting") fail(span, outcome.error);
          return outcome;
        } finally {
          span.end();
        }
      },
    );
  }

  /** Not traced. */
  queued(): void {}
  /** Not traced. */
  dequeued(): void {}
  /** Not traced. */
  retried(): void {}
  /** Not traced. */
  watchEvent(): void {}
  /** Not traced. */
  watchConnected(): void {}
  /** Not traced. */
  eventPosted(): void {}
  /** Not traced. */
  eventsDropped(): void {}
  /** Not traced. */
  state(): void {}
}

/**
 * The tracing observer when tracing is on, else the null observer.
 * @returns An observer.
 */
export function tracingObserver(): OperatorObserver {
  return tracingEnabled() ? new TracingObserver() : NULL_OBSERVER;
}
