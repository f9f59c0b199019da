/**
 * Reading a watch stream: newline-delimited JSON events from the response body, read ahead of
 * the consumer (so that the API server does not drop a slow watcher) within a bounded buffer,
 * and aborted when the stream stays silent for too long ({@link readWatchEvents}).
 *
 * Re-exported by `watching.ts`, which importers use.
 * @module
 */

import { type ByteStream, responseBytes } from "./raw_stream.ts";
import { MalformedWatchLine, type RawWatchEvent } from "./watch_events.ts";
import { WatchStalledError } from "./watch_options.ts";

/** Bytes of unparsed events a watch reader holds before it stops reading: 64 MiB. */
export const WATCH_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * Reads newline-delimited JSON events from a watch stream, aborting when silent for too long.
 *
 * The stream is read ahead of the consumer, independently of how fast events are processed:
 * the API server closes watchers that do not take their events quickly ("unresponsive
 * watcher"), so the socket is drained whenever the event loop gets to it. Up to `maxBuffered`
 * bytes of received, not yet parsed events are held; beyond that, reading pauses until the
 * consumer catches up (then the kernel's buffer fills, and the server may close the watch,
 * which is resumed from the last resourceVersion — better than unbounded memory). Lines are
 * split on bytes and each is decoded once; a partial line is the only copy kept across reads.
 *
 * @param source The watch body: bytes from `KubeApi.watchBytes()`, or a `fetch` response.
 * @param inactivityMs Silence after which `controller` is aborted with a {@link WatchStalledError}.
 * @param controller Aborts the underlying request.
 * @param maxBuffered Bytes of unparsed events held at most (see above).
 * @returns Parsed events until the stream ends; a line that is not JSON as a
 *   {@link MalformedWatchLine} (the stream goes on).
 */
export async function* readWatchEvents(
  source: Response | ByteStream,
  inactivityMs: number,
  controller: AbortController,
  maxBuffered: number = WATCH_BUFFER_BYTES,
): AsyncGenerator<RawWatchEvent | MalformedWatchLine> {
  const body = source instanceof Response ? responseBytes(source) : source;
  // One timer that re-checks the time of the last read when it fires, rather than one cleared
  // and set again per read (thousands per second under load).
  let lastRead = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    const silent = performance.now() - lastRead;
    if (silent >= inactivityMs) controller.abort(new WatchStalledError(inactivityMs));
    else timer = setTimeout(check, inactivityMs - silent);
  };

  const lines: string[] = [];
  let head = 0; // lines[head] is the next to parse
  let buffered = 0;
  let ended = false;
  let failure: unknown;
  let wake: (() => void) | undefined;
  let resume: (() => void) | undefined;
  const decoder = new TextDecoder();
  const push = (bytes: Uint8Array) => {
    const line = decoder.decode(bytes).trim();
    if (!line) return;
    lines.push(line);
    buffered += line.length;
  };
  const pump = async () => {
    let partial: Uint8Array | undefined;
    try {
      for (;;) {
        while (buffered > maxBuffered) await new Promise<void>((r) => (resume = r));
        const bytes = await body.read();
        if (bytes === null) break;
        lastRead = performance.now();
        let data = bytes;
        if (partial) {
          data = new Uint8Array(partial.length + bytes.length);
          data.set(partial);
          data.set(bytes, partial.length);
          partial = undefined;
        }
        let start = 0;
        for (let lf = data.indexOf(0x0a); lf >= 0; lf = data.indexOf(0x0a, start)) {
          if (lf > start) push(data.subarray(start, lf));
          start = lf + 1;
        }
        // The reader may reuse its buffer: keep a copy of the incomplete line only.
        if (start < data.length) partial = data.slice(start);
        wake?.();
      }
      if (partial) push(partial);
    } catch (error) {
      failure = error;
    } finally {
      ended = true;
      wake?.();
    }
  };

  try {
    timer = setTimeout(check, inactivityMs);
    const pumping = pump();
    for (;;) {
      if (head < lines.length) {
        const line = lines[head]!;
        lines[head++] = "";
        buffered -= line.length;
        if (head > 4096 && head * 2 > lines.length) {
          lines.splice(0, head);
          head = 0;
        }
        if (resume && buffered <= maxBuffered) {
          resume();
          resume = undefined;
        }
        let event: RawWatchEvent | MalformedWatchLine;
        try {
          event = JSON.parse(line) as RawWatchEvent;
        } catch {
          event = new MalformedWatchLine(line.length);
        }
        yield event;
        continue;
      }
      if (ended) {
        await pumping;
        if (failure !== undefined) throw failure;
        return;
      }
      await new Promise<void>((r) => (wake = r));
      wake = undefined;
    }
  } catch (error) {
    // Aborted on purpose (a stall, the client-side timeout, a stop): say why, not "aborted".
    if (controller.signal.aborted) throw controller.signal.reason;
    throw error;
  } finally {
    clearTimeout(timer);
    body.close();
    resume?.();
  }
}
