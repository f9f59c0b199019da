/**
 * Memory of the webhook server under hostile clients, measured on a separate process (the
 * fixture bench/lib/hostile_http_server.ts): its RSS before, its peak (VmHWM) and after each
 * attack. The attacks: 50 TLS connections that send only headers declaring a 20 MB body and
 * then wait; one connection sending a real 150 MB JSON body. See docs/reliability.md
 * ("Hostile input").
 *
 *   deno run -A bench/hostile_http.ts                 # this tree
 *   deno run -A bench/hostile_http.ts --root DIR      # another tree (e.g. `git archive` of an
 *                                                     # older commit), for a before/after
 *
 * It is a measurement, not a test: nothing here asserts.
 * @module
 */
import { parseArgs } from "node:util";

const args = parseArgs({
  options: { root: { type: "string" }, wait: { type: "string", default: "5" } },
});
const root = args.values.root ?? new URL("..", import.meta.url).pathname;
const waitMs = Number(args.values.wait) * 1000;

function memory(pid: number): { rss: number; hwm: number } {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  const kib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rss: kib("VmRSS") / 1024, hwm: kib("VmHWM") / 1024 };
}

async function fixture() {
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--config",
      `${root}/deno.json`,
      new URL("lib/hostile_http_server.ts", import.meta.url).pathname,
      root,
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let line = "";
  while (!line.includes("\n")) line += (await reader.read()).value ?? "";
  const { port, caBundle } = JSON.parse(line) as { port: number; caBundle: string };
  const stdin = child.stdin.getWriter();
  return {
    pid: child.pid,
    port,
    caPem: atob(caBundle),
    async stop() {
      await stdin.close();
      await child.status;
      reader.releaseLock();
      await child.stdout.cancel().catch(() => {});
    },
  };
}

/** Reads what comes until the server closes, or `ms` pass. */
async function readFor(conn: Deno.Conn, ms: number): Promise<string> {
  const buffer = new Uint8Array(4096);
  let text = "";
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const n = await Promise.race([
      conn.read(buffer).catch(() => null),
      new Promise<"wait">((r) => setTimeout(() => r("wait"), until - Date.now())),
    ]);
    if (n === null || n === "wait") break;
    text += new TextDecoder().decode(buffer.subarray(0, n));
  }
  return text;
}

async function headersOnly(server: Awaited<ReturnType<typeof fixture>>) {
  const conns = await Promise.all(
    Array.from(
      { length: 50 },
      () => Deno.connectTls({ hostname: "127.0.0.1", port: server.port, caCerts: [server.caPem] }),
    ),
  );
  const head = new TextEncoder().encode(
    "POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n",
  );
  await Promise.all(conns.map((c) => c.write(head)));
  const answers = await Promise.all(conns.map((c) => readFor(c, waitMs)));
  for (const c of conns) {
    try {
      c.close();
    } catch { /* closed */ }
  }
  const statuses = answers.map((a) => a.split(" ")[1] ?? "none");
  return `statuses: ${[...new Set(statuses)].join(", ")}`;
}

async function bigBody(server: Awaited<ReturnType<typeof fixture>>) {
  const size = 150 * 2 ** 20;
  const body = new Uint8Array(size).fill(0x78);
  body.set(new TextEncoder().encode('{"a":"'), 0);
  body.set(new TextEncoder().encode('"}'), size - 2);
  const conn = await Deno.connectTls({
    hostname: "127.0.0.1",
    port: server.port,
    caCerts: [server.caPem],
  });
  await conn.write(new TextEncoder().encode(
    `POST /check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`,
  ));
  const answer = readFor(conn, waitMs + 10_000);
  let sent = 0;
  try {
    for (; sent < size;) sent += await conn.write(body.subarray(sent, sent + (1 << 20)));
  } catch { /* the server closed */ }
  const text = await answer;
  try {
    conn.close();
  } catch { /* closed */ }
  return `sent ${(sent / 2 ** 20).toFixed(0)} MiB, status ${text.split(" ")[1] ?? "none"}`;
}

for (
  const [name, attack] of [["50 × headers declaring 20 MB", headersOnly], [
    "one 150 MB body",
    bigBody,
  ]] as const
) {
  const server = await fixture();
  await new Promise((r) => setTimeout(r, 500));
  const before = memory(server.pid);
  const outcome = await attack(server);
  const peak = memory(server.pid);
  await server.stop();
  console.log(
    `${name}: RSS ${before.rss.toFixed(0)} MiB before, peak ${peak.hwm.toFixed(0)} MiB, ` +
      `${peak.rss.toFixed(0)} MiB after; ${outcome}`,
  );
}
