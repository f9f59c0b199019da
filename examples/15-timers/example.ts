/**
 * Timers: functions run periodically for every object, but only while the object is left alone.
 * Port of Kopf's example 15-timers.
 *
 * - `every_few_seconds_sync` runs every 2 s once the object has been unchanged for 5 s;
 * - `every_few_seconds_async` runs every 4 s once it has been unchanged for 10 s.
 *
 * Any essential change (spec, labels, annotations — not status) restarts the idle wait, so
 * both go quiet for a while after each change. Creation counts as a change.
 *
 * `TIMER_SCALE` multiplies all these durations, e.g. 0.2 for a quicker demo (not in Kopf's
 * original; for tests).
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/15-timers/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 *   kubectl patch kex kopf-example-1 --type merge -p '{"spec": {"field": "changed"}}'
 */
import { timer } from "../../mod.ts";

const SCALE = Number(Deno.env.get("TIMER_SCALE") || 1);

timer(
  "kopfexamples",
  { idle: 5 * SCALE, interval: 2 * SCALE },
  function every_few_seconds_sync({ spec, logger }) {
    logger.info(`Ping from a sync timer: field=${JSON.stringify(spec.field)}`);
  },
);

timer(
  "kopfexamples",
  { idle: 10 * SCALE, interval: 4 * SCALE },
  async function every_few_seconds_async({ spec, logger }) {
    await Promise.resolve(); // timers may be async, too
    logger.info(`Ping from an async timer: field=${JSON.stringify(spec.field)}`);
  },
);
