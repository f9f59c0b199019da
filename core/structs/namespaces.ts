/**
 * Namespace patterns as Kopf understands them: globs (`*`, `?`), negations (`!glob`), and
 * comma-separated lists where the first glob decides and later ones add or subtract.
 * @module
 */

function globToRegExp(glob: string): RegExp {
  const escaped = glob.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(
    /\?/g,
    ".",
  );
  return new RegExp(`^${escaped}$`);
}

/** Whether a pattern is a plain name (no globs, negations or lists). */
export function isLiteralNamespace(pattern: string): boolean {
  return !/[,*?!]/.test(pattern);
}

/**
 * Whether a namespace matches one pattern.
 *
 * `"a*,!ab*,abc"`: the first glob must match (a leading `!glob` implies `*` first); later
 * `!globs` exclude and plain globs include again; the rightmost matching part wins.
 *
 * @param pattern The pattern.
 * @param namespace The namespace name.
 * @returns Whether it matches.
 */
export function matchNamespace(pattern: string, namespace: string): boolean {
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
export function matchAnyNamespace(patterns: readonly string[], namespace: string): boolean {
  return patterns.some((p) => matchNamespace(p, namespace));
}
