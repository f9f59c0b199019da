/**
 * Hostile API servers and proxies: a watch answered with endless bytes and no newline must end
 * in one clear error, a reconnect, and bounded memory (the stream is closed early, not read to
 * the end), through the whole client (HTTP pool, `KubeApi`, `watcher()`).
 */

import assert from "node:assert/strict";
import { KubeClient } from "../core/client/client.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import { watcher, type WatcherEvent, WatchLineTooLongError } from "../core/client/watching.ts";
import { CONFIGMAPS } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

Deno.test(
  "watcher() closes a stream of endless bytes without a newline, says why, and reconnects",
  opts,
  async () => {
    const limit = 1024 * 1024;
    const bound = 24 * 1024 * 1024; // the hostile server gives up after this much
    const chunk = new Uint8Array(64 * 1024).fill(0x78); // "x"
    let watches = 0;
    let sent = 0;
    let hostileClosed!: () => void;
    const closed = new Promise<void>((resolve) => (hostileClosed = resolve));
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
      const url = new URL(request.url);
      const headers = { "content-type": "application/json" };
      if (url.searchParams.get("watch") !== "true") {
        return Response.json({
          kind: "ConfigMapList",
          metadata: { resourceVersion: "1" },
          items: [],
        });
      }
      if (++watches === 1) {
        const body = new ReadableStream<Uint8Array>({
          pull(controller) {
            if (sent >= bound) {
              controller.close();
              hostileClosed();
              return;
            }
            sent += chunk.length;
            controller.enqueue(chunk);
          },
          cancel() {
            hostileClosed();
          },
        }, { highWaterMark: 0 });
        return new Response(body, { headers });
      }
      const event = {
        type: "ADDED",
        object: { metadata: { name: "sane", namespace: "ns", resourceVersion: "2" } },
      };
      return new Response(`${JSON.stringify(event)}\n`, { headers });
    });
    const port = (server.addr as Deno.NetAddr).port;
    using client = new KubeClient({
      server: `http://127.0.0.1:${port}`,
      credentials: NO_CREDENTIALS,
      source: "a hostile test server",
    });
    const controller = new AbortController();
    const seen: WatcherEvent[] = [];
    try {
      for await (
        const event of watcher(client.api, CONFIGMAPS, {
          namespace: "ns",
          maxLineBytes: limit,
          backoff: { delaysMs: [10] },
          reconnectBackoffMs: 10,
          signal: controller.signal,
        })
      ) {
        seen.push(event);
        if (event.type === "apply") break;
      }
    } finally {
      controller.abort();
      await server.shutdown();
    }
    await closed;
    const error = seen.find((e) => e.type === "error");
    assert.ok(error?.type === "error", `no error among ${seen.map((e) => e.type)}`);
    assert.ok(error.error instanceof WatchLineTooLongError, String(error.error));
    assert.match(error.error.message, /of configmaps sent more than 1048576 bytes/);
    assert.deepEqual(
      seen.map((e) => e.type),
      ["init", "initDone", "connected", "error", "connected", "apply"],
    );
    const applied = seen.at(-1);
    assert.ok(applied?.type === "apply" && applied.object.metadata?.name === "sane");
    // Bounded: the reader stopped and closed the stream long before the server's end.
    assert.ok(sent < bound / 2, `the client read ${sent} bytes of garbage`);
  },
);
