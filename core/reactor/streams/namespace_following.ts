/**
 * Following the Namespaces resource for glob patterns of namespaces (`-n 'team-*'`): namespaces
 * that match are served while they exist and are not terminating. Without permission to watch
 * namespaces, only the literal names among the patterns are served.
 * @module
 */

import { NAMESPACES_RESOURCE } from "../../client/discovery.ts";
import { ApiError } from "../../client/errors.ts";
import { objectEvents, watcher, watchingOptions } from "../../client/watching.ts";
import { isLiteralNamespace, matchAnyNamespace } from "../../structs/namespaces.ts";
import type { OperatorScope } from "../scope/scope.ts";
import { watchSelectors } from "./watch_selectors.ts";

/** What the orchestrator keeps with the namespaces followed. */
export interface FollowedNamespaces {
  /** The namespaces served now: kept up to date here. */
  readonly served: Set<string>;
  /** Every namespace is known: after the listing, or when only the literal names are served. */
  readonly onKnown: () => void;
  /** A matching namespace came or went. */
  readonly onChange: () => void;
}

/**
 * Keeps `served` up to date with the namespaces matching the patterns until the signal aborts.
 * @param scope The client, the settings (watching), the logger, the signal that stops following
 *   and the namespace patterns to serve.
 * @param followed The set to keep and whom to tell.
 * @returns Resolves when stopped, or when namespaces cannot be watched (then the literal names
 * are served).
 */
export async function followNamespaces(
  scope: Pick<OperatorScope, "client" | "settings" | "logger" | "signal" | "namespaces">,
  followed: FollowedNamespaces,
): Promise<void> {
  const { client, signal, logger, settings, namespaces: patterns } = scope;
  const { served } = followed;
  const options = {
    ...watchingOptions(settings.watching),
    ...watchSelectors(settings.watching, NAMESPACES_RESOURCE), // only if a key selects namespaces
    signal,
  };
  try {
    for await (
      const event of objectEvents(watcher(client.api, NAMESPACES_RESOURCE, options), (e) => {
        if (e.type === "initDone") followed.onKnown();
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
      followed.onChange();
    }
  } catch (error) {
    if (signal.aborted) return;
    logger.warning(
      `Cannot watch namespaces (${error}); serving only the literal namespace names given`,
    );
    for (const ns of patterns) if (isLiteralNamespace(ns)) served.add(ns);
    followed.onKnown();
  }
}
