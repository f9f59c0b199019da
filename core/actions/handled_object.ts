/**
 * The object whose handler is running, tracked across `await`s with `AsyncLocalStorage` (Kopf
 * keeps it in a context variable), so that helpers called from a handler — the hierarchies kit's
 * `adopt()` & co. — can default to it without being passed the body.
 *
 * The callers of resource handlers wrap each invocation in {@link withHandledObject}: one
 * `run()` per handler call, nothing on paths that call no handler.
 * @module
 */

import { AsyncLocalStorage } from "node:async_hooks";
import type { KubeObject } from "../structs/objects.ts";

/** Where the handled object is read from: a getter for live bodies (daemons, timers). */
export interface HandledObject {
  /** The object being handled. */
  readonly body: KubeObject;
}

// On the global object, so that a second copy of the library (e.g. the kit imported from a
// published version while the CLI runs from a checkout) sees the same storage.
const KEY = Symbol.for("kopf.handledObject");
type WithStorage = { [KEY]?: AsyncLocalStorage<HandledObject> };
const storage = (globalThis as WithStorage)[KEY] ??= new AsyncLocalStorage<HandledObject>();

/**
 * Runs a handler invocation with its object as the handled object.
 *
 * @param handled The object (or a holder with a live `body`).
 * @param invoke Calls the handler.
 * @returns What `invoke` returns (a promise stays a promise; the object is kept across awaits).
 */
export function withHandledObject<T>(handled: HandledObject, invoke: () => T): T {
  return storage.run(handled, invoke);
}

/**
 * The object whose handler is running here, if any.
 *
 * @returns Its current body, or `undefined` outside resource handlers.
 */
export function handledObject(): KubeObject | undefined {
  return storage.getStore()?.body;
}
