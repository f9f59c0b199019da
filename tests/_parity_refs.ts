/**
 * Reading docs/parity.md's "proof" column, for tests/parity_refs_test.ts: which files each row
 * names, which tests it quotes after a test file, and whether a file has a test of that name.
 * @module
 */

/** One file named in a row's proof, with the test names quoted after it (none for code). */
export interface ParityProof {
  /** The row's checklist ID (its first cell). */
  readonly id: string;
  /** The row's line in the Markdown (1-based). */
  readonly line: number;
  /** The file, relative to the repository. */
  readonly path: string;
  /** The quoted test names after `path:` (`…` marks an elided part). */
  readonly tests: readonly string[];
}

const PATH =
  /(?<![\w/.-])((?:tests|core|kits|testing|examples|bench|tools|crds|deploy|docs)\/[\w/.-]+\.(?:ts|md|ya?ml|sh|py|json))/g;
const QUOTED = /^:\s*((?:"[^"]*"(?:,\s*)?)+)/;

/**
 * The proofs of a parity table: for each row with an ID, each file its last cell names.
 * @param markdown The text of docs/parity.md.
 * @returns One entry per file named, in the order of the table.
 */
export function parityProofs(markdown: string): ParityProof[] {
  const proofs: ParityProof[] = [];
  markdown.split("\n").forEach((text, index) => {
    if (!text.startsWith("| ")) return;
    const cells = text.split(/(?<!\\)\|/).slice(1, -1).map((cell) => cell.trim());
    if (cells.length < 4) return;
    const id = cells[0]!;
    if (!/^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$/.test(id)) return;
    const proof = cells[cells.length - 1]!;
    for (const match of proof.matchAll(PATH)) {
      const after = proof.slice(match.index! + match[0].length);
      const quoted = QUOTED.exec(after);
      const tests = quoted ? [...quoted[1]!.matchAll(/"([^"]*)"/g)].map((m) => m[1]!) : [];
      proofs.push({ id, line: index + 1, path: match[1]!, tests });
    }
  });
  return proofs;
}

/** A JavaScript string literal's content: `${…}` kept as written, escapes resolved. */
interface Literal {
  readonly text: string;
  /** A template literal with substitutions: its text is a pattern. */
  readonly template: boolean;
}

/** The string literals of a source, with concatenations (`"a" + "b"`) joined. */
function literals(source: string): Literal[] {
  const found: Literal[] = [];
  const token = /"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\[^])*`/g;
  let previousEnd = -1;
  for (const match of source.matchAll(token)) {
    const raw = match[0];
    const text = raw.slice(1, -1).replace(/\\([^])/g, (_, c: string) => c === "n" ? "\n" : c);
    const template = raw.startsWith("`") && raw.includes("${");
    const between = previousEnd >= 0 ? source.slice(previousEnd, match.index) : "";
    const last = found[found.length - 1];
    if (last && /^\s*\+\s*$/.test(between)) {
      found[found.length - 1] = { text: last.text + text, template: last.template || template };
    } else {
      found.push({ text, template });
    }
    previousEnd = match.index! + raw.length;
  }
  return found;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * Whether a source has a string literal that is the test name: equal to it, or, where the name
 * has `…`, starting, continuing and ending with its parts; a template literal's `${…}` stands
 * for any text (when at least half the name is the literal's own text).
 * @param source A test file's text.
 * @param name A test name as quoted in the table.
 * @returns Whether a literal of the source matches.
 */
export function testNameFound(source: string, name: string): boolean {
  const parts = name.split("…").map((part) => part.trim());
  return literals(source).some(({ text, template }) => {
    if (template) {
      const fixed = text.split(/\$\{[^}]*\}/);
      // A literal mostly made of substitutions would match any name.
      if (fixed.join("").length * 2 < name.length) return false;
      const pattern = fixed.map(escape).join("[^]*");
      const wanted = parts.join(" … ");
      return new RegExp(`^${pattern}$`).test(wanted) ||
        (parts.length > 1 && new RegExp(`^${pattern.replace(/\[\^\]\*/g, "")}`).test(parts[0]!));
    }
    if (parts.length === 1) return text === name;
    let at = 0;
    for (const [i, part] of parts.entries()) {
      const found = i === 0 ? (text.startsWith(part) ? 0 : -1) : text.indexOf(part, at);
      if (found < 0) return false;
      at = found + part.length;
    }
    return text.endsWith(parts[parts.length - 1]!);
  });
}
