/**
 * Server-side label and field selectors for the watch streams of a resource, from
 * `settings.watching.labelSelectors` / `fieldSelectors` (Kopf 1.45's `label_selectors` /
 * `field_selectors`): every entry whose key selects the resource applies, joined with commas
 * (Kubernetes' "and").
 * @module
 */

import { matchesResource, parseSelector, type ResourceSpec } from "../../intents/selectors.ts";
import type { WatchingSettings } from "../../settings/settings.ts";
import type { Resource } from "../../structs/resources.ts";

/** The selectors to send with the list and watch requests of one resource. */
export interface WatchSelectors {
  /** `labelSelector`, or undefined when no entry applies. */
  readonly labelSelector?: string;
  /** `fieldSelector`, or undefined when no entry applies. */
  readonly fieldSelector?: string;
}

/**
 * The selectors of the settings that apply to a resource.
 *
 * Keys name resources as handlers do (`"kopfexamples"`, `"kopfexamples.kopf.dev"`,
 * `"kopfexamples.v1.kopf.dev"`) or as Kopf's settings do (`"kopf.dev/kopfexamples"`,
 * `"kopf.dev/v1/kopfexamples"`).
 * @param watching `settings.watching`.
 * @param resource The watched resource.
 * @returns The joined selectors.
 * @throws {TypeError} when a key is not a resource name.
 */
export function watchSelectors(
  watching: Pick<WatchingSettings, "labelSelectors" | "fieldSelectors">,
  resource: Resource,
): WatchSelectors {
  const labelSelector = joined(watching.labelSelectors, "labelSelectors", resource);
  const fieldSelector = joined(watching.fieldSelectors, "fieldSelectors", resource);
  return {
    ...(labelSelector ? { labelSelector } : {}),
    ...(fieldSelector ? { fieldSelector } : {}),
  };
}

function joined(
  entries: Readonly<Record<string, string>> | undefined,
  setting: string,
  resource: Resource,
): string {
  const applicable: string[] = [];
  for (const [key, selector] of Object.entries(entries ?? {})) {
    let spec: ResourceSpec = key;
    if (key.includes("/")) spec = key.split("/");
    let fields;
    try {
      fields = parseSelector(spec);
    } catch (error) {
      throw new TypeError(
        `settings.watching.${setting}: the key "${key}" does not name a resource ` +
          `(e.g. "kopfexamples", "kopf.dev/kopfexamples", "kopf.dev/v1/kopfexamples"): ` +
          `${(error as Error).message}`,
      );
    }
    if (matchesResource(fields, resource) && selector.trim()) applicable.push(selector.trim());
  }
  return applicable.join(",");
}
