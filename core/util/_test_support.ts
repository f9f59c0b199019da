/**
 * Test scaffolding (not part of the package): polling for a condition, and for anything that
 * listens on a port, a free port and the listeners a piece of code opens, so that a test can take
 * one away under it.
 * @module
 */

/**
 * Resolves after `ms` milliseconds.
 * @param ms The delay.
 */
export function sleep(ms: number): Promise<void> {
  return new Promise<void>((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `condition` every 2 ms until it holds.
 * @param condition What to wait for.
 * @param what Named in the error.
 * @param timeoutMs How long at most. @default 5000
 * @throws {Error} `Timed out waiting for: <what>` after `timeoutMs`.
 */
export async function until(
  condition: () => boolean,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for: ${what}`);
    await sleep(2);
  }
}

/**
 * A port nobody listens on now on 127.0.0.1 (bound and released).
 * @returns The port.
 */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  return port;
}

/**
 * Records the TCP listeners opened while `run` runs (`Deno.listen` wrapped meanwhile).
 * @param run What opens them.
 * @returns What it returned, and the listeners.
 */
export async function recordingListeners<T>(
  run: () => Promise<T>,
): Promise<{ result: T; listeners: Deno.TcpListener[] }> {
  const listeners: Deno.TcpListener[] = [];
  const original = Deno.listen;
  Deno.listen = ((options: Deno.TcpListenOptions) => {
    const listener = original(options);
    listeners.push(listener);
    return listener;
  }) as typeof Deno.listen;
  try {
    return { result: await run(), listeners };
  } finally {
    Deno.listen = original;
  }
}

/**
 * Takes a running metrics server's listener away under it (it then stops by itself), after
 * checking that it and the liveness endpoint answer. The scrape uses a connection of its own,
 * closed at once: a server whose listener is gone ends with its last connection.
 * @param metrics The metrics URL.
 * @param healthz The liveness URL.
 * @param listeners The listeners recorded while the servers started.
 */
export async function closeMetricsListener(
  metrics: string,
  healthz: string,
  listeners: readonly Deno.TcpListener[],
): Promise<void> {
  {
    using scraper = Deno.createHttpClient({});
    const scraped = await fetch(metrics, { client: scraper });
    if (scraped.status !== 200) {
      throw new Error(`metrics: ${scraped.status} ${await scraped.text()}`);
    }
    await scraped.body?.cancel();
  }
  const healthy = await fetch(healthz);
  const body = await healthy.text();
  if (healthy.status !== 200) throw new Error(`healthz: ${healthy.status} ${body}`);
  const port = Number(new URL(metrics).port);
  const listener = listeners.find((l) => l.addr.port === port);
  if (!listener) throw new Error(`no recorded listener on the metrics port ${port}`);
  listener.close();
}
