/**
 * Code blocks of the Markdown docs, for the tests that compile and run them
 * (tests/docs_snippets_test.ts, tests/walkthrough_test.ts). The info string after the opening
 * fence is the language, then words: `fragment` (a piece that does not compile on its own, on
 * purpose) and `file=PATH` (a whole file of a project, e.g. the walkthrough's `handlers.ts`).
 * See docs/contributing.md.
 * @module
 */

/** One fenced code block. */
export interface CodeBlock {
  /** The Markdown file (as given). */
  readonly path: string;
  /** The line of the opening fence (1-based). */
  readonly line: number;
  /** The language: the info string's first word (`ts`, `sh`, …), or "". */
  readonly lang: string;
  /** The info string's other words without `=` (e.g. `fragment`). */
  readonly flags: readonly string[];
  /** The info string's `key=value` words (e.g. `file`). */
  readonly attrs: Readonly<Record<string, string>>;
  /** The nearest `## ` heading above the block, without the hashes. */
  readonly section: string;
  /** The block's content, ending with a newline. */
  readonly code: string;
}

/** TypeScript languages of info strings. */
export const TS_LANGS: ReadonlySet<string> = new Set(["ts", "typescript", "tsx"]);

/**
 * The fenced code blocks of a Markdown text (fences of three or more backticks, at most three
 * spaces of indentation; the closing fence at least as long as the opening one).
 * @param path The file's name for reports.
 * @param text The Markdown.
 * @returns The blocks in order.
 */
export function codeBlocks(path: string, text: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = text.split("\n");
  let section = "";
  for (let i = 0; i < lines.length; i++) {
    const heading = /^##\s+(.*)$/.exec(lines[i]!);
    if (heading) section = heading[1]!.trim();
    const open = /^ {0,3}(`{3,})\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const fence = open[1]!;
    const words = open[2]!.trim().split(/\s+/).filter(Boolean);
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length; i++) {
      const close = /^ {0,3}(`{3,})\s*$/.exec(lines[i]!);
      if (close && close[1]!.length >= fence.length) break;
      body.push(lines[i]!);
    }
    const [lang = "", ...rest] = words;
    blocks.push({
      path,
      line: start + 1,
      lang,
      flags: rest.filter((w) => !w.includes("=")),
      attrs: Object.fromEntries(
        rest.filter((w) => w.includes("=")).map((w) => w.split(/=(.*)/s, 2) as [string, string]),
      ),
      section,
      code: body.join("\n") + "\n",
    });
  }
  return blocks;
}
