/**
 * Hostile API servers and proxies, and unsafe connections: a watch answered with endless bytes
 * and no newline must end in one clear error, a reconnect, and bounded memory (the stream is
 * closed early, not read to the end), through the whole client (HTTP pool, `KubeApi`,
 * `watcher()`); a kubeconfig without the server's CA that turns off the certificate check is
 * obeyed (requests and watches) with one warning per operator run.
 */

import assert from "node:assert/strict";
import { openSocket } from "../core/client/_sockets.ts";
import { KubeClient } from "../core/client/client.ts";
import { NO_CREDENTIALS } from "../core/client/connection.ts";
import { watcher, type WatcherEvent, WatchLineTooLongError } from "../core/client/watching.ts";
import { parse, stringify } from "yaml";
import type { LogEntry } from "../core/actions/loggers.ts";
import { on } from "../core/api/on.ts";
import { OperatorRegistry } from "../core/intents/registries.ts";
import { operator } from "../core/reactor/lifetime/running.ts";
import { createSettings } from "../core/settings/settings.ts";
import { sharedControlPlane } from "../testing/control_plane.ts";
import { CONFIGMAPS, eventually, tempDir, testClient, testNamespace } from "./_support.ts";

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

Deno.test(
  "an operator run with insecure-skip-tls-verify: true warns once and works",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    await using dir = await tempDir("kopf-insecure-");
    const config = parse(await Deno.readTextFile(plane.kubeconfigPath)) as {
      clusters: { cluster: Record<string, unknown> }[];
    };
    // Without the CA: the server's certificate cannot be verified, only not checked at all.
    for (const { cluster } of config.clusters) {
      delete cluster["certificate-authority-data"];
      delete cluster["certificate-authority"];
      cluster["insecure-skip-tls-verify"] = true;
    }
    const kubeconfig = `${dir.path}/config`;
    await Deno.writeTextFile(kubeconfig, stringify(config));
    const namespace = await testNamespace("insecure");
    const registry = new OperatorRegistry();
    const seen: string[] = [];
    on.event("configmaps", { registry }, ({ name }) => {
      if (name) seen.push(name);
    });
    const logs: LogEntry[] = [];
    const controller = new AbortController();
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => (ready = resolve));
    const running = operator({
      registry,
      settings: createSettings({ posting: { enabled: false } }),
      standalone: true,
      namespaces: [namespace],
      kubeconfig,
      listeners: [(entry) => logs.push(entry)],
      signal: controller.signal,
      onReady: ready,
    });
    try {
      await Promise.race([isReady, running]);
      using client = await testClient();
      await client.api.create(CONFIGMAPS, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "over-insecure" },
      }, { namespace });
      await eventually(() => seen.includes("over-insecure"), 30_000, "the event handler");
    } finally {
      controller.abort();
      await running;
    }
    const warnings = logs.filter((e) => e.message.includes("insecure-skip-tls-verify"));
    assert.equal(warnings.length, 1, warnings.map((e) => e.message).join("; "));
    assert.equal(warnings[0]!.level, "warning");
    assert.match(warnings[0]!.message, /certificate is not verified.*certificate-authority/);
  },
);

Deno.test(
  "an unverified TLS socket (insecure-skip-tls-verify) reads and writes as a Deno.Conn; close() interrupts a pending read",
  opts,
  async () => {
    const plane = await sharedControlPlane();
    const config = parse(await Deno.readTextFile(plane.kubeconfigPath)) as {
      clusters: { cluster: { server: string } }[];
    };
    const server = new URL(config.clusters[0]!.cluster.server);
    const options = { hostname: server.hostname, port: Number(server.port), tls: true };
    const request = `GET /livez HTTP/1.1\r\nHost: ${server.host}\r\nConnection: close\r\n\r\n`;
    const bytes = new TextEncoder().encode(request);
    // Verified without the CA: refused at the handshake (the first write), as before.
    const verified = await openSocket(options);
    await assert.rejects(() => verified.write(bytes), /UnknownIssuer/);
    verified.close();
    const socket = await openSocket({ ...options, insecureSkipTlsVerify: true });
    for (let sent = 0; sent < bytes.length;) sent += await socket.write(bytes.subarray(sent));
    let text = "";
    const buffer = new Uint8Array(7); // small: an answer is read in many pieces
    for (let n; (n = await socket.read(buffer)) !== null;) {
      text += new TextDecoder().decode(buffer.subarray(0, n));
    }
    assert.match(text, /^HTTP\/1\.1 (200|401|403) /);
    socket.close();
    // A read pending when the socket is closed fails, as a Deno.Conn's does.
    const idle = await openSocket({ ...options, insecureSkipTlsVerify: true });
    const pending = idle.read(new Uint8Array(16));
    idle.close();
    await assert.rejects(pending, Deno.errors.Interrupted);
  },
);
