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
 * Longest watch event (one line of the stream) a reader accepts: 16 MiB. One event carries one
 * whole object; the API server stores objects of up to about 1.5 MiB (etcd's request limit) and
 * accepts request bodies of up to 3 MiB, so a longer line comes from a broken server or proxy.
 */
export const WATCH_LINE_BYTES = 16 * 1024 * 1024;

/** Limits of {@link readWatchEvents} beyond the read-ahead buffer. */
export interface WatchLineLimits {
  /** Longest line (event) accepted, in bytes. @default {@link WATCH_LINE_BYTES} */
  readonly maxLineBytes?: number | undefined;
  /** The watched resource, named in the error, e.g. `kopfexamples.kopf.dev`. */
  readonly resource?: string | undefined;
}

/**
 * A watch stream sent more bytes than an event may have without ending the line (a broken API
 * server, or a proxy that answers with something else): the stream is closed and, in
 * `watcher()`, reopened after the usual backoff.
 */
export class WatchLineTooLongError extends Error {
  /** The limit that was exceeded, in bytes. */
  readonly limit: number;
  /**
   * Creates the error of a watch line past the limit.
   *
   * @param limit The limit that was exceeded, in bytes.
   * @param resource The watched resource, if known.
   */
  constructor(limit: number, resource?: string) {
    super(
      `Watch stream${resource ? ` of ${resource}` : ""} sent more than ${limit} bytes ` +
        `without a newline (the limit of one event: a broken API server or proxy?); ` +
        `closed and reconnecting`,
    );
    this.name = "WatchLineTooLongError";
    this.limit = limit;
  }
}

/**
 * Reads newline-delimited JSON events from a watch stream, aborting when silent for too long.
 *
 * The stream is read ahead of the consumer, independently of how fast events are processed:
 * the API server closes watchers that do not take their events quickly ("unresponsive
 * watcher"), so the socket is drained whenever the event loop gets to it. Up to `maxBuffered`
 * bytes of received, not yet parsed events are held; beyond that, reading pauses until the
 * consumer catches up (then the kernel's buffer fills, and the server may close the watch,
 * which is resumed from the last resourceVersion — better than unbounded memory). Lines are
 * split on bytes and each is decoded once; the pieces of an incomplete line are kept as they
 * came and joined once its newline arrives (linear in its length). A line longer than
 * `limits.maxLineBytes` ends the stream with a {@link WatchLineTooLongError}.
 *
 * @param source The watch body: bytes from `KubeApi.watchBytes()`, or a `fetch` response.
 * @param inactivityMs Silence after which `controller` is aborted with a {@link WatchStalledError}.
 * @param controller Aborts the underlying request.
 * @param maxBuffered Bytes of unparsed events held at most (see above).
 * @param limits The longest line, and the resource to name when it is exceeded.
 * @returns Parsed events until the stream ends; a line that is not JSON as a
 *   {@link MalformedWatchLine} (the stream goes on).
 * @throws {WatchLineTooLongError} when a line exceeds `limits.maxLineBytes`.
 */
export async function* readWatchEvents(
  source: Response | ByteStream,
  inactivityMs: number,
  controller: AbortController,
  maxBuffered: number = WATCH_BUFFER_BYTES,
  limits: WatchLineLimits = {},
): AsyncGenerator<RawWatchEvent | MalformedWatchLine> {
  // Not `instanceof Response`: the first use of the global loads Deno's fetch classes (~30 ms of
  // start-up CPU and ~3 MiB) in an operator that never builds a Response.
  const body = "read" in source ? source : responseBytes(source);
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
  const maxLine = limits.maxLineBytes ?? WATCH_LINE_BYTES;
  const pump = async () => {
    // The pieces of the incomplete line (copies: the reader may reuse its buffer), joined once.
    let pieces: Uint8Array[] = [];
    let partial = 0;
    const complete = (tail: Uint8Array): Uint8Array => {
      if (!pieces.length) return tail;
      const line = new Uint8Array(partial + tail.length);
      let at = 0;
      for (const piece of pieces) {
        line.set(piece, at);
        at += piece.length;
      }
      line.set(tail, at);
      pieces = [];
      partial = 0;
      return line;
    };
    try {
      for (;;) {
        while (buffered > maxBuffered) await new Promise<void>((r) => (resume = r));
        const data = await body.read();
        if (data === null) break;
        lastRead = performance.now();
        let start = 0;
        for (let lf = data.indexOf(0x0a); lf >= 0; lf = data.indexOf(0x0a, start)) {
          if (partial + lf - start > maxLine) {
            throw new WatchLineTooLongError(maxLine, limits.resource);
          }
          const line = complete(data.subarray(start, lf));
          if (line.length) push(line);
          start = lf + 1;
        }
        if (start < data.length) {
          partial += data.length - start;
          if (partial > maxLine) throw new WatchLineTooLongError(maxLine, limits.resource);
          pieces.push(data.slice(start));
        }
        wake?.();
      }
      if (pieces.length) push(complete(new Uint8Array(0)));
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
