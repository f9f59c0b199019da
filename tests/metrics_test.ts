/**
 * Prometheus metrics on the real control plane: the endpoint scraped while an operator works,
 * its values checked against what happened (handler runs and retries, API requests against the
 * client's own counters), the exposition validated by Prometheus' parser (promtool); then a real
 * Prometheus scraping `kopf run --metrics` with example 03 and answering a PromQL query.
 */

import assert from "node:assert/strict";
import { on } from "../core/api/on.ts";
import { info } from "../core/api/events.ts";
import { daemon } from "../core/api/spawning.ts";
import { TemporaryError } from "../core/actions/execution.ts";
import {
  authorExposition,
  counter,
  gauge,
  histogram,
} from "../core/engines/observability/metrics_custom.ts";
import { MetricsEngine } from "../core/engines/observability/metrics.ts";
import { main } from "../core/cli/main.ts";
import { Exposition, validateExposition } from "./_prometheus.ts";
import { spawnOperator, startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const RESOURCE = "kopfexamples.v1.kopf.dev";

function kex(name: string) {
  return { apiVersion: "kopf.dev/v1", kind: "KopfExample", metadata: { name }, spec: {} };
}

async function scrape(url: string): Promise<Exposition> {
  const response = await fetch(url);
  assert.equal(response.status, 200);
  assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return new Exposition(await response.text());
}

Deno.test(
  "the metrics endpoint shows handler runs, retries and API requests as they happened (X-OBS-01..04)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("metrics");
    const created = counter({ name: "test_e2e_objects_created_total", help: "Objects created." });
    await using op = await startOperator((registry) => {
      on.create("kopfexamples", { registry, id: "create_fn" }, ({ retry, body }) => {
        if (retry === 0) throw new TemporaryError("Not yet.", { delay: 0.2 });
        created.inc();
        info(body, { reason: "Created", message: "Created at last." });
        return { done: true };
      });
      daemon("kopfexamples", { registry, id: "watch_fn" }, async ({ stopped, sleep }) => {
        while (!stopped.aborted) await sleep(10);
      });
    }, { namespaces: [namespace], metrics: "http://127.0.0.1:0/metrics" });
    await op.ready;
    const line = await op.waitForLog(/^Serving metrics at /);
    const url = line.message.replace(/^Serving metrics at /, "");
    assert.match(url, /^http:\/\/127\.0\.0\.1:[1-9][0-9]*\/metrics$/);

    const names = ["m1", "m2", "m3"];
    for (const name of names) await client.api.create(KOPFEXAMPLES, kex(name), { namespace });
    await eventually(
      async () => {
        const list = await client.api.list(KOPFEXAMPLES, { namespace });
        return list.items.filter((o) => (o.status as Record<string, unknown>)?.create_fn).length ===
          3;
      },
      30_000,
      "all three objects handled",
    );

    const x = await eventually(
      async () => {
        const x = await scrape(url);
        return x.value("kopf_daemons_running", { resource: RESOURCE }) === 3 ? x : undefined;
      },
      15_000,
      "three daemons in the metrics",
    );
    await validateExposition(x.text);
    const labels = { resource: RESOURCE, handler: "create_fn", kind: "change" };
    assert.equal(x.value("kopf_handler_runs_total", { ...labels, outcome: "temporary" }), 3);
    assert.equal(x.value("kopf_handler_runs_total", { ...labels, outcome: "success" }), 3);
    assert.equal(x.value("kopf_handler_retries_total", labels), 3);
    assert.equal(x.value("kopf_handler_duration_seconds", labels), 6);
    // One failed cycle per object (its first attempt), retried after the delay.
    assert.equal(x.value("controller_runtime_reconcile_errors_total", { controller: RESOURCE }), 3);
    assert.equal(
      x.value("controller_runtime_reconcile_total", { controller: RESOURCE, result: "error" }),
      3,
    );
    assert.ok(x.value("workqueue_retries_total", { name: RESOURCE }) >= 3);
    assert.ok(x.value("workqueue_adds_total", { name: RESOURCE }) >= 3);
    assert.ok(x.value("workqueue_queue_duration_seconds", { name: RESOURCE }) >= 3);
    assert.equal(x.value("kopf_objects", { resource: RESOURCE }), 3);
    assert.equal(x.value("kopf_watch_streams", { resource: RESOURCE }), 1);
    assert.equal(
      x.value("kopf_watch_connections_total", { resource: RESOURCE, reason: "initial" }),
      1,
    );
    assert.ok(x.value("kopf_watch_events_total", { resource: RESOURCE, type: "ADDED" }) >= 3);
    assert.equal(x.value("test_e2e_objects_created_total"), 3);
    assert.ok(x.value("process_resident_memory_bytes") > 0);
    // No object names or uids as label values.
    for (const sample of x.samples) {
      for (const value of Object.values(sample.labels)) {
        assert.ok(!names.includes(value), `${sample.name} has an object name as a label`);
      }
    }

    // The Events the handler posted, one per object.
    await eventually(
      async () =>
        (await scrape(url)).value("kopf_k8s_events_posted_total", { type: "Normal" }) === 3,
      15_000,
      "three Events posted",
    );

    // API requests: the same counts as the client's own counters, verb by verb (the operator
    // may be making requests meanwhile: they must agree at some scrape).
    await eventually(
      async () => {
        const x = await scrape(url);
        const entries = op.client.counters.entries();
        const total = op.client.counters.count();
        if (x.value("rest_client_requests_total") !== total) return false;
        return entries.every((e) =>
          x.value("rest_client_requests_total", {
            verb: e.verb,
            resource: e.resource,
            code: e.code ? String(e.code) : "<error>",
          }) === e.count
        );
      },
      15_000,
      "the request counts to match the client's counters",
    );
    const patches = op.client.counters.count({ verb: "patch", resource: "kopfexamples" });
    assert.ok(patches >= 6, `patches: ${patches}`);
  },
);

