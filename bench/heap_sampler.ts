/**
 * Diagnostic: what a Deno process allocates, by function and by file — V8's sampling heap
 * profiler driven through the inspector, with the objects that garbage collections already freed
 * included (so it shows the allocation that drives the collector, not only what stays).
 *
 * Start the process under test with `--inspect-wait=127.0.0.1:PORT` (it waits for this client),
 * e.g. the backlog probe's operator:
 *
 *   deno run -A bench/heap_sampler.ts --port 9229 --out /tmp/alloc.json &
 *   deno run -A bench/backlog_probe.ts --count 3000 --reps 1 \
 *     --variant 'st=kopf-ts;BENCH_PERSISTENCE:status' --deno-flag=--inspect-wait=127.0.0.1:9229
 *
 * The sampler starts sampling, lets the process run, saves the profile every half second while
 * the process lives, and prints the summary when the connection closes (or on Ctrl-C).
 * `--summary FILE` prints the summary of a saved profile. With `--live` the profile leaves out
 * what the collector freed: the last one taken shows what the process still holds, by the
 * place that allocated it (e.g. an idle operator after its collection). Not part of the main
 * benchmark.
 * @module
 */
import { parseArgs } from "node:util";

/** A node of V8's sampling heap profile (the parts used here). */
interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

/** Sums of allocated bytes: self by function, by file (builtins charged to their caller). */
export function summarise(head: ProfileNode, top = 30): string {
  const byFunction = new Map<string, number>(), byFile = new Map<string, number>();
  let total = 0;
  const add = (map: Map<string, number>, key: string, bytes: number) =>
    map.set(key, (map.get(key) ?? 0) + bytes);
  const walk = (node: ProfileNode, file: string) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const short = url.replace(/^.*\/(main|deno|npm)\//, "");
    const here = short && !short.startsWith("ext:") ? short : file;
    add(byFunction, `${functionName || "(anonymous)"} ${short}:${lineNumber + 1}`, node.selfSize);
    add(byFile, here, node.selfSize);
    total += node.selfSize;
    for (const child of node.children) walk(child, here);
  };
  walk(head, "(native)");
  const rows = (map: Map<string, number>) =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, top).map(([key, bytes]) =>
      `${(bytes / 2 ** 20).toFixed(1).padStart(7)} MiB ${
        (100 * bytes / total).toFixed(1).padStart(5)
      }%  ${key}`
    ).join("\n");
  return `allocated (sampled): ${(total / 2 ** 20).toFixed(1)} MiB\n` +
    `--- by file (builtins charged to their caller)\n${rows(byFile)}\n` +
    `--- by function (self)\n${rows(byFunction)}`;
}

/** Samples the process behind the inspector at `port` until it goes away. */
async function sample(
  port: number,
  out: string,
  live: boolean,
): Promise<ProfileNode | undefined> {
  let url: string | undefined;
  while (!url) {
    try {
      const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
      url = targets[0]?.webSocketDebuggerUrl;
    } catch { /* not listening yet */ }
    if (!url) await new Promise((r) => setTimeout(r, 100));
  }
  const socket = new WebSocket(url);
  await new Promise((r) => (socket.onopen = r));
  let id = 0, closed = false;
  const pending = new Map<number, (result: unknown) => void>();
  socket.onmessage = (e) => {
    const message = JSON.parse(e.data);
    pending.get(message.id)?.(message.result);
    pending.delete(message.id);
  };
  socket.onclose = () => {
    closed = true;
    for (const resolve of pending.values()) resolve(undefined);
  };
  const send = (method: string, params: unknown = {}) =>
    new Promise<unknown>((resolve) => {
      if (closed) return resolve(undefined);
      pending.set(++id, resolve);
      socket.send(JSON.stringify({ id, method, params }));
    });
  await send("HeapProfiler.enable");
  await send("HeapProfiler.startSampling", {
    samplingInterval: live ? 16384 : 2048,
    includeObjectsCollectedByMajorGC: !live,
    includeObjectsCollectedByMinorGC: !live,
  });
  await send("Runtime.runIfWaitingForDebugger");
  let last: ProfileNode | undefined;
  let stop = false;
  Deno.addSignalListener("SIGINT", () => (stop = true));
  while (!closed && !stop) {
    await new Promise((r) => setTimeout(r, 500));
    const result = await send("HeapProfiler.getSamplingProfile") as
      | { profile?: { head: ProfileNode } }
      | undefined;
    if (result?.profile) {
      last = result.profile.head;
      await Deno.writeTextFile(out, JSON.stringify(result.profile));
    }
  }
  socket.close();
  return last;
}

if (import.meta.main) {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      port: { type: "string", default: "9229" },
      out: { type: "string", default: "heap-sample.json" },
      summary: { type: "string" },
      top: { type: "string", default: "30" },
      live: { type: "boolean", default: false },
    },
  });
  const head = values.summary
    ? (JSON.parse(await Deno.readTextFile(values.summary)) as { head: ProfileNode }).head
    : await sample(Number(values.port), values.out, values.live);
  if (!head) {
    console.error("no profile: the process went away before the first sample");
    Deno.exit(1);
  }
  console.log(summarise(head, Number(values.top)));
  Deno.exit(0);
}
