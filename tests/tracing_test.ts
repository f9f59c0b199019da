/**
 * OpenTelemetry traces, received the way users receive them: `kopf run` with Deno's built-in
 * OpenTelemetry on (`OTEL_DENO=true`), exporting OTLP/HTTP (JSON) to a small receiver in this
 * test; one object created on the real control plane; the span tree of its cycle checked.
 */

import assert from "node:assert/strict";
import { spawnOperator } from "./_operator.ts";
import { applyCrds, eventually, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** A span as OTLP/JSON carries it, flattened. */
interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly attributes: Record<string, unknown>;
  readonly status?: { code?: number };
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}

function valueOf(value: OtlpValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  return value.boolValue;
}

/** A local OTLP/HTTP receiver that keeps the spans of `POST /v1/traces` (JSON encoding). */
function receiver() {
  const spans: ReceivedSpan[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === "POST" && path === "/v1/traces") {
      const body = await req.json();
      for (const resource of body.resourceSpans ?? []) {
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId ?? "",
              name: span.name,
              attributes: Object.fromEntries(
                (span.attributes ?? []).map((a: { key: string; value: OtlpValue }) => [
                  a.key,
                  valueOf(a.value),
                ]),
              ),
              status: span.status,
            });
          }
        }
      }
    } else {
      await req.body?.cancel();
    }
    return new Response("{}", { headers: { "content-type": "application/json" } });
  });
  return { spans, port: server.addr.port, server };
}

Deno.test(
  "OpenTelemetry: kopf run exports a span tree per cycle over OTLP — the cycle, its handler run with resource, namespace, handler id, cause, retry and outcome, and the cycle's API requests as children (X-OBS-07)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("traces");
    const otlp = receiver();
    try {
      await using _op = await spawnOperator(
        ["examples/01-minimal/example.ts", "-n", namespace, "--standalone", "--log-format", "json"],
        {
          OTEL_DENO: "true",
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlp.port}`,
          OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
          OTEL_SERVICE_NAME: "kopf-traces-test",
          OTEL_BSP_SCHEDULE_DELAY: "200",
        },
      );
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "traced" },
        spec: { field: "value" },
      }, { namespace });
      const handler = await eventually(
        () =>
          otlp.spans.find((s) =>
            s.name === "kopf.handler create_fn" && s.attributes["kopf.object.name"] === "traced"
          ),
        60_000,
        "the handler span",
      );
      assert.equal(handler.attributes["kopf.handler.id"], "create_fn");
      assert.equal(handler.attributes["kopf.cause"], "create");
      assert.equal(handler.attributes["kopf.retry"], 0);
      assert.equal(handler.attributes["kopf.outcome"], "success");
      assert.equal(handler.attributes["k8s.namespace.name"], namespace);
      assert.equal(handler.attributes["kopf.resource"], "kopfexamples.v1.kopf.dev");

      const cycle = await eventually(
        () => otlp.spans.find((s) => s.spanId === handler.parentSpanId),
        30_000,
        "the handler's parent span",
      );
      assert.match(cycle.name, /^kopf\.cycle kopfexamples/);
      assert.equal(cycle.attributes["kopf.object.name"], "traced");
      assert.equal(cycle.traceId, handler.traceId);

      // The cycle's API request (the patch with the handler's result) is a child span in the
      // same trace: Deno's fetch instrumentation under the active cycle span.
      const requests = await eventually(
        () => {
          const children = otlp.spans.filter((s) =>
            s.traceId === cycle.traceId && s.spanId !== cycle.spanId &&
            s.spanId !== handler.spanId
          );
          return children.some((s) =>
              /PATCH/i.test(s.name) || s.attributes["http.request.method"] === "PATCH"
            )
            ? children
            : undefined;
        },
        30_000,
        "the cycle's PATCH request span",
      );
      const patch = requests.find((s) =>
        /PATCH/i.test(s.name) || s.attributes["http.request.method"] === "PATCH"
      )!;
      assert.ok(
        [cycle.spanId, handler.spanId].includes(patch.parentSpanId),
        "the request's parent is the cycle (or its handler)",
      );
      // Other objects' cycles are other traces: nothing of this trace is about another object.
      for (const span of otlp.spans.filter((s) => s.traceId === cycle.traceId)) {
        const name = span.attributes["kopf.object.name"];
        assert.ok(name === undefined || name === "traced", `${span.name} is about ${name}`);
      }
    } finally {
      await otlp.server.shutdown();
    }
  },
);

Deno.test(
  "OpenTelemetry off (the default): nothing is exported and JSON log lines carry no trace ids (X-OBS-08)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("traces-off");
    const otlp = receiver();
    try {
      await using op = await spawnOperator(
        ["examples/01-minimal/example.ts", "-n", namespace, "--standalone", "--log-format", "json"],
        { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${otlp.port}` },
      );
      await client.api.create(KOPFEXAMPLES, {
        apiVersion: "kopf.dev/v1",
        kind: "KopfExample",
        metadata: { name: "untraced" },
        spec: {},
      }, { namespace });
      const line = await op.waitForLine(/Handler 'create_fn' succeeded/, 60_000);
      assert.equal(JSON.parse(line).trace_id, undefined);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.equal(otlp.spans.length, 0, "no spans exported");
    } finally {
      await otlp.server.shutdown();
    }
  },
);
