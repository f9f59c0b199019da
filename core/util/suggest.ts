/**
 * "Did you mean …?": the closest of some known names to a mistyped one.
 * @module
 */

/**
 * The known name closest to a mistyped one, when it is close enough to be a likely typo: the
 * same letters but for case and underscores (`initial_delay` → `initialDelay`), or at most two
 * single-letter edits (one for names of 3–4 letters, none for shorter ones), swaps of neighbours
 * counting as one.
 *
 * @example
 * ```ts
 * import { closest } from "./suggest.ts";
 * closest("feild", ["field", "value", "labels"]); // "field"
 * closest("colour", ["size"]); // undefined
 * ```
 *
 * @param name The mistyped name.
 * @param known The names it may have meant.
 * @returns The likeliest meant name, or `undefined` when none is close.
 */
export function closest(name: string, known: Iterable<string>): string | undefined {
  const squash = (s: string) => s.replaceAll(/[_-]/g, "").toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    if (squash(candidate) === squash(name)) return candidate;
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  const shortest = Math.min(name.length, best?.length ?? 0);
  const limit = shortest <= 2 ? 0 : shortest <= 4 ? 1 : 2;
  return bestDistance <= limit ? best : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = value;
    }
  }
  return d[a.length]![b.length]!;
}
