/**
 * Per-object events from a list+watch stream ({@link objectEvents}): a relist is folded into the
 * stream, so that objects it reports unchanged are flagged and objects that vanished while the
 * watch was broken are reported as deleted. What is remembered per object is small
 * (`Seen`), not whole bodies.
 *
 * Re-exported by `watching.ts`, which importers use.
 * @module
 */

import type { KubeObject } from "../structs/objects.ts";
import { withoutOperatorAnnotations } from "../settings/conventions.ts";
import type { WatcherEvent } from "./watch_events.ts";

/** What {@link objectEvents} yields: one object changed or disappeared. */
export type ObjectEvent =
  | {
    readonly type: "apply";
    readonly object: KubeObject;
    /** Reported by the first listing. */
    readonly initial: boolean;
    /** The raw watch type; `null` when reported by a (re)listing. */
    readonly raw: "ADDED" | "MODIFIED" | null;
    /** Re-reported by a relist although unchanged since it was last seen. */
    readonly unchanged?: boolean;
  }
  | { readonly type: "delete"; readonly object: KubeObject };

/** An object's key in the memory of seen objects. */
function keyOf(object: KubeObject): string {
  return `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
}

/**
 * Turns watcher events into per-object events: objects a relist reports at an already seen
 * resourceVersion are flagged `unchanged` (so consumers can skip repeated work), and objects
 * missing from a relist are reported as deleted, so no change is lost across `410 Gone`. Errors
 * and bookmarks are passed to `onOther` if given, and so are skipped and refused events (an
 * object refused for its depth by a relist counts as seen: it is not reported deleted).
 *
 * @param events A list+watch stream (`watcher()` in `watching.ts`).
 * @param onOther Receives `error`, `bookmark`, `init` and `initDone` events.
 * @returns The stream of object events.
 */
export async function* objectEvents(
  events: AsyncIterable<WatcherEvent>,
  onOther?: (event: WatcherEvent) => void,
): AsyncGenerator<ObjectEvent> {
  // Only what is needed to recognise unchanged objects and to report vanished ones (a few
  // hundred bytes per object, not whole bodies: memory that grows with the cluster).
  const known = new Map<string, Seen>();
  // The same for all objects of one watch: remembered once, not per object.
  let apiVersion: string | undefined, kind: string | undefined;
  const remember = (object: KubeObject): string => {
    const key = keyOf(object);
    known.set(key, new Seen(object, known.get(key)));
    apiVersion = object.apiVersion;
    kind = object.kind;
    return key;
  };
  let seen: Set<string> | undefined;
  let firstList = true;
  for await (const event of events) {
    switch (event.type) {
      case "init":
        seen = new Set();
        onOther?.(event);
        break;
      case "initApply": {
        const before = known.get(keyOf(event.object));
        seen?.add(remember(event.object));
        const meta = event.object.metadata;
        const same = before !== undefined && before.resourceVersion === meta?.resourceVersion &&
          before.uid === meta?.uid;
        yield {
          type: "apply",
          object: event.object,
          initial: firstList,
          raw: null,
          ...(same ? { unchanged: true } : {}),
        };
        break;
      }
      case "initDone":
        for (const [key, last] of known) {
          if (!seen?.has(key)) {
            known.delete(key);
            yield { type: "delete", object: last.object(key, apiVersion, kind) };
          }
        }
        seen = undefined;
        firstList = false;
        onOther?.(event);
        break;
      case "apply":
        remember(event.object);
        yield { type: "apply", object: event.object, initial: false, raw: event.raw };
        break;
      case "delete":
        known.delete(keyOf(event.object));
        yield { type: "delete", object: event.object };
        break;
      default:
        // An object refused for its depth still exists: a relist does not report it deleted.
        if (event.type === "refused") seen?.add(keyOf(event.object));
        onOther?.(event);
    }
  }
}

/**
 * What is remembered of a watched object: its identity and version, to recognise it unchanged
 * in a relist, and its labels, annotations (without the operators' own, see
 * {@link withoutOperatorAnnotations}) and finalizers, to report it as deleted should it vanish
 * while the watch was down. Name, namespace, apiVersion and kind come from elsewhere (the key,
 * the watch).
 */
class Seen {
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly annotations: Readonly<Record<string, string>> | undefined;
  readonly finalizers: string[] | undefined;

  /**
   * @param object The object as just seen.
   * @param before What was remembered of its previous version: its uid string is kept when
   * equal, as the first one is also the key of the object's memory in the reactor's queue.
   */
  constructor(object: KubeObject, before?: Seen) {
    const meta = object.metadata ?? {};
    this.uid = before?.uid === meta.uid ? before?.uid : meta.uid;
    this.resourceVersion = meta.resourceVersion;
    this.labels = meta.labels;
    this.annotations = meta.annotations && withoutOperatorAnnotations(meta.annotations);
    this.finalizers = meta.finalizers?.length ? meta.finalizers : undefined;
  }

  /** The object as last seen, for a deletion event. */
  object(key: string, apiVersion: string | undefined, kind: string | undefined): KubeObject {
    const slash = key.indexOf("/");
    const namespace = key.slice(0, slash), name = key.slice(slash + 1);
    return {
      apiVersion,
      kind,
      metadata: {
        name,
        ...(namespace ? { namespace } : {}),
        uid: this.uid,
        resourceVersion: this.resourceVersion,
        ...(this.labels ? { labels: this.labels } : {}),
        ...(this.annotations ? { annotations: this.annotations } : {}),
        ...(this.finalizers ? { finalizers: this.finalizers } : {}),
      },
    };
  }
}
