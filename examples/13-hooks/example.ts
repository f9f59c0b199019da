/**
 * Operator-level hooks: startup, cleanup, login and probe handlers around per-Pod background
 * tasks. Port of Kopf's example 13-hooks.
 *
 * - `startup_fn_simple` prepares the operator's state; `startup_fn_retried` fails temporarily
 *   three times (1 s apart) before it succeeds. Nothing talks to the cluster until both have
 *   succeeded.
 * - `login_fn` provides the credentials (here: from the kubeconfig, after a 2-second pause);
 *   its failure would be permanent (`errors: "permanent"`) and stop the operator.
 * - `pod_task` starts one background task per Pod seen; each task says "Served by the
 *   background task." every few seconds until asked to stop.
 * - `cleanup_fn` asks all those tasks to stop when the operator exits.
 * - `tasks_count` and `monitored_objects` are probes: their results are served by the liveness
 *   endpoint (with `--liveness`).
 *
 * Tasks pause a random 1…10 seconds between messages; `SERVE_DELAY_MAX` lowers the upper bound
 * (not in Kopf's original; for tests).
 *
 *   kopf run examples/13-hooks/example.ts --verbose --liveness http://127.0.0.1:8080/healthz
 *   kubectl run kopf-pod --image=busybox -- sleep 1
 *   curl http://127.0.0.1:8080/healthz    # {"tasks_count": 1, "monitored_objects": {"default": ["kopf-pod"]}}
 *   (Ctrl+C: the cleanup handler stops the tasks)
 */
import { loadKubeconfig, type Logger, on, TemporaryError } from "../../mod.ts";

const SERVE_DELAY_MAX = Number(Deno.env.get("SERVE_DELAY_MAX") || 10);

/** The stoppers of the background tasks, by namespace and name; set up at startup. */
let STOPPERS: Map<string, Map<string, AbortController>>;

on.startup(function startup_fn_simple({ logger }) {
  logger.info("Initialising the task registry...");
  STOPPERS = new Map();
});

on.startup(function startup_fn_retried({ retry, logger }) {
  if (retry < 3) {
    throw new TemporaryError(`Going to succeed in ${3 - retry}s`, { delay: 1 });
  }
  logger.info("Starting retried...");
  // throw new PermanentError("Unable to start!");  // would stop the operator
});

on.cleanup(function cleanup_fn({ logger }) {
  logger.info("Cleaning up...");
  for (const byName of STOPPERS.values()) {
    for (const stopper of byName.values()) stopper.abort();
  }
  logger.info("All pod-tasks are requested to stop...");
});

on.login({ errors: "permanent" }, async function login_fn() {
  console.log("Logging in in 2s...");
  await sleep(2);
  // The same as the built-in login, in short: the current kubeconfig context's credentials.
  return await loadKubeconfig();
});

on.probe(function tasks_count() {
  let count = 0;
  for (const byName of STOPPERS.values()) count += byName.size;
  return count;
});

on.probe(function monitored_objects() {
  return Object.fromEntries(
    [...STOPPERS].map(([namespace, byName]) => [namespace, [...byName.keys()].sort()]),
  );
});

on.event("pods", function pod_task({ namespace, name, logger }) {
  const byName = STOPPERS.get(namespace ?? "") ?? new Map<string, AbortController>();
  STOPPERS.set(namespace ?? "", byName);
  if (name === undefined || byName.has(name)) return;
  const stopper = new AbortController();
  byName.set(name, stopper);
  void taskFn(logger, stopper.signal); // in the background: the handler finishes now
});

async function taskFn(logger: Logger, shouldStop: AbortSignal): Promise<void> {
  while (!shouldStop.aborted) {
    const delay = 1 + Math.floor(Math.random() * Math.max(1, SERVE_DELAY_MAX));
    if (await sleep(Math.min(delay, SERVE_DELAY_MAX), shouldStop)) break;
    logger.info("Served by the background task.");
  }
  logger.info("Serving is finished by request.");
}

/** Sleeps; resolves `true` if interrupted by the signal. */
function sleep(seconds: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(true);
    const timer = setTimeout(() => resolve(false), seconds * 1000);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(true);
    }, { once: true });
  });
}
