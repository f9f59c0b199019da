/**
 * Daemons: long-running background functions, one per object, and how they are stopped.
 * Port of Kopf's example 14-daemons.
 *
 * - `background_sync` fails three times (writing "Failed N times." to `status.message` each
 *   time) and is restarted 1 s after each failure; then it pings every 5 s, watching its
 *   `stopped` signal, and finishes by itself after 30 s ("Accompanying is finished."). A daemon
 *   that returns is not restarted for that object.
 * - `background_async` (only for objects annotated `someannotation=somevalue`) also fails three
 *   times, then pings every 5 s forever, ignoring `stopped`: it only reacts to `signal`, which
 *   aborts 1 s after the stop request (`cancellationBackoff`); if it still ran 0.5 s later
 *   (`cancellationTimeout`), it would be abandoned.
 *
 * Both read `spec` live: a change of `spec.field` shows in the next ping. Deleting the object
 * (or stopping the operator) stops both; the object's finalizer keeps it until they have exited.
 *
 * `DAEMON_PING_INTERVAL` and `DAEMON_LIFETIME` (seconds) change the 5 s and 30 s (not in Kopf's
 * original; for tests).
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/14-daemons/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"field": "changed"}}'
 *   kubectl delete -f examples/obj.yaml
 */
import { daemon, TemporaryError } from "../../mod.ts";

const PING_INTERVAL = Number(Deno.env.get("DAEMON_PING_INTERVAL") || 5);
const LIFETIME = Number(Deno.env.get("DAEMON_LIFETIME") || 30);

// A daemon that cooperates: it checks `stopped` and sleeps with `sleep()`, which returns early
// when the daemon is asked to stop. It exits after 3 failures and then LIFETIME seconds.
daemon(
  "kopfexamples",
  { backoff: 3 },
  async function background_sync({ spec, stopped, sleep, logger, retry, patch }) {
    if (retry < 3) {
      patch.status.message = `Failed ${retry + 1} times.`;
      throw new TemporaryError("Simulated failure.", { delay: 1 });
    }

    const started = Date.now();
    while (!stopped.aborted && (Date.now() - started) / 1000 <= LIFETIME) {
      logger.info(
        `=> Ping from a sync daemon: field=${JSON.stringify(spec.field)}, retry=${retry}`,
      );
      await sleep(PING_INTERVAL);
    }

    patch.status.message = "Accompanying is finished.";
  },
);

// A daemon that does not look at `stopped`: it relies on `signal`, which aborts at the
// cancellation stage of the stop sequence (cancellationBackoff after the stop request).
daemon("kopfexamples", {
  backoff: 3,
  cancellationBackoff: 1.0,
  cancellationTimeout: 0.5,
  annotations: { someannotation: "somevalue" },
}, async function background_async({ spec, logger, retry, signal }) {
  if (retry < 3) {
    throw new TemporaryError("Simulated failure.", { delay: 1 });
  }

  for (;;) {
    logger.info(`=> Ping from an async daemon: field=${JSON.stringify(spec.field)}`);
    await delay(PING_INTERVAL, signal); // throws once the daemon is cancelled
  }
});

/** Sleeps; rejects with the signal's reason when it aborts (like a cancelled asyncio.sleep). */
function delay(seconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    signal.throwIfAborted();
    const timer = setTimeout(resolve, seconds * 1000);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}
