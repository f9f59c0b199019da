import assert from "node:assert/strict";
import { AdmissionGate } from "./gate.ts";

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("AdmissionGate admits up to its limit at once, the rest first come first served", async () => {
  const gate = new AdmissionGate(2);
  assert.deepEqual(gate.enter(), undefined);
  assert.deepEqual(gate.enter(), undefined);
  const order: string[] = [];
  const third = gate.enter()!.then(() => order.push("third"));
  const fourth = gate.enter()!.then(() => order.push("fourth"));
  assert.deepEqual([gate.busy, gate.waiting], [2, 2]);
  await tick();
  assert.deepEqual(order, []);
  gate.leave();
  await third;
  assert.deepEqual(order, ["third"]);
  assert.deepEqual([gate.busy, gate.waiting], [2, 1]);
  gate.leave();
  await fourth;
  assert.deepEqual(order, ["third", "fourth"]);
  gate.leave();
  gate.leave();
  assert.deepEqual(gate.busy, 0);
});

Deno.test("AdmissionGate: a holder away (in a handler) does not count, and comes back without waiting", async () => {
  const gate = new AdmissionGate(1);
  assert.deepEqual(gate.enter(), undefined);
  let release!: () => void;
  const handler = new Promise<void>((resolve) => (release = resolve));
  const away = gate.away(() => handler.then(() => "result"));
  // While the first holder is away, another one is admitted at once.
  assert.deepEqual(gate.busy, 0);
  assert.deepEqual(gate.enter(), undefined);
  release();
  assert.deepEqual(await away, "result");
  // Both count now (over the limit): a newcomer waits until both have left.
  assert.deepEqual(gate.busy, 2);
  let admitted = false;
  const newcomer = gate.enter()!.then(() => (admitted = true));
  gate.leave();
  await tick();
  assert.ok(!admitted);
  gate.leave();
  await newcomer;
  assert.ok(admitted);
});

Deno.test("AdmissionGate: an aborted wait rejects, leaves the line, and does not block those behind", async () => {
  const gate = new AdmissionGate(1);
  assert.deepEqual(gate.enter(), undefined);
  const stop = new AbortController();
  const cancelled = gate.enter(stop.signal)!;
  const behind = gate.enter()!;
  stop.abort(new Error("stream stopped"));
  await assert.rejects(cancelled, /stream stopped/);
  gate.leave();
  await behind; // admitted, not stuck behind the cancelled waiter
  assert.deepEqual(gate.busy, 1);
  gate.leave();
  // With every earlier waiter cancelled, a newcomer is admitted as soon as there is room.
  const other = new AbortController();
  assert.deepEqual(gate.enter(), undefined);
  const lone = gate.enter(other.signal)!;
  other.abort();
  await assert.rejects(lone);
  gate.leave();
  assert.deepEqual(gate.enter(), undefined);
  assert.deepEqual(gate.busy, 1);
});

Deno.test("AdmissionGate.slow(): quick work keeps counting, slow work stops counting after the patience", async () => {
  const gate = new AdmissionGate(1, 40);
  assert.deepEqual(gate.enter(), undefined);
  // Quick work: the holder still counts, so nobody else is admitted meanwhile.
  let admitted = false;
  const other = gate.enter()!.then(() => (admitted = true));
  assert.equal(await gate.slow(() => Promise.resolve("quick")), "quick");
  await tick();
  assert.ok(!admitted);
  // Slow work: after the patience the holder goes away and the waiter is admitted.
  let finish!: () => void;
  const slow = gate.slow(() => new Promise<void>((resolve) => (finish = resolve)));
  await other;
  assert.ok(admitted);
  assert.equal(gate.busy, 1);
  finish();
  await slow;
  assert.equal(gate.busy, 2); // back, counted again without waiting
  gate.leave();
  gate.leave();
  assert.equal(gate.busy, 0);
});
