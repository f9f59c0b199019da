/**
 * Watch streams: newline-delimited JSON events fanned out from the store's change log.
 *
 * - No `resourceVersion` (or `"0"`, or `sendInitialEvents=true`): synthetic `ADDED` events for
 *   the current objects first, then changes; with bookmarks allowed, a `BOOKMARK` annotated
 *   `k8s.io/initial-events-end` marks the end of the initial events.
 * - `resourceVersion=N`: the changes after N, then live ones; if the changes after N are
 *   compacted away, one `ERROR` event with a 410 `Expired` Status, and the stream ends.
 * - Selectors are applied to both states of a change: an object that starts matching arrives
 *   as `ADDED`, one that stops matching as `DELETED`.
 * - `allowWatchBookmarks`: a `BOOKMARK` every `bookmarkIntervalMs` (as kube-apiserver's, also
 *   on a resource nothing changes), and one 2 s before `timeoutSeconds` ends only if the
 *   resourceVersion moved on since the last event sent. The stream ends after `timeoutSeconds`
 *   (default 30 min).
 * - A watch of a custom resource ends when its CRD is deleted.
 * @module
 */

import type { Cluster } from "./cluster.ts";
import { CRDS } from "./registry.ts";
import type { Selector } from "./selectors.ts";
import type { Change } from "./storage.ts";
import { type KubeObject, type ResourceDef, resourceKey } from "./types.ts";

/** What a watch request asks for. */
export interface WatchRequest {
  /** The resource. */
  readonly def: ResourceDef;
  /** The version the objects are served in. */
  readonly version: string;
  /** Only this namespace, or all. */
  readonly namespace: string | undefined;
  /** Label selector. */
  readonly label: Selector;
  /** Field selector. */
  readonly field: Selector;
  /** Where to start (see the module description). */
  readonly resourceVersion: string | null;
  /** Whether to start with synthetic `ADDED` events regardless of the resourceVersion. */
  readonly sendInitialEvents: boolean;
  /** Whether `BOOKMARK` events are wanted. */
  readonly allowBookmarks: boolean;
  /** Server-side timeout in seconds. */
  readonly timeoutSeconds: number | undefined;
}

/** How a watch stream is paced and interfered with. */
export interface WatchControls {
  /** Interval of periodic bookmarks. */
  readonly bookmarkIntervalMs: number;
  /** Whether the stream must stay silent now (an injected stall). */
  readonly stalled: () => boolean;
  /** Registers a callback for the end of stalls; returns an unregistering function. */
  readonly onResume: (callback: () => void) => () => void;
  /** Registers the stream for injected raw lines; returns an unregistering function. */
  readonly onInjectedLines?: (deliver: (lines: string[]) => void) => () => void;
}

const DEFAULT_TIMEOUT_SECONDS = 1800;

/**
 * Opens a watch stream.
 *
 * @param cluster The cluster.
 * @param request What to watch.
 * @param controls Bookmark pacing and fault injection.
 * @returns The response body: one JSON event per line.
 */
export function openWatch(
  cluster: Cluster,
  request: WatchRequest,
  controls: WatchControls,
): ReadableStream<Uint8Array> {
  const { def, version, namespace, label, field } = request;
  const key = resourceKey(def);
  const encoder = new TextEncoder();
  const matches = (object: KubeObject | undefined) =>
    object !== undefined && label(object) && field(object);
  const cleanups: Array<() => void> = [];
  const cleanup = () => {
    for (const fn of cleanups.splice(0)) fn();
  };

  return new ReadableStream<Uint8Array>({
    start(controller) {
      const pending: string[] = [];
      let closed = false;
      let ending = false;
      const flush = () => {
        if (closed || controls.stalled()) return;
        try {
          for (const line of pending.splice(0)) controller.enqueue(encoder.encode(line));
          if (ending) {
            closed = true;
            cleanup();
            controller.close();
          }
        } catch {
          closed = true;
          cleanup();
        }
      };
      const send = (type: string, object: unknown) => {
        pending.push(`${JSON.stringify({ type, object })}\n`);
        flush();
      };
      const end = () => {
        ending = true;
        flush();
      };
      const present = (object: KubeObject) => cluster.present(def, object, version);
      // Bookmarks report progress: the one before the timeout only when the version moved on
      // since the last event sent; the periodic ones always, as kube-apiserver's come about
      // every minute also for a resource nothing changes (etcd's progress notifications move
      // its watch cache's version on), so that an idle watch is not mistaken for a lost one.
      let sentVersion = 0;
      const bookmark = (initialEnd = false, periodic = false) => {
        const version = cluster.store.resourceVersion;
        if (!request.allowBookmarks || (!initialEnd && !periodic && version <= sentVersion)) return;
        sentVersion = version;
        send("BOOKMARK", {
          kind: def.kind,
          apiVersion: present({}).apiVersion,
          metadata: {
            resourceVersion: String(cluster.store.resourceVersion),
            ...(initialEnd ? { annotations: { "k8s.io/initial-events-end": "true" } } : {}),
          },
        });
      };
      const deliver = (change: Change) => {
        if (change.key === resourceKey(CRDS) && change.type === "DELETED" && def.crd) {
          if (change.name === def.crd) end();
          return;
        }
        if (change.key !== key || (namespace !== undefined && change.namespace !== namespace)) {
          return;
        }
        const now = change.type !== "DELETED" && matches(change.object);
        const before = change.type === "DELETED"
          ? matches(change.object)
          : change.type === "MODIFIED" && matches(change.previous);
        const type = now && before ? "MODIFIED" : now ? "ADDED" : before ? "DELETED" : undefined;
        if (type) {
          sentVersion = change.rv;
          send(type, present(change.object));
        }
      };

      const rv = request.resourceVersion;
      sentVersion = /^\d+$/.test(rv ?? "") ? Number(rv) : cluster.store.resourceVersion;
      if (!rv || rv === "0" || request.sendInitialEvents) {
        for (const object of cluster.store.list(key, namespace)) {
          if (matches(object)) send("ADDED", present(object));
        }
        bookmark(true);
      } else {
        const changes = cluster.store.since(Number(rv));
        if (changes === undefined) {
          send("ERROR", {
            kind: "Status",
            apiVersion: "v1",
            metadata: {},
            status: "Failure",
            message: "The resourceVersion for the provided watch is too old.",
            reason: "Expired",
            code: 410,
          });
          end();
          return;
        }
        for (const change of changes) deliver(change);
      }
      cleanups.push(cluster.store.subscribe(deliver));
      cleanups.push(controls.onResume(flush));
      if (controls.onInjectedLines) {
        cleanups.push(controls.onInjectedLines((lines) => {
          pending.push(...lines);
          flush();
        }));
      }
      const timeoutMs = (request.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS) * 1000;
      const timers = [
        setTimeout(end, timeoutMs),
        setInterval(() => bookmark(false, true), Math.max(10, controls.bookmarkIntervalMs)),
      ];
      if (timeoutMs > 2000) timers.push(setTimeout(() => bookmark(), timeoutMs - 2000));
      cleanups.push(() => {
        for (const timer of timers) clearTimeout(timer);
      });
    },
    cancel() {
      cleanup();
    },
  });
}
