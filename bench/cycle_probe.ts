/**
 * Diagnostic: the CPU of one processing cycle of an already handled object — what a restart or a
 * relist costs per object once it is listed — without a cluster (the unit tests' fake API and
 * clock). A create handler handles one object as the benchmark's handlers do; then fresh cycles
 * (a new memory each, as after a restart) run over the handled object, and the probe prints the
 * microseconds per cycle. Not part of the main benchmark; for A/B work with `--v8-flags=--prof`.
 *
 *   deno run -A bench/cycle_probe.ts [--cycles 20000] [--rounds 5] [--queue | --quiet]
 *
 * `--queue`: the cycles run through the stream's per-object queue (one worker per object, as
 * a listing's objects are), each over its own copy of the handled object. `--quiet`: no cycle, only
 * the stream's check that an object needs none (`needsNoCycle`), as a restart runs it for every
 * object handled before (and the watch for each echo of an idled-out object).
 * @module
 */
import { parseArgs } from "node:util";
import {
  changingHandler,
  cycleFixture,
  memoryOf,
  objectOf,
} from "../core/reactor/causes/cycle/_test_support.ts";
import { needsNoCycle, processEvent } from "../core/reactor/causes/processing.ts";
import { ObjectQueue } from "../core/reactor/causes/queueing.ts";
import type { KubeObject } from "../core/structs/objects.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    cycles: { type: "string", default: "20000" },
    rounds: { type: "string", default: "5" },
    queue: { type: "boolean" },
    quiet: { type: "boolean" },
  },
});
const cycles = Number(values.cycles), rounds = Number(values.rounds);

const fixture = cycleFixture({
  changing: [changingHandler("create_fn", "create", () => ({ message: "created" }))],
});
let body: KubeObject = fixture.api.put(objectOf({ spec: { field: "value", items: ["a", "b"] } }));
// Handle it: the create handler's cycle, then the cycles its write leads to, until nothing is due.
const memory = memoryOf();
for (let i = 0; i < 5; i++) {
  const result = await processEvent(fixture.deps, memory, { type: "MODIFIED", body });
  if (!result.body) break;
  body = result.body;
}
const writes = fixture.api.patches.length;
if (!writes) throw new Error("the create handler did not write: nothing to measure");

const perCycle: number[] = [];
for (let round = 0; round < rounds; round++) {
  const t0 = performance.now();
  if (values.queue) await throughQueue(round);
  else if (values.quiet) checkQuietly();
  else {
    for (let i = 0; i < cycles; i++) {
      await processEvent(fixture.deps, memoryOf(), { type: "MODIFIED", body });
    }
  }
  perCycle.push(((performance.now() - t0) * 1000) / cycles);
}

/** One round of the listing's check, over a copy of the handled object each (as listed). */
function checkQuietly(): void {
  const quiet = needsNoCycle(fixture.deps);
  if (!quiet) throw new Error("the stream cannot tell quiet objects with these handlers");
  const text = JSON.stringify(body);
  for (let i = 0; i < cycles; i++) {
    if (!quiet(JSON.parse(text))) throw new Error("the handled object is not quiet");
  }
}

/** One round through a queue as the stream makes it: every object listed once. */
async function throughQueue(round: number): Promise<void> {
  const controller = new AbortController();
  let done = 0;
  let all: () => void = () => {};
  const finished = new Promise<void>((resolve) => all = resolve);
  const queue = new ObjectQueue({
    settings: fixture.deps.settings.queueing,
    logger: fixture.deps.logger,
    signal: controller.signal,
    limiter: undefined,
    gate: undefined,
    observer: undefined,
    createMemo: () => ({}),
    forgettable: () => true,
    process: async (memory, event) => {
      const result = await processEvent(fixture.deps, memory, event);
      if (++done === cycles) all();
      return result;
    },
  });
  for (let i = 0; i < cycles; i++) {
    const meta = body.metadata!;
    queue.push({
      type: "MODIFIED",
      body: {
        ...body,
        metadata: { ...meta, name: `obj-${i}`, uid: `uid-${round}-${i}` },
      },
    });
  }
  await finished;
  controller.abort();
}
if (fixture.api.patches.length !== writes) {
  throw new Error("a cycle over the handled object wrote: it is not a no-op cycle");
}
perCycle.sort((a, b) => a - b);
console.log(JSON.stringify({
  cycles,
  rounds,
  usPerCycle: perCycle.map((us) => Math.round(us * 10) / 10),
  median: Math.round(perCycle[Math.floor(rounds / 2)]! * 10) / 10,
}));
