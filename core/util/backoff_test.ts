import assert from "node:assert/strict";
import { backoffDelay, parseRetryAfter, sleep } from "./backoff.ts";

Deno.test("backoffDelay() grows exponentially up to the cap without jitter", () => {
  const opts = { initialMs: 100, factor: 2, maxMs: 1000, jitter: 0 };
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((n) => backoffDelay(n, opts)), [
    100,
    200,
    400,
    800,
    1000,
    1000,
  ]);
});

Deno.test("backoffDelay() jitter stays within [base*(1-j), base]", () => {
  assert.equal(backoffDelay(2, { initialMs: 100, jitter: 0.5, random: () => 0 }), 400);
  assert.equal(
    backoffDelay(2, { initialMs: 100, jitter: 0.5, random: () => 0.999999 }) > 200,
    true,
  );
  for (let i = 0; i < 200; i++) {
    const d = backoffDelay(3, { initialMs: 100, jitter: 0.5 });
    assert.ok(d >= 400 && d <= 800, `delay ${d} out of range`);
  }
});

Deno.test("parseRetryAfter() reads seconds and HTTP dates", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter(" 0 "), 0);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const now = Date.parse("2026-01-01T00:00:00Z");
  assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now), 5000);
  assert.equal(parseRetryAfter("Wed, 31 Dec 2025 00:00:05 GMT", now), 0);
});

Deno.test("sleep() rejects with the abort reason", async () => {
  const controller = new AbortController();
  const waiting = sleep(10_000, controller.signal);
  controller.abort(new Error("stop"));
  await assert.rejects(waiting, /stop/);
  await assert.rejects(sleep(1, controller.signal), /stop/);
});
