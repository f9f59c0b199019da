import assert from "node:assert/strict";
import type { ByteStream } from "./raw_stream.ts";
import { MalformedWatchLine } from "./watch_events.ts";
import {
  readWatchEvents,
  WATCH_BUFFER_BYTES,
  WATCH_LINE_BYTES,
  WatchLineTooLongError,
} from "./watch_stream.ts";

/** A byte stream of the given chunks, written into one reused buffer (as a socket reader does). */
function chunks(parts: Iterable<Uint8Array>): ByteStream & { readonly read_: number } {
  const it = parts[Symbol.iterator]();
  let reused = new Uint8Array(0);
  let count = 0;
  return {
    get read_() {
      return count;
    },
    read() {
      const next = it.next();
      if (next.done) return Promise.resolve(null);
      count += next.value.length;
      if (reused.length < next.value.length) reused = new Uint8Array(next.value.length);
      reused.set(next.value);
      return Promise.resolve(reused.subarray(0, next.value.length));
    },
    close() {},
  };
}

Deno.test("readWatchEvents() joins a line split over many reads into one event", async () => {
  const encoder = new TextEncoder();
  const big = "é".repeat(100_000);
  const text =
    `{"type":"ADDED","object":{"s":"${big}"}}\n{"type":"DELETED"}\nnot json\n{"type":"x"}`;
  const bytes = encoder.encode(text);
  // Pieces of 7 bytes: split inside multi-byte characters and around the newlines.
  const parts = function* () {
    for (let i = 0; i < bytes.length; i += 7) yield bytes.subarray(i, i + 7);
  };
  const events: unknown[] = [];
  for await (const event of readWatchEvents(chunks(parts()), 60_000, new AbortController())) {
    events.push(event);
  }
  assert.equal(events.length, 4);
  assert.deepEqual(events[0], { type: "ADDED", object: { s: big } });
  assert.deepEqual(events[1], { type: "DELETED" });
  assert.ok(events[2] instanceof MalformedWatchLine);
  assert.deepEqual(events[3], { type: "x" }, "the last line without a newline counts");
});

Deno.test(
  "readWatchEvents() stops a line longer than the limit with an error naming limit and resource",
  async () => {
    const limit = 64 * 1024;
    const chunk = new Uint8Array(4096).fill(0x78); // "x", never a newline
    const endless = chunks((function* () {
      yield new TextEncoder().encode('{"type":"DELETED"}\n');
      for (let i = 0; i < 10_000; i++) yield chunk; // 40 MiB if read to the end
    })());
    const events: unknown[] = [];
    const error = await (async () => {
      for await (
        const event of readWatchEvents(endless, 60_000, new AbortController(), WATCH_BUFFER_BYTES, {
          maxLineBytes: limit,
          resource: "kopfexamples.kopf.dev",
        })
      ) events.push(event);
    })().then(() => undefined, (e) => e);
    assert.deepEqual(events, [{ type: "DELETED" }], "the events before the long line are kept");
    assert.ok(error instanceof WatchLineTooLongError, `got ${error}`);
    assert.equal(error.limit, limit);
    assert.match(error.message, /kopfexamples\.kopf\.dev/);
    assert.match(error.message, /65536 bytes without a newline/);
    assert.ok(endless.read_ <= limit + 2 * chunk.length, `read ${endless.read_} bytes`);
  },
);

Deno.test("readWatchEvents() accepts a line of exactly the limit", async () => {
  const limit = 1000;
  const line = `{"s":"${"y".repeat(limit - 8)}"}`;
  assert.equal(line.length, limit);
  const bytes = new TextEncoder().encode(`${line}\n`);
  const events: unknown[] = [];
  for await (
    const event of readWatchEvents(
      chunks([bytes.subarray(0, 10), bytes.subarray(10)]),
      60_000,
      new AbortController(),
      WATCH_BUFFER_BYTES,
      { maxLineBytes: limit },
    )
  ) events.push(event);
  assert.equal(events.length, 1);
  assert.ok(WATCH_LINE_BYTES >= 16 * 1024 * 1024, "the default fits any object the server stores");
});
