import assert from "node:assert/strict";
import { Logger } from "../../actions/loggers.ts";
import { MetricsEngine } from "../../engines/observability/metrics.ts";
import { createSettings } from "../../settings/settings.ts";
import { runParts, type StopGroup } from "../../util/parts.ts";
import { closeMetricsListener, freePort, recordingListeners } from "../../util/_test_support.ts";
import { endpointParts, type EndpointsDeps } from "./observing.ts";

const GROUPS: readonly StopGroup[] = [
  { name: "endpoints", told: "in turn" },
  { name: "connection", told: "in turn" },
];

/** The endpoints' dependencies: no orchestrator, no probes, nothing wrong but `problems`. */
function deps(
  liveness: string | undefined,
  metricsUrl: string | null,
  logs: string[],
  problems: () => string | undefined = () => undefined,
): EndpointsDeps {
  return {
    observation: { metricsUrl, engine: new MetricsEngine(), observer: undefined },
    liveness,
    probes: [],
    memo: {},
    settings: createSettings(),
    logger: new Logger(["kopf", "test"], { listeners: [(e) => logs.push(e.message)] }),
    indices: {},
    current: () => undefined,
    pause: () => undefined,
    problems,
  };
}

Deno.test("each endpoint server is a part of its own; the metrics engine stops with the connection", () => {
  const parts = endpointParts(
    deps("http://127.0.0.1:0/healthz", "http://127.0.0.1:0/metrics", []),
  );
  assert.deepEqual(parts.map((p) => [p.name, p.group]), [
    ["the metrics engine", "connection"],
    ["the liveness endpoint", "endpoints"],
    ["the metrics endpoint", "endpoints"],
  ]);
  const port = freePort();
  const shared = endpointParts(
    deps(`http://127.0.0.1:${port}/healthz`, `http://127.0.0.1:${port}/metrics`, []),
  );
  assert.deepEqual(shared.map((p) => [p.name, p.group]), [
    ["the metrics engine", "connection"],
    ["the liveness and metrics endpoints", "endpoints"],
  ]);
  assert.deepEqual(
    endpointParts({
      ...deps(undefined, null, []),
      observation: {
        metricsUrl: null,
        engine: undefined,
        observer: undefined,
      },
    }),
    [],
  );
});

Deno.test("a metrics server that stops by itself is named while the liveness server serves on", async () => {
  const logs: string[] = [];
  const missing: string[] = [];
  const stop = new AbortController();
  const healthz = `http://127.0.0.1:${freePort()}/healthz`;
  let recorded: Deno.TcpListener[] = [];
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const run = runParts({
    signal: stop.signal,
    groups: GROUPS,
    onMissing: (why) => void missing.push(why),
  }, async (parts) => {
    const all = deps(
      healthz,
      "http://127.0.0.1:0/metrics",
      logs,
      () => missing.join("; ") || undefined,
    );
    for (const part of endpointParts(all)) {
      const { listeners } = await recordingListeners(() => parts.start(part));
      recorded = [...recorded, ...listeners];
    }
    markStarted();
  });
  try {
    await Promise.race([started, run]);
    const line = logs.find((l) => l.startsWith("Serving metrics at "))!;
    const metrics = line.replace(/^Serving metrics at /, "");
    await closeMetricsListener(metrics, healthz, recorded); // it stops by itself

    for (let i = 0; i < 200 && !missing.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    assert.deepEqual(missing, ["The metrics endpoint is not running: it exited"]);
    const answer = await fetch(healthz);
    assert.equal(answer.status, 503);
    assert.match(await answer.text(), /The metrics endpoint is not running: it exited/);
  } finally {
    stop.abort();
    await run;
  }
});