Deno.test(
  "kopf run --metrics shares the liveness server on the same port; bad URLs are refused (X-OBS-05)",
  opts,
  async () => {
    const port = freePort();
    const namespace = await testNamespace("metricscli");
    await using op = await spawnOperator([
      "examples/01-minimal/example.ts",
      "-n",
      namespace,
      "--standalone",
      "--liveness",
      `http://127.0.0.1:${port}/healthz`,
      "--metrics",
      `http://127.0.0.1:${port}/metrics`,
    ]);
    await op.waitForLine(new RegExp(`Serving metrics at http://127\\.0\\.0\\.1:${port}/metrics`));
    const health = await eventually(async () => {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      await r.body?.cancel();
      return r.status === 200 ? r : undefined;
    });
    assert.equal(health.status, 200);
    // The liveness probe may answer before the first list: scrape until the watch is up.
    const x = await eventually(async () => {
      const s = await scrape(`http://127.0.0.1:${port}/metrics`);
      const up = s.value("kopf_watch_streams", { resource: RESOURCE }) === 1 &&
        s.value("rest_client_requests_total", { verb: "list" }) >= 1;
      return up ? s : undefined;
    });
    assert.equal(await validateExposition(x.text).then(() => true), true);
    assert.ok(x.has("rest_client_requests_total"));
    assert.ok(x.value("rest_client_requests_total", { verb: "list" }) >= 1);
    assert.equal(x.value("kopf_watch_streams", { resource: RESOURCE }), 1);
    assert.equal(await op.stop(), 0);

    const lines: string[] = [];
    const code = await main(
      ["run", "examples/01-minimal/example.ts", "--metrics", "ftp://0.0.0.0:9090/metrics"],
      { write: (l) => lines.push(l) },
    );
    assert.equal(code, 1);
    assert.match(
      lines.join("\n"),
      /error: --metrics: The metrics URL must be http:\/\/host:port\/path/,
    );
  },
);

/** The `prometheus` binary, if installed. */
async function prometheusBinary(): Promise<string | undefined> {
  try {
    const out = await new Deno.Command("prometheus", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    }).output();
    return out.success ? "prometheus" : undefined;
  } catch {
    return undefined;
  }
}

const PROMETHEUS = await prometheusBinary();
if (!PROMETHEUS) {
  console.log(
    "SKIP metrics_test: Prometheus is not installed (tools/test.sh installs Debian's prometheus " +
      "package where apt-get works); the PromQL test is skipped",
  );
}

