/**
 * Namespace patterns as Kopf understands them: globs (`*`, `?`), negations (`!glob`), and
 * comma-separated lists where the first glob decides and later ones add or subtract; or regular
 * expressions, which must match the whole name.
 * @module
 */

/** A namespace pattern: a name, glob or list of globs as a string, or a regular expression. */
export type NamespacePattern = string | RegExp;

// Anchored copies of user regular expressions (Python's fullmatch), built once per expression.
const anchored = new WeakMap<RegExp, RegExp>();

function fullMatch(pattern: RegExp, namespace: string): boolean {
  let whole = anchored.get(pattern);
  if (!whole) {
    whole = new RegExp(`^(?:${pattern.source})$`, pattern.flags.replace(/[gy]/g, ""));
    anchored.set(pattern, whole);
  }
  return whole.test(namespace);
}

function globToRegExp(glob: string): RegExp {
  const escaped = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(
    /\?/g,
    ".",
  );
  return new RegExp(`^${escaped}$`);
}

/**
 * Whether a pattern is a plain name (no globs, negations or lists; not a regular expression).
 *
 * @param pattern The pattern.
 * @returns Whether it names exactly one namespace.
 */
export function isLiteralNamespace(pattern: NamespacePattern): pattern is string {
  return typeof pattern === "string" && !/[,*?!]/.test(pattern);
}

/**
 * Whether a namespace matches one pattern.
 *
 * `"a*,!ab*,abc"`: the first glob must match (a leading `!glob` implies `*` first); later
 * `!globs` exclude and plain globs include again; the rightmost matching part wins.
 * A regular expression must match the whole name (`/team-\d+/` does not match `team-1x`).
 *
 * @param pattern The pattern.
 * @param namespace The namespace name.
 * @returns Whether it matches.
 */
export function matchNamespace(pattern: NamespacePattern, namespace: string): boolean {
  if (pattern instanceof RegExp) return fullMatch(pattern, namespace);
  const parts = pattern.split(",").map((p) => p.trim()).filter(Boolean);
  if (parts.length === 0) return false;
  if (parts[0]!.startsWith("!")) parts.unshift("*");
  let matched = globToRegExp(parts[0]!).test(namespace);
  if (!matched) return false;
  for (const part of parts.slice(1)) {
    const negated = part.startsWith("!");
    if (globToRegExp(negated ? part.slice(1) : part).test(namespace)) matched = !negated;
  }
  return matched;
}

/**
 * Whether a namespace matches any of several patterns (as given with repeated `-n`).
 * @param patterns The patterns.
 * @param namespace The namespace name.
 * @returns Whether any pattern matches.
 */
export function matchAnyNamespace(
  patterns: readonly NamespacePattern[],
  namespace: string,
): boolean {
  return patterns.some((p) => matchNamespace(p, namespace));
}
