/**
 * `events.k8s.io/v1` Events: another view of the core/v1 Events (same storage), converted field
 * by field as the API server does (`involvedObject` ↔ `regarding`, `message` ↔ `note`, …).
 * @module
 */

import { isObject, type KubeObject, type ResourceDef } from "./types.ts";

/** events.k8s.io/v1 field ← core/v1 field. */
const FIELDS: ReadonlyArray<readonly [string, string]> = [
  ["eventTime", "eventTime"],
  ["series", "series"],
  ["reportingController", "reportingComponent"],
  ["reportingInstance", "reportingInstance"],
  ["action", "action"],
  ["reason", "reason"],
  ["regarding", "involvedObject"],
  ["related", "related"],
  ["note", "message"],
  ["type", "type"],
  ["deprecatedSource", "source"],
  ["deprecatedFirstTimestamp", "firstTimestamp"],
  ["deprecatedLastTimestamp", "lastTimestamp"],
  ["deprecatedCount", "count"],
];

/** Always present in the events.k8s.io view (as `null` or `{}` when unset). */
const PRESENT: Readonly<Record<string, unknown>> = {
  eventTime: null,
  deprecatedSource: {},
  deprecatedFirstTimestamp: null,
  deprecatedLastTimestamp: null,
};

function convert(object: KubeObject, pairs: ReadonlyArray<readonly [string, string]>): KubeObject {
  const { apiVersion, kind, metadata } = object;
  const result: KubeObject = { apiVersion, kind, metadata };
  for (const [to, from] of pairs) {
    const value = object[from];
    if (value !== undefined && value !== "" && value !== 0) result[to] = value;
  }
  return result;
}

/** Core/v1 Event → events.k8s.io/v1 Event. */
export function toEventsV1(object: KubeObject): KubeObject {
  const converted = convert(object, FIELDS);
  for (const [key, value] of Object.entries(PRESENT)) converted[key] ??= value;
  if (isObject(converted.deprecatedSource) && !converted.deprecatedSource.component) {
    converted.deprecatedSource = {};
  }
  return converted;
}

/** events.k8s.io/v1 Event → core/v1 Event. */
export function toCoreEvent(object: KubeObject): KubeObject {
  return convert(object, FIELDS.map(([a, b]) => [b, a] as const));
}

/** Field selector paths of events.k8s.io/v1 → those of the stored core/v1 Events. */
export function coreEventField(field: string): string | undefined {
  if (field.startsWith("regarding.")) return `involvedObject.${field.slice(10)}`;
  if (field === "reportingController") return "reportingComponent";
  if (["metadata.name", "metadata.namespace", "reason", "type"].includes(field)) return field;
  return undefined;
}

/** The events.k8s.io/v1 view of Events. */
export const EVENTS_V1: ResourceDef = {
  group: "events.k8s.io",
  versions: ["v1"],
  plural: "events",
  singular: "event",
  kind: "Event",
  listKind: "EventList",
  namespaced: true,
  shortNames: ["ev"],
  categories: [],
  subresources: [],
  generation: false,
  storage: "/events",
  convert: { in: toCoreEvent, out: toEventsV1 },
};
