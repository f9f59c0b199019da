/**
 * Reading and validating the Prometheus text exposition in tests: values of series by name and
 * labels, and validation by Prometheus' own parser (`promtool check metrics`, from Debian's
 * `prometheus` package that tools/test.sh installs) or, where promtool is missing, by a strict
 * line grammar.
 * @module
 */

import assert from "node:assert/strict";

/** One sample line. */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

/** A parsed exposition (sample lines and the families' types). */
export class Exposition {
  readonly samples: Sample[] = [];
  readonly types = new Map<string, string>();

  constructor(readonly text: string) {
    for (const line of text.split("\n")) {
      const type = line.match(/^# TYPE (\S+) (\S+)$/);
      if (type) this.types.set(type[1]!, type[2]!);
      if (line === "" || line.startsWith("#")) continue;
      const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/);
      assert(m, `Unparsable sample line: ${line}`);
      const labels: Record<string, string> = {};
      for (const l of (m[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
        labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
      }
      this.samples.push({ name: m[1]!, labels, value: Number(m[3]) });
    }
  }

  /** Whether a family is present (typed). */
  has(name: string): boolean {
    return this.types.has(name);
  }

  /**
   * The sum of the series of a family whose labels include the given ones; histograms give
   * their observation count. 0 when no series matches.
   */
  value(name: string, labels: Record<string, string> = {}): number {
    const sampleName = this.types.get(name) === "histogram" ? `${name}_count` : name;
    let total = 0;
    for (const sample of this.samples) {
      if (sample.name !== sampleName) continue;
      if (!Object.entries(labels).every(([k, v]) => sample.labels[k] === v)) continue;
      total += sample.value;
    }
    return total;
  }

  /** The label sets of a family's series (histograms: of their counts). */
  series(name: string): Array<Record<string, string>> {
    const sampleName = this.types.get(name) === "histogram" ? `${name}_count` : name;
    return this.samples.filter((s) => s.name === sampleName).map((s) => s.labels);
  }
}

const SAMPLE =
  /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\.)*",?)*\})? (NaN|[+-]?Inf|[+-]?[0-9.]+(e[+-]?[0-9]+)?)( [0-9]+)?$/;

/** Whether promtool is on PATH. */
export async function havePromtool(): Promise<boolean> {
  try {
    const out = await new Deno.Command("promtool", {
      args: ["--version"],
      stdout: "null",
      stderr: "null",
    })
      .output();
    return out.success;
  } catch {
    return false;
  }
}

/**
 * Validates an exposition: promtool's parser when available, else a strict line grammar.
 * @returns Which validator was used.
 */
export async function validateExposition(text: string): Promise<"promtool" | "grammar"> {
  if (await havePromtool()) {
    const child = new Deno.Command("promtool", {
      args: ["check", "metrics"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(text));
    await writer.close();
    const out = await child.output();
    const said = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    assert(out.success, `promtool check metrics failed:\n${said}`);
    return "promtool";
  }
  const typed = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = line.match(
      /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/,
    );
    if (type) {
      assert(!typed.has(type[1]!), `Family ${type[1]} is typed twice`);
      typed.add(type[1]!);
      continue;
    }
    if (line.startsWith("# HELP ")) continue;
    assert(SAMPLE.test(line), `Not a valid sample line: ${line}`);
    const name = line.match(/^[a-zA-Z_:][a-zA-Z0-9_:]*/)![0];
    const family = name.replace(/_(bucket|sum|count)$/, "");
    assert(typed.has(name) || typed.has(family), `Sample before its # TYPE line: ${line}`);
  }
  return "grammar";
}
