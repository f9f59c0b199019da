/**
 * Following the Namespaces resource for glob patterns of namespaces (`-n 'team-*'`): namespaces
 * that match are served while they exist and are not terminating. Without permission to watch
 * namespaces, only the literal names among the patterns are served.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import type { KubeClient } from "../../client/client.ts";
import { ApiError } from "../../client/errors.ts";
import { objectEvents, watcher, watchingOptions } from "../../client/watching.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import {
  isLiteralNamespace,
  matchAnyNamespace,
  type NamespacePattern,
} from "../../structs/namespaces.ts";
import type { Resource } from "../../structs/resources.ts";
import { watchSelectors } from "./watch_selectors.ts";

const NAMESPACES: Resource = {
  group: "",
  version: "v1",
  plural: "namespaces",
  singular: "namespace",
  kind: "Namespace",
  namespaced: false,
  verbs: ["list", "watch"],
  shortNames: ["ns"],
  categories: [],
  subresources: [],
  preferred: true,
};

/** What following the namespaces needs. */
export interface NamespaceFollowingDeps {
  /** The cluster connection. */
  readonly client: KubeClient;
  /** Operator settings (watching). */
  readonly settings: OperatorSettings;
  /** Operator logger. */
  readonly logger: Logger;
  /** Stops following. */
  readonly signal: AbortSignal;
  /** The namespace patterns to serve. */
  readonly patterns: readonly NamespacePattern[];
  /** The namespaces served now: kept up to date here. */
  readonly served: Set<string>;
  /** Every namespace is known: after the listing, or when only the literal names are served. */
  readonly onKnown: () => void;
  /** A matching namespace came or went. */
  readonly onChange: () => void;
}

/**
 * Keeps `served` up to date with the namespaces matching the patterns until the signal aborts.
 * @param deps Collaborators and the set to keep.
 * @returns Resolves when stopped, or when namespaces cannot be watched (then the literal names
 * are served).
 */
export async function followNamespaces(deps: NamespaceFollowingDeps): Promise<void> {
  const { client, signal, logger, settings, patterns, served } = deps;
  const options = {
    ...watchingOptions(settings.watching),
    ...watchSelectors(settings.watching, NAMESPACES), // only if a key selects namespaces
    signal,
  };
  try {
    for await (
      const event of objectEvents(watcher(client.api, NAMESPACES, options), (e) => {
        if (e.type === "initDone") deps.onKnown();
        if (e.type === "error" && e.error instanceof ApiError && e.error.code === 403) {
          throw e.error;
        }
      })
    ) {
      const name = event.object.metadata?.name ?? "";
      if (!matchAnyNamespace(patterns, name)) continue;
      const terminating =
        (event.object.status as { phase?: string } | undefined)?.phase === "Terminating";
      if (event.type === "delete" || terminating) served.delete(name);
      else served.add(name);
      deps.onChange();
    }
  } catch (error) {
    if (signal.aborted) return;
    logger.warning(
      `Cannot watch namespaces (${error}); serving only the literal namespace names given`,
    );
    for (const ns of patterns) if (isLiteralNamespace(ns)) served.add(ns);
    deps.onKnown();
  }
}
