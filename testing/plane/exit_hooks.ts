/**
 * Process-wide cleanup of live control planes: one `unload` listener and one SIGINT/SIGTERM
 * listener pair for all of them, added while any plane is registered and removed after the
 * last one, so that an idle process keeps its default signal disposition. Used by
 * `../control_plane.ts`.
 * @module
 */

/** What the process-wide handlers do with one live plane. */
export interface PlaneHooks {
  /** Synchronous last resort on `unload`: kill the processes, remove the directories. */
  readonly killNow: () => void;
  /** A graceful stop, awaited on SIGINT/SIGTERM before the process exits. */
  readonly stop: () => Promise<void>;
  /** Whether SIGINT/SIGTERM stop this plane (and then exit the process). */
  readonly handleSignals: boolean;
}

const livePlanes = new Map<object, PlaneHooks>();
const SIGNALS = [["SIGINT", 2], ["SIGTERM", 15]] as const;
const signalHandlers = SIGNALS.map(([name, signo]) => [name, () => onSignal(signo)] as const);
let listening = false;

function onUnload(): void {
  for (const hooks of [...livePlanes.values()]) hooks.killNow();
}

function onSignal(signo: number): void {
  const stopping = [...livePlanes.values()].filter((h) => h.handleSignals).map((h) => h.stop());
  // Exit as the default disposition would have: 128 + the signal number.
  Promise.allSettled(stopping).finally(() => Deno.exit(128 + signo));
}

/**
 * Registers a live plane: its processes are killed on `unload` and, with `handleSignals`,
 * stopped on SIGINT/SIGTERM, until {@link unregister}.
 *
 * @param plane The plane (the registry's key).
 * @param hooks How to kill or stop it.
 */
export function register(plane: object, hooks: PlaneHooks): void {
  livePlanes.set(plane, hooks);
  if (livePlanes.size === 1) globalThis.addEventListener("unload", onUnload);
  syncSignalListeners();
}

/**
 * Forgets a plane once its processes are gone; the listeners go with the last one. Safe to
 * call more than once.
 *
 * @param plane The plane given to {@link register}.
 */
export function unregister(plane: object): void {
  if (!livePlanes.delete(plane)) return;
  if (livePlanes.size === 0) globalThis.removeEventListener("unload", onUnload);
  syncSignalListeners();
}

function syncSignalListeners(): void {
  const wanted = [...livePlanes.values()].some((hooks) => hooks.handleSignals);
  if (wanted === listening) return;
  listening = wanted;
  for (const [name, handler] of signalHandlers) {
    try {
      if (wanted) Deno.addSignalListener(name, handler);
      else Deno.removeSignalListener(name, handler);
    } catch { /* signals not supported on this platform */ }
  }
}