Deno.test({
  name:
    "a real Prometheus scrapes kopf run --metrics (example 03) and PromQL counts the handler runs (X-OBS-06)",
  ignore: !PROMETHEUS,
  ...opts,
  fn: async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("promql");
    const metricsPort = freePort();
    await using op = await spawnOperator([
      "examples/03-exceptions/example.ts",
      "-n",
      namespace,
      "--standalone",
      "--metrics",
      `http://127.0.0.1:${metricsPort}/metrics`,
    ]);
    await op.waitForLine(/Serving metrics at/);
    await using dir = await tempDir("kopf-prometheus-");
    const webPort = freePort();
    await Deno.writeTextFile(
      `${dir.path}/prometheus.yml`,
      [
        "global: { scrape_interval: 1s, evaluation_interval: 1s }",
        "scrape_configs:",
        "  - job_name: kopf",
        `    static_configs: [{ targets: ["127.0.0.1:${metricsPort}"] }]`,
        "",
      ].join("\n"),
    );
    const prometheus = new Deno.Command(PROMETHEUS!, {
      args: [
        `--config.file=${dir.path}/prometheus.yml`,
        `--storage.tsdb.path=${dir.path}/data`,
        `--web.listen-address=127.0.0.1:${webPort}`,
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const log: string[] = [];
    const reading = (async () => {
      for await (const chunk of prometheus.stderr.pipeThrough(new TextDecoderStream())) {
        log.push(chunk);
      }
    })();
    try {
      await client.api.create(KOPFEXAMPLES, kex("kopf-example-1"), { namespace });
      // Example 03 per object: 1 success, 5 temporary failures, 2 permanent failures, and the
      // third failure of the handler with retries=3, which ends it at once as in Kopf (K26-21;
      // see examples/03-exceptions/example.ts).
      const query = async (promql: string) => {
        const r = await fetch(
          `http://127.0.0.1:${webPort}/api/v1/query?query=${encodeURIComponent(promql)}`,
        );
        const body = await r.json() as {
          status: string;
          data?: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
        };
        assert.equal(body.status, "success");
        return body.data!.result;
      };
      const total = await eventually(
        async () => {
          const result = await query(`sum(kopf_handler_runs_total{job="kopf"})`);
          return result[0]?.value[1] === "9" ? result : undefined;
        },
        60_000,
        `PromQL to count 9 handler runs; Prometheus said:\n${log.join("")}`,
      );
      assert.equal(total.length, 1);
      const byOutcome = await query(
        `sum by (outcome) (kopf_handler_runs_total{job="kopf", resource="${RESOURCE}"})`,
      );
      const outcomes = Object.fromEntries(byOutcome.map((r) => [r.metric.outcome, r.value[1]]));
      assert.deepEqual(outcomes, {
        success: "1",
        temporary: "5",
        permanent: "2",
        "retries-exceeded": "1",
      });
      const up = await query(`up{job="kopf"}`);
      assert.equal(up[0]?.value[1], "1");
    } finally {
      prometheus.kill("SIGTERM");
      await prometheus.status;
      await reading.catch(() => {});
    }
  },
});

Deno.test("authors' metrics: escaped label values, labelled histograms and untouched families parse with promtool", async () => {
  const c = counter({
    name: "test_fmt_calls_total",
    help: "Calls, with a \\ backslash\nand a new line in the help.",
    labelNames: ["target", "code"],
  });
  c.inc(1, { target: 'say "hi"\\there\nnow', code: 200 });
  c.inc(2, { target: "plain", code: 500 });
  gauge({ name: "test_fmt_untouched", help: "Never set.", labelNames: ["x"] });
  const plain = gauge({ name: "test_fmt_level", help: "A level." });
  plain.dec(0.5);
  const h = histogram({
    name: "test_fmt_wait_seconds",
    help: "Waits.",
    labelNames: ["queue"],
    buckets: [1, 0.1],
  });
  h.observe(0.05, { queue: "a" });
  h.observe(0.5, { queue: "a" });
  h.observe(5, { queue: "a" });
  const text = authorExposition();
  for (
    const line of [
      'test_fmt_calls_total{target="say \\"hi\\"\\\\there\\nnow",code="200"} 1',
      'test_fmt_calls_total{target="plain",code="500"} 2',
      "test_fmt_level -0.5",
      'test_fmt_wait_seconds_bucket{queue="a",le="0.1"} 1',
      'test_fmt_wait_seconds_bucket{queue="a",le="1"} 2',
      'test_fmt_wait_seconds_bucket{queue="a",le="+Inf"} 3',
      'test_fmt_wait_seconds_sum{queue="a"} 5.55',
      'test_fmt_wait_seconds_count{queue="a"} 3',
      "# TYPE test_fmt_untouched gauge",
    ]
  ) assert.ok(text.split("\n").includes(line), `missing line: ${line}\n${text}`);
  assert.throws(() => c.inc(-1), /cannot decrease/);
  assert.throws(() => c.inc(1, { nope: "x" }), /no label 'nope'/);
  // The whole exposition (the operator's families and these) passes Prometheus' own parser.
  await validateExposition((await new MetricsEngine({ process: false }).exposition()).text);
});
