import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import { createSettings } from "../../settings/settings.ts";
import { IdleCollector } from "./idle_collecting.ts";
import { sleep, until } from "../../util/_test_support.ts";

const COLLECTED =
  /^Collected garbage after (\d+) cycles and 0\.1s idle \(\d+ ms(, allocator trimmed)?, 3 idle connections closed\)$/;

function harness() {
  const controller = new AbortController();
  const logs: LogEntry[] = [];
  const closes: number[] = [];
  const state = { busy: false };
  const collector = new IdleCollector({
    client: { http: { closeIdle: (keep = 0) => (closes.push(keep), 3) } },
    settings: createSettings({ process: { idleGcDelay: 0.1 } }),
    logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
  }, { busy: () => state.busy });
  const collections = () => logs.filter((e) => COLLECTED.test(e.message));
  return { collector, controller, logs, closes, state, collections };
}

Deno.test("IdleCollector: once after each burst, never while idle with nothing processed", async () => {
  const { collector, controller, closes, collections } = harness();
  const running = collector.run(controller.signal);
  await sleep(350); // over three delays with no cycle: nothing to give back
  assert.equal(collections().length, 0);
  assert.deepEqual(closes, []);

  collector.cycle();
  collector.cycle();
  await until(() => collections().length === 1, "the first collection");
  assert.equal(COLLECTED.exec(collections()[0]!.message)![1], "2");
  assert.deepEqual(closes, [2]); // the spare connections of the burst, but a couple kept
  await sleep(350);
  assert.equal(collections().length, 1);

  collector.cycle();
  await until(() => collections().length === 2, "the second collection");
  controller.abort();
  await running;
});

Deno.test("IdleCollector: waits while a worker runs", async () => {
  const { collector, controller, state, collections } = harness();
  state.busy = true;
  const running = collector.run(controller.signal);
  collector.cycle();
  await sleep(400);
  assert.equal(collections().length, 0);
  state.busy = false;
  await until(() => collections().length === 1, "the collection once idle");
  controller.abort();
  await running;
});

Deno.test("IdleCollector: within a burst, one collection every burstGcCycles cycles; none when null", () => {
  const logger = new Logger(["kopf", "test"]);
  const client = { http: { closeIdle: () => 0 } };
  let collected = 0;
  const every3 = new IdleCollector(
    { client, logger, settings: createSettings({ process: { burstGcCycles: 3 } }) },
    { busy: () => true, collect: () => collected++ },
  );
  for (let i = 0; i < 8; i++) every3.cycle();
  assert.equal(collected, 2); // after the 3rd and the 6th cycle

  const settings = createSettings({ process: { burstGcCycles: null } });
  const never = new IdleCollector({ client, logger, settings }, {
    busy: () => true,
    collect: () => collected++,
  });
  for (let i = 0; i < 10_000; i++) never.cycle();
  assert.equal(collected, 2);
  // Read anew: turned on later, it counts from then.
  settings.process.burstGcCycles = 4;
  for (let i = 0; i < 4; i++) never.cycle();
  assert.equal(collected, 3);
});

Deno.test("IdleCollector: the executable's pages go back as it starts, once start-up is over and after each idle collection (pageOutDelay)", async () => {
  const controller = new AbortController();
  const logs: LogEntry[] = [];
  const pagedOut: number[] = [];
  let trims = 0;
  const t0 = performance.now();
  const settings = createSettings({ process: { idleGcDelay: 0.1, pageOutDelay: 0.2 } });
  const collector = new IdleCollector(
    {
      client: { http: { closeIdle: () => 0 } },
      settings,
      logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
    },
    {
      busy: () => false,
      collect: () => {},
      pageOut: () => (pagedOut.push(performance.now() - t0), 30 * 2 ** 20),
      trim: () => (trims++, true),
    },
  );
  const running = collector.run(controller.signal);
  assert.equal(pagedOut.length, 1, "paged out as it starts");
  assert.ok(
    logs.some((e) =>
      e.message ===
        "Paged out the executable after the modules loaded (30 MiB advised, allocator trimmed)"
    ),
  );
  assert.equal(trims, 1, "the allocator trimmed with it");
  await until(() => pagedOut.length === 2, "the page-out after start-up");
  assert.ok(pagedOut[1]! >= 190, `paged out after ${pagedOut[1]} ms`);
  assert.ok(
    logs.some((e) =>
      e.message === "Paged out the executable after start-up (30 MiB advised, allocator trimmed)"
    ),
  );
  assert.equal(trims, 2);
  await sleep(300); // idle with nothing processed: no other
  assert.equal(pagedOut.length, 2);
  collector.cycle();
  await until(() => pagedOut.length === 3, "the page-out after the burst's collection");
  assert.ok(
    logs.some((e) => e.message === "Paged out the executable after 1 cycles (30 MiB advised)"),
  );
  assert.equal(trims, 2, "not again after the collection: releaseMemory trimmed");
  settings.process.pageOutDelay = null; // read anew: the next collection pages nothing out
  collector.cycle();
  await until(
    () => logs.filter((e) => e.message.startsWith("Collected garbage")).length === 2,
    "the second collection",
  );
  assert.equal(pagedOut.length, 3);
  controller.abort();
  await running;
});

