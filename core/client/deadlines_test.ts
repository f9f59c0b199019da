import assert from "node:assert/strict";
import { Deadlines } from "./deadlines.ts";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

Deno.test("Deadlines: the caller's signal aborts every open request with its reason, not the closed ones", () => {
  const deadlines = new Deadlines();
  const parent = new AbortController();
  const a = deadlines.open(parent.signal, 0);
  const b = deadlines.open(parent.signal, 60_000);
  const done = deadlines.open(parent.signal, 60_000);
  done.close();
  parent.abort(new Error("operator stops"));
  assert.equal(a.signal.reason.message, "operator stops");
  assert.equal(b.signal.reason.message, "operator stops");
  assert.equal(done.signal.aborted, false);
  // A request opened under an aborted signal is aborted at once.
  assert.equal(deadlines.open(parent.signal, 0).signal.aborted, true);
  deadlines.stop();
});

Deno.test("Deadlines: short and long timeouts abort with a TimeoutError; closed ones never", async () => {
  const deadlines = new Deadlines();
  const short = deadlines.open(undefined, 30);
  const long = deadlines.open(undefined, 2_100);
  const closed = deadlines.open(undefined, 2_100);
  closed.close();
  const none = deadlines.open(undefined, 0);
  await sleep(80);
  assert.equal(short.signal.reason?.name, "TimeoutError");
  assert.equal(long.signal.aborted, false);
  await sleep(2_400);
  assert.equal(long.signal.reason?.name, "TimeoutError");
  assert.equal(closed.signal.aborted, false);
  assert.equal(none.signal.aborted, false);
  short.close();
  long.close();
  none.close();
  await sleep(300); // the sweeper stops at its first sweep with nothing due
});

Deno.test("Deadlines: a short-lived caller's signal keeps no listener once its requests are done", () => {
  const deadlines = new Deadlines();
  const parent = new AbortController();
  let added = 0, removed = 0;
  const add = parent.signal.addEventListener.bind(parent.signal);
  const remove = parent.signal.removeEventListener.bind(parent.signal);
  parent.signal.addEventListener = ((...args: Parameters<typeof add>) => {
    added++;
    add(...args);
  }) as typeof add;
  parent.signal.removeEventListener = ((...args: Parameters<typeof remove>) => {
    removed++;
    remove(...args);
  }) as typeof remove;
  const requests = Array.from({ length: 100 }, () => deadlines.open(parent.signal, 0));
  assert.equal(added, 1, "one listener for a hundred requests");
  for (const request of requests) request.close();
  assert.equal(removed, 1, "removed with the last request");
  deadlines.stop();
});
