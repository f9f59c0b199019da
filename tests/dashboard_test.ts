/**
 * The monitoring manifests of deploy/: every PromQL expression of the Grafana dashboard parses
 * (promtool, as a recording rule) and names only metric families the operator exposes; the metrics
 * Service is accepted by the API server (dry run) and selects the Deployment's Pods and port.
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import { RequestCounters } from "../core/client/counters.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import { havePromtool } from "./_prometheus.ts";
import { tempDir, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const PROMQL_WORDS = new Set([
  "sum",
  "max",
  "min",
  "avg",
  "count",
  "by",
  "without",
  "rate",
  "increase",
  "irate",
  "histogram_quantile",
  "max_over_time",
  "min_over_time",
  "and",
  "or",
  "unless",
  "le",
  "offset",
  "bool",
  "on",
  "ignoring",
  "group_left",
  "group_right",
]);

interface Dashboard {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
}

/** Metric names in an expression: identifiers not in label matchers, grouping or strings. */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""') // strings
    .replace(/\{[^}]*\}/g, "") // label matchers
    .replace(/\b(by|without)\s*\([^)]*\)/g, "") // grouping labels
    .replace(/\[[^\]]*\]/g, ""); // ranges
  return [...stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0])
    .filter((word) => !PROMQL_WORDS.has(word) && !/^\d/.test(word));
}

/** The families the operator's metrics engine exposes (with leader election and shards on). */
async function exposedFamilies(): Promise<Set<string>> {
  const engine = new MetricsEngine();
  engine.attachClient(new RequestCounters(), "127.0.0.1:6443");
  engine.state("leader", 0, { name: "kopf" });
  engine.state("shards_owned", 0, { name: "kopf" });
  const { text } = await engine.exposition();
  engine.close();
  const families = new Set<string>();
  for (const line of text.split("\n")) {
    const match = line.match(/^# TYPE (\S+) (\S+)/);
    if (!match) continue;
    families.add(match[1]!);
    if (match[2] === "histogram") {
      for (const suffix of ["_bucket", "_sum", "_count"]) families.add(match[1]! + suffix);
    }
  }
  return families;
}

Deno.test("deploy/grafana-dashboard.json: every expression parses and names only metrics the operator exposes (X-OBS-09)", async () => {
  const dashboard = JSON.parse(
    await Deno.readTextFile("deploy/grafana-dashboard.json"),
  ) as Dashboard;
  const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ title: p.title, ...t })));
  assert.ok(exprs.length >= 15, `a dashboard of substance: ${exprs.length} expressions`);
  const families = await exposedFamilies();
  for (const { title, expr } of exprs) {
    const names = metricNames(expr);
    assert.ok(names.length > 0, `${title}: no metric in ${expr}`);
    for (const name of names) {
      assert.ok(families.has(name), `${title}: ${name} is not exposed by the operator`);
    }
  }
  for (
    const needed of [
      "kopf_handler_runs_total",
      "kopf_handler_duration_seconds_bucket",
      "workqueue_depth",
      "kopf_watch_connections_total",
      "rest_client_requests_total",
      "process_resident_memory_bytes",
    ]
  ) {
    assert.ok(exprs.some((e) => metricNames(e.expr).includes(needed)), `a panel shows ${needed}`);
  }
  if (!(await havePromtool())) {
    console.warn("promtool is not installed: the expressions' syntax is not checked");
    return;
  }
  await using dir = await tempDir("kopf-dashboard-");
  const rules = exprs.map((e, i) =>
    `      - record: dashboard:expr${i}\n        expr: ${JSON.stringify(e.expr)}`
  );
  await Deno.writeTextFile(
    `${dir.path}/rules.yaml`,
    `groups:\n  - name: dashboard\n    rules:\n${rules.join("\n")}\n`,
  );
  const out = await new Deno.Command("promtool", {
    args: ["check", "rules", `${dir.path}/rules.yaml`],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  assert.ok(out.success, `promtool check rules:\n${said}`);
});

Deno.test(
  "deploy/metrics.yaml: the Service is accepted by the API server and selects the Deployment's Pods and metrics port; the ServiceMonitor scrapes it (X-OBS-09)",
  opts,
  async () => {
    const docs = parseAllDocuments(await Deno.readTextFile("deploy/metrics.yaml"))
      .map((d) => d.toJS() as KubeObject);
    const service = docs.find((d) => d.kind === "Service")!;
    const monitor = docs.find((d) => d.kind === "ServiceMonitor")!;
    const [deployment] = parseAllDocuments(await Deno.readTextFile("deploy/deployment.yaml"))
      .map((d) => d.toJS() as KubeObject);
    const template = (deployment!.spec as {
      template: {
        metadata: { labels: Record<string, string> };
        spec: {
          containers: Array<
            { args: string[]; ports: Array<{ name: string; containerPort: number }> }
          >;
        };
      };
    }).template;
    const spec = service.spec as {
      selector: Record<string, string>;
      ports: Array<{ name: string; port: number; targetPort: string }>;
    };
    for (const [key, value] of Object.entries(spec.selector)) {
      assert.equal(template.metadata.labels[key], value, `the selector matches the Pods: ${key}`);
    }
    const container = template.spec.containers[0]!;
    const target = container.ports.find((p) => p.name === spec.ports[0]!.targetPort);
    assert.ok(target, `the target port ${spec.ports[0]!.targetPort} is the container's`);
    const metricsArg = container.args.find((a) => a.startsWith("--metrics="));
    assert.ok(metricsArg, "the container serves metrics");
    assert.equal(new URL(metricsArg.slice("--metrics=".length)).port, String(target.containerPort));
    const endpoints = (monitor.spec as { endpoints: Array<{ port: string; path: string }> })
      .endpoints;
    assert.equal(endpoints[0]!.port, spec.ports[0]!.name);
    assert.equal(endpoints[0]!.path, new URL(metricsArg.slice("--metrics=".length)).pathname);

    using client = await testClient();
    const namespace = await testNamespace("metrics-svc");
    const response = await client.http.send({
      method: "POST",
      path: `/api/v1/namespaces/${namespace}/services`,
      query: { dryRun: "All" },
      body: service,
    });
    assert.equal(response.status, 201);
    await response.body?.cancel();
  },
);