/**
 * A collector fed cycles on a test clock (from 10 s), a page-out every 3 cycles where allowed:
 * the times of its page-outs, its log, its settings; `behind` tells whether objects wait.
 */
function burstHarness(behind?: () => boolean) {
  const logs: LogEntry[] = [];
  const logger = new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] });
  const client = { http: { closeIdle: () => 0 } };
  const pagedOutAt: number[] = [];
  const trimmedAt: number[] = [];
  let clock = 10_000;
  const settings = createSettings({
    process: { burstGcCycles: null, pageOutDelay: 0.5, burstPageOutCycles: 3 },
  });
  const collector = new IdleCollector({ client, logger, settings }, {
    busy: () => true,
    collect: () => {},
    pageOut: () => (pagedOutAt.push(clock), 2 ** 20),
    trim: () => (trimmedAt.push(clock), true),
    now: () => clock,
    behind,
  });
  const cycles = (n: number, ms = 1000) => {
    for (let i = 0; i < n; i++) clock += ms, collector.cycle();
  };
  return { logs, pagedOutAt, trimmedAt, settings, cycles };
}

Deno.test("IdleCollector: while cycles run, the pages go back every burstPageOutCycles cycles, 2 s apart at least, only where the page-out is on", () => {
  const { logs, pagedOutAt, trimmedAt, settings, cycles } = burstHarness();
  cycles(6);
  assert.deepEqual(pagedOutAt, [13_000, 16_000]); // after the 3rd and the 6th cycle
  assert.deepEqual(trimmedAt, pagedOutAt, "the allocator trimmed with each page-out");
  // A flood of quick cycles: not within 2 s of the last page-out.
  cycles(150, 10); // 1.5 s
  assert.equal(pagedOutAt.length, 2);
  cycles(50, 10);
  assert.deepEqual(pagedOutAt.slice(2), [18_000]);
  const messages = logs.map((e) => e.message);
  assert.ok(
    messages.includes("Paged out the executable after 3 cycles (1 MiB advised, allocator trimmed)"),
  );
  assert.ok(
    messages.includes(
      "Paged out the executable after 200 cycles (1 MiB advised, allocator trimmed)",
    ),
  );
  // Read anew: the page-out off (pageOutDelay null) stops it, and so does null here.
  settings.process.pageOutDelay = null;
  cycles(10);
  settings.process.pageOutDelay = 0.5;
  settings.process.burstPageOutCycles = null;
  cycles(10);
  assert.equal(pagedOutAt.length, 3);
  settings.process.burstPageOutCycles = 2;
  cycles(2);
  assert.equal(pagedOutAt.length, 4);
  assert.deepEqual(trimmedAt, pagedOutAt);
  assert.equal(createSettings().process.burstPageOutCycles, 500);
});

Deno.test("IdleCollector: within a burst, the pages go back only while objects wait (a backlog), not in a steady load", () => {
  let behind = false;
  const { pagedOutAt, cycles } = burstHarness(() => behind);
  cycles(9); // a steady load: nothing waits
  assert.deepEqual(pagedOutAt, []);
  behind = true; // a backlog: counted anew since the last check (after the 9th cycle)
  cycles(2);
  assert.deepEqual(pagedOutAt, []);
  cycles(1);
  assert.deepEqual(pagedOutAt, [22_000]);
  cycles(3);
  assert.deepEqual(pagedOutAt, [22_000, 25_000]);
  behind = false;
  cycles(6);
  assert.equal(pagedOutAt.length, 2);
});

Deno.test("IdleCollector: no page-out when pageOutDelay is null (the default), nor where it is not possible", async () => {
  for (const [pageOutDelay, possible] of [[null, true], [0.05, false]] as const) {
    const controller = new AbortController();
    const logs: LogEntry[] = [];
    let calls = 0, trims = 0;
    const collector = new IdleCollector(
      {
        client: { http: { closeIdle: () => 0 } },
        settings: createSettings({ process: { idleGcDelay: null, pageOutDelay } }),
        logger: new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] }),
      },
      {
        busy: () => false,
        collect: () => {},
        pageOut: () => (calls++, possible ? 1 : null),
        trim: () => (trims++, false),
      },
    );
    // With neither collection nor page-out to wait for, run() ends by itself.
    await collector.run(controller.signal);
    assert.equal(calls, pageOutDelay === null ? 0 : 2); // as it starts, and after the delay
    assert.equal(trims, calls, "the allocator trimmed only with a page-out");
    assert.deepEqual(logs.filter((e) => e.message.startsWith("Paged out")), []);
  }
  assert.equal(createSettings().process.pageOutDelay, null);
});
