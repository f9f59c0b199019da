/**
 * Which resources the handlers' selectors name, against discovery (Kopf's ambiguity rules). An
 * ambiguous selector serves none of its matches and is reported once; an unknown name is
 * reported once and served when a matching CRD appears (and reported again if it goes away).
 * @module
 */

import type { OperatorRegistry } from "../../intents/registries.ts";
import { describeSelector, resolveSelector, type SelectorFields } from "../../intents/selectors.ts";
import { type Resource, resourceName } from "../../structs/resources.ts";
import { closest } from "../../util/suggest.ts";
import type { OperatorScope } from "../scope/scope.ts";

/** A resource to serve, and which selectors (by JSON key) resolved to it. */
export interface ServedResource {
  /** The discovered resource. */
  readonly resource: Resource;
  /** The JSON keys of the selectors naming it (see `OperatorRegistry.handlersFor`). */
  readonly selectors: Set<string>;
}

/** The operator's parts resolution uses: the handlers' selectors, and where problems go. */
export type ResolvingScope =
  & Pick<OperatorScope, "logger">
  & { readonly registry: Pick<OperatorRegistry, "selectors"> };

/** Resolves the selectors anew on every discovery change, reporting each problem once. */
export class ResourceResolver {
  #scope: ResolvingScope;
  /** Problems already reported: `a:` ambiguous, `u:` unknown (forgotten once found). */
  #reported = new Set<string>();

  /**
   * A resolver with nothing reported yet.
   * @param scope The operator's parts it uses.
   */
  constructor(scope: ResolvingScope) {
    this.#scope = scope;
  }

  /**
   * The resources to serve now.
   * @param resources The discovered resources.
   * @returns The served resources by resource name.
   */
  resolve(resources: readonly Resource[]): Map<string, ServedResource> {
    const served = new Map<string, { resource: Resource; selectors: Set<string> }>();
    for (const selector of this.#scope.registry.selectors()) {
      const key = JSON.stringify(selector);
      const { resources: found, ambiguous } = resolveSelector(selector, resources);
      if (ambiguous && !this.#reported.has(`a:${key}`)) {
        this.#reported.add(`a:${key}`);
        const names = ambiguous.map(resourceName).join(", ");
        this.#scope.logger.warning(
          `Ambiguous resource selector ${
            describeSelector(selector)
          } matches ${names}; serving none of them: specify the group`,
        );
      } else if (found.length === 0 && !ambiguous && !this.#reported.has(`u:${key}`)) {
        this.#reported.add(`u:${key}`);
        const meant = suggestResource(selector, resources);
        this.#scope.logger.error(
          `No resource matches ${describeSelector(selector)}${
            meant ? ` (did you mean "${meant}"?)` : ""
          }: is its CRD installed? Its handlers will start when it appears`,
        );
      }
      for (const resource of found) {
        const id = resourceName(resource);
        const entry = served.get(id) ?? { resource, selectors: new Set() };
        entry.selectors.add(key);
        served.set(id, entry);
        this.#reported.delete(`u:${key}`);
      }
    }
    return served;
  }
}

/**
 * The name a selector that matches nothing likely meant: the closest name of the same form
 * (plural, singular, kind, short name; any of them for a bare name) among the discovered
 * resources of the selector's group (all groups when it names none).
 *
 * @param selector A selector that matched no resource.
 * @param resources The discovered resources.
 * @returns The likely meant name, or `undefined` when none is close.
 */
export function suggestResource(
  selector: SelectorFields,
  resources: readonly Resource[],
): string | undefined {
  const inGroup = resources.filter((r) =>
    selector.group === undefined || r.group === selector.group
  );
  const forms: [string | undefined, (r: Resource) => readonly string[]][] = [
    [selector.name, (r) => [r.plural, r.singular, r.kind, ...r.shortNames]],
    [selector.plural, (r) => [r.plural]],
    [selector.kind, (r) => [r.kind]],
    [selector.singular, (r) => [r.singular]],
    [selector.shortcut, (r) => r.shortNames],
  ];
  for (const [given, names] of forms) {
    if (given === undefined) continue;
    const meant = closest(given, new Set(inGroup.flatMap(names).filter(Boolean)));
    if (meant !== undefined && meant !== given) return meant;
  }
  return undefined;
}
