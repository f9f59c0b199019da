/**
 * The indices as activity handlers (startup, login, probe, cleanup) get them.
 * @module
 */

import { Index } from "../../engines/runners/indexing.ts";
import type { IndexView } from "../../intents/contexts.ts";
import type { Orchestrator } from "../causes/orchestration.ts";

/**
 * The indices as activity handlers get them, as in Kopf: every declared index from the start,
 * by name — empty before the first listing and live, so that one kept by a startup handler
 * fills up later (it reads the serving orchestrator's index, or an empty one while there is none).
 * @param ids The index handler ids.
 * @param current The serving orchestrator, if any.
 * @returns Views by index name.
 */
export function activityIndices(
  ids: readonly string[],
  current: () => Orchestrator | undefined,
): Record<string, IndexView> {
  const empty = new Index();
  return Object.fromEntries(ids.map((id) => {
    const live = () => current()?.indices[id] ?? empty;
    const view = new Proxy(empty, {
      get: (_, key) => {
        const index = live();
        const value = Reflect.get(index, key, index);
        return typeof value === "function" ? value.bind(index) : value;
      },
      has: (_, key) => Reflect.has(live(), key),
    });
    return [id, view];
  }));
}
