/**
 * Timers on the real control plane, one operator for many cases: each case is a timer that
 * serves only the objects labelled with its name, so all cases run side by side. Timing is
 * checked by lower bounds (a run never comes sooner than it may), so a slow machine cannot fail
 * them; where an upper bound is needed it is generous and compared with what the wrong
 * behaviour would do.
 */

import assert from "node:assert/strict";
import { PermanentError, TemporaryError } from "../core/actions/execution.ts";
import { timer, type TimerOptions } from "../core/api/spawning.ts";
import type { SpawnedContext } from "../core/engines/runners/daemons.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  kex,
  KOPFEXAMPLES,
  sleep,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
/** Slack for comparing times of the same clock (timers may fire a millisecond early). */
const SLACK = 20;

/** One run of a timer for one object. */
interface Run {
  object: string;
  start: number;
  end?: number;
  retry: number;
  started: number;
  runtime: number;
  v: unknown;
}

/** The runs of each case, in order, and how many of a case run at once (per object). */
class Runs {
  #runs = new Map<string, Run[]>();
  #running = new Map<string, number>();
  overlaps = new Map<string, number>();

  of(name: string, object?: string): Run[] {
    return (this.#runs.get(name) ?? []).filter((r) => object === undefined || r.object === object);
  }

  begin(
    name: string,
    ctx: { name?: string | null; retry: number; started: Date; runtime: number; spec: unknown },
  ): Run {
    const run: Run = {
      object: ctx.name ?? "",
      start: Date.now(),
      retry: ctx.retry,
      started: ctx.started.getTime(),
      runtime: ctx.runtime,
      v: (ctx.spec as { v?: unknown }).v,
    };
    this.#runs.set(name, [...this.of(name), run]);
    const key = `${name}/${run.object}`;
    const running = (this.#running.get(key) ?? 0) + 1;
    this.#running.set(key, running);
    this.overlaps.set(key, Math.max(this.overlaps.get(key) ?? 0, running));
    return run;
  }

  end(name: string, run: Run): void {
    run.end = Date.now();
    const key = `${name}/${run.object}`;
    this.#running.set(key, this.#running.get(key)! - 1);
  }
}

/** Gaps between consecutive items: `to(next) - from(previous)`. */
function gaps(runs: Run[], from: (r: Run) => number, to: (r: Run) => number): number[] {
  return runs.slice(1).map((r, i) => to(r) - from(runs[i]!));
}

Deno.test(
  "timers: interval after the end or sharp on a grid, no self-overlap, initial delay, one-shot, idle-only once per quiet period, all combined, filters and finalizers (HK-TMR-02, 05, 06, 08, 10, 12, 13; OPT-15)",
  opts,
  async (t) => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("timers");
    const runs = new Runs();
    /** Registers a timer serving the objects labelled `<name>: "y"`, recording its runs. */
    const timed = (
      registry: OperatorRegistry,
      name: string,
      options: TimerOptions,
      body: (ctx: SpawnedContext) => unknown = () => {},
    ) =>
      timer("kopfexamples", { ...options, registry, id: name, labels: { [name]: "y" } }, async (
        ctx,
      ) => {
        const run = runs.begin(name, ctx);
        try {
          return await body(ctx);
        } finally {
          runs.end(name, run);
        }
      });
    await using op = await startOperator((registry) => {
      // Runs last 0.6 s, longer than the 0.5 s interval: the next run comes 0.5 s after the end.
      timed(registry, "steady", { interval: 0.5 }, async ({ sleep }) => await sleep(0.6));
      // Runs last 0.7 s; sharp on a 1 s grid: the next run comes 0.3 s after the end.
      timed(registry, "sharp", { interval: 1, sharp: true }, async ({ sleep }) => await sleep(0.7));
      timed(registry, "delayed", { initialDelay: 1.5, interval: 0.3 });
      timed(registry, "oneshot", {});
      timed(registry, "quiet", { idle: 1 });
      timed(registry, "combined", { initialDelay: 1.5, idle: 1, interval: 0.3 });
      timed(registry, "filtered", { interval: 0.2 });
    }, { namespaces: [namespace], settings: createSettings({ posting: { enabled: false } }) });
    await op.ready;

    const created = new Map<string, number>();
    const create = async (name: string, labels: Record<string, string>) => {
      created.set(name, Date.now());
      await client.api.create(KOPFEXAMPLES, kex(name, { v: 1 }, labels), { namespace });
    };
    const change = async (name: string, v: number) => {
      const at = Date.now();
      await client.api.patch(KOPFEXAMPLES, name, { spec: { v } }, { namespace });
      return at;
    };
    await create("both", { steady: "y", sharp: "y" });
    await create("steady2", { steady: "y" });
    await create("delayed", { delayed: "y" });
    await create("oneshot", { oneshot: "y" });
    await create("quiet", { quiet: "y" });
    await create("combined", { combined: "y" });
    await create("filtered", {});

    await t.step("non-sharp: the interval counts from the end of a run (HK-TMR-02)", async () => {
      await eventually(() => runs.of("steady", "both").filter((r) => r.end).length >= 3, 15_000);
      const done = runs.of("steady", "both").filter((r) => r.end);
      const waits = gaps(done, (r) => r.end!, (r) => r.start);
      assert.ok(waits.every((w) => w >= 500 - SLACK), `waits after the end: ${waits}`);
    });

    await t.step("sharp: runs keep to the grid of the interval (HK-TMR-02)", async () => {
      await eventually(() => runs.of("sharp", "both").filter((r) => r.end).length >= 3, 15_000);
      const done = runs.of("sharp", "both").filter((r) => r.end);
      const periods = gaps(done, (r) => r.start, (r) => r.start);
      assert.ok(periods.every((p) => p >= 1_000 - SLACK), `periods: ${periods}`);
      // Non-sharp, each run would start 1 s after the previous one ended (0.7 s later here).
      const waits = gaps(done, (r) => r.end!, (r) => r.start);
      assert.ok(Math.min(...waits) < 800, `waits after the end: ${waits}`);
    });

    await t.step("one timer never overlaps itself, different ones may (HK-TMR-08)", () => {
      assert.equal(runs.overlaps.get("steady/both"), 1);
      assert.equal(runs.overlaps.get("sharp/both"), 1);
      const [steady, sharp] = [runs.of("steady", "both")[0]!, runs.of("sharp", "both")[0]!];
      assert.ok(steady.start < sharp.end! && sharp.start < steady.end!, "the first runs overlap");
    });

    await t.step("a task per object per timer (HK-TMR-10)", () => {
      assert.ok(runs.of("steady", "steady2").length >= 2, "the second object has its own runs");
      assert.equal(runs.overlaps.get("steady/steady2"), 1);
    });

    await t.step(
      "initialDelay postpones the first run, then the interval (HK-TMR-05)",
      async () => {
        await eventually(() => runs.of("delayed").length >= 3, 15_000);
        const first = runs.of("delayed")[0]!.start - created.get("delayed")!;
        assert.ok(first >= 1_500 - SLACK, `first run ${first} ms after creation`);
      },
    );

    await t.step("a timer without interval and idle runs once (HK-TMR-12)", async () => {
      await eventually(() => runs.of("oneshot").length === 1, 15_000);
      await change("oneshot", 2);
      await sleep(1_000);
      assert.equal(runs.of("oneshot").length, 1, "not again, not after a change");
    });

    await t.step(
      "an idle-only timer fires once per quiet period, after each change (HK-TMR-03, 12)",
      async () => {
        await eventually(() => runs.of("quiet").length >= 1, 15_000);
        const first = runs.of("quiet")[0]!.start - created.get("quiet")!;
        assert.ok(first >= 1_000 - SLACK, `first run ${first} ms after creation`);
        await sleep(1_500); // a second quiet period: no run without a change
        assert.equal(runs.of("quiet").length, 1);
        const changed = await change("quiet", 2);
        await eventually(() => runs.of("quiet").length === 2, 15_000);
        const second = runs.of("quiet")[1]!;
        assert.equal(second.v, 2);
        assert.ok(second.start - changed >= 1_000 - SLACK, "idle again after the change");
      },
    );

    await t.step(
      "initialDelay, idle and interval combine (HK-TMR-04, 06)",
      async () => {
        await eventually(() => runs.of("combined").length >= 3, 15_000);
        const first = runs.of("combined")[0]!.start - created.get("combined")!;
        assert.ok(first >= 1_500 - SLACK, `first run ${first} ms after creation (delay > idle)`);
        const changed = await change("combined", 2);
        const newer = await eventually(
          () =>
            runs.of("combined").filter((r) => r.v === 2).length >= 2 &&
            runs.of("combined").filter((r) => r.v === 2),
          15_000,
        );
        // Every run that saw the change came after a new idle period; then on the interval.
        assert.ok(newer[0]!.start - changed >= 1_000 - SLACK, "idle again after the change");
      },
    );

    await t.step("filters start and stop a timer (HK-TMR-10)", async () => {
      assert.equal(runs.of("filtered").length, 0, "no runs while not matching");
      const patchLabels = (value: string | null) =>
        client.api.patch(KOPFEXAMPLES, "filtered", { metadata: { labels: { filtered: value } } }, {
          namespace,
        });
      await patchLabels("y");
      await eventually(() => runs.of("filtered").length >= 2, 15_000, "runs once matching");
      await patchLabels(null);
      await eventually(() => runs.of("filtered").every((r) => r.end), 15_000);
      const count = runs.of("filtered").length;
      await sleep(1_000); // five intervals
      assert.equal(runs.of("filtered").length, count, "no runs once not matching");
    });

    await t.step("an object served only by timers has the finalizer (HK-TMR-13)", async () => {
      for (const name of ["both", "quiet", "delayed"]) {
        const body = await client.api.get(KOPFEXAMPLES, name, { namespace });
        assert.deepEqual(body.metadata?.finalizers, [FINALIZER], name);
      }
    });
  },
);

Deno.test(
  "timer errors: backoff after arbitrary errors, the delay of temporary ones, the interval only after success, retry/started/runtime, a permanent error ends it (HK-TMR-07, 11; KW-03, 04)",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml");
    const namespace = await testNamespace("timer-errors");
    const calls: Array<{ at: number; retry: number; started: number; runtime: number }> = [];
    await using op = await startOperator((registry) => {
      timer(
        "kopfexamples",
        { registry, interval: 0.3, backoff: 1 },
        function flaky({ retry, started, runtime }) {
          calls.push({ at: Date.now(), retry, started: started.getTime(), runtime });
          switch (calls.length) {
            case 1:
              throw new Error("boom"); // then the backoff (1 s), not the interval
            case 2:
              throw new TemporaryError("later", { delay: 0.6 }); // then its delay
            case 3:
              return; // then the interval (0.3 s)
            default:
              throw new PermanentError("enough");
          }
        },
      );
    }, { namespaces: [namespace], settings: createSettings({ posting: { enabled: false } }) });
    await op.ready;
    await client.api.create(KOPFEXAMPLES, kex("e1", { v: 1 }), { namespace });
    await eventually(() => calls.length >= 4, 15_000, "four runs");
    const [c1, c2, c3, c4] = calls as [
      typeof calls[0],
      typeof calls[0],
      typeof calls[0],
      typeof calls[0],
    ];
    assert.ok(c2.at - c1.at >= 1_000 - SLACK, `after an arbitrary error: ${c2.at - c1.at} ms`);
    assert.ok(c3.at - c2.at >= 600 - SLACK, `after a temporary error: ${c3.at - c2.at} ms`);
    assert.ok(c4.at - c3.at >= 300 - SLACK, `after a success: ${c4.at - c3.at} ms`);
    // The retry counter and `started` belong to one cycle; a success starts a new cycle.
    assert.deepEqual(calls.map((c) => c.retry), [0, 1, 2, 0]);
    assert.equal(c2.started, c1.started);
    assert.equal(c3.started, c1.started);
    assert.ok(c4.started > c3.at - SLACK, "a new cycle after the success");
    assert.equal(c1.runtime < 0.5, true, `runtime ${c1.runtime}`);
    assert.ok(c3.runtime >= 1.6 - SLACK / 1000, `runtime ${c3.runtime} s on the third run`);
    // Permanent: never again, not even after a change.
    await client.api.patch(KOPFEXAMPLES, "e1", { spec: { v: 2 } }, { namespace });
    await sleep(1_000);
    assert.equal(calls.length, 4);
    await op.waitForLog(/Handler 'flaky' failed permanently: enough/);
  },
);
