/**
 * What the scanning tests share (tests/scanning_test.ts, tests/scanning_urls_test.ts): a client
 * that records every request's URL, the lists and watches of a collection among them, the
 * test's own label and finalizer, quiet settings, and namespaces made and removed.
 * @module
 */

import { on } from "../core/api/on.ts";
import type { KubeClient } from "../core/client/client.ts";
import type { OperatorRegistry } from "../core/intents/registries.ts";
import { createSettings, type OperatorSettings } from "../core/settings/settings.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { eventually, kex, KOPFEXAMPLES, testClient } from "./_support.ts";

export const opts = { sanitizeOps: false, sanitizeResources: false };

export const KEX_ALL = "/apis/kopf.dev/v1/kopfexamples";
export const NS_ALL = "/api/v1/namespaces";
export const CRD_ALL = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
export const kexIn = (namespace: string) =>
  `/apis/kopf.dev/v1/namespaces/${namespace}/kopfexamples`;

/** One request an operator's client made. */
export interface Sent {
  readonly method: string;
  readonly url: URL;
}

/** A client for an operator that records every request it makes, with its query. */
export async function recordingClient(): Promise<{ client: KubeClient; sent: Sent[] }> {
  const sent: Sent[] = [];
  const client = await testClient({
    onResponse: ({ method, path }) => sent.push({ method, url: new URL(path, "https://k8s") }),
  });
  return { client, sent };
}

/** The list and watch requests of one collection path (e.g. `/api/v1/namespaces`). */
export function reads(sent: readonly Sent[], collection: string): { lists: URL[]; watches: URL[] } {
  const gets = sent.filter((s) => s.method === "GET" && s.url.pathname === collection);
  return {
    lists: gets.filter((s) => s.url.searchParams.get("watch") !== "true").map((s) => s.url),
    watches: gets.filter((s) => s.url.searchParams.get("watch") === "true").map((s) => s.url),
  };
}

/**
 * Waits until a watch of `collection` was sent: it is recorded once its answer's head is in,
 * which may be a moment after the listing that precedes it.
 */
export async function watched(
  sent: readonly Sent[],
  collection: string,
  what: string,
): Promise<void> {
  await eventually(() => reads(sent, collection).watches.length >= 1, 20_000, what);
}

/** All requests whose path starts with `prefix`, as `METHOD path?query` (for messages). */
export function requestsUnder(sent: readonly Sent[], prefix: string): string[] {
  return sent.filter((s) => s.url.pathname.startsWith(prefix))
    .map((s) => `${s.method} ${s.url.pathname}${s.url.search}`);
}

/** A label unique to one test, to filter handlers to this test's objects. */
export function testLabel(): Record<string, string> {
  return { "scanning-test": crypto.randomUUID().slice(0, 8) };
}

/** Registers an event handler of kopfexamples that records `namespace/name` of what it sees. */
export function recordKopfExamples(
  registry: OperatorRegistry,
  seen: Set<string>,
  labels?: Record<string, string>,
): void {
  on.event("kopfexamples", { registry, ...(labels ? { labels } : {}) }, ({ namespace, name }) => {
    seen.add(`${namespace}/${name}`);
  });
}

/** The finalizer of this file's operators (never on other tests' objects). */
export const OWN_FINALIZER = "scanning-test.kopf.dev/finalizer";

/**
 * Settings for this file's operators: no Events, and a finalizer of their own. Operators that
 * serve other tests' namespaces (`-A`, `-n '*'`) would otherwise remove Kopf's default finalizer
 * from those tests' objects, as Kopf does when no handler of an operator needs it (PST-54).
 */
export function quietSettings(
  tweak: (settings: OperatorSettings) => void = () => {},
): OperatorSettings {
  const settings = createSettings({ posting: { enabled: false } });
  settings.persistence.finalizer = OWN_FINALIZER;
  tweak(settings);
  return settings;
}

export async function createKex(
  client: KubeClient,
  namespace: string,
  name: string,
  labels?: Record<string, string>,
): Promise<void> {
  await client.api.create(KOPFEXAMPLES, kex(name, {}, labels), { namespace });
}

export async function removeNamespaces(...names: string[]): Promise<void> {
  const plane = await sharedControlPlane();
  for (const name of names) await deleteNamespace(plane, name).catch(() => {});
}

/** A lowercase random tag usable in namespace names and resource plurals. */
export function tag(): string {
  return `s${crypto.randomUUID().replaceAll("-", "").slice(0, 8)}`;
}
