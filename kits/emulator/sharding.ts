/**
 * Server-side sharded lists and watches (Kubernetes 1.36, KEP-5866, gate `ShardedListAndWatch`,
 * served as if the gate were on): the `shardSelector` parameter, e.g.
 * `shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')`, several ranges
 * joined by `||`, all on one field (`object.metadata.uid` or `object.metadata.namespace`). An
 * object matches when the 64-bit FNV-1a hash of the field, as 16 lower-case hex digits, lies in
 * `[start, end)` of one range. Bad selectors get the API server's 500 with its wording (parse
 * errors of the real CEL parser are worded differently here).
 * @module
 */

import { ApiFailure } from "./errors.ts";
import type { KubeObject } from "./types.ts";

const OFFSET_BASIS = 0xcbf29ce484222325n;
const PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;
const FIELDS = ["object.metadata.uid", "object.metadata.namespace"];
const TOP = "0x10000000000000000";

/** A parsed shard selector. */
export interface ShardSelector {
  /** Whether an object is in one of the ranges. */
  readonly matches: (object: KubeObject) => boolean;
  /** The selector as the API server echoes it in a list's `metadata.shardInfo.selector`. */
  readonly text: string;
}

/** The 64-bit FNV-1a hash of the UTF-8 bytes, as 16 lower-case hex digits. */
export function hashField(value: string): string {
  let hash = OFFSET_BASIS;
  for (const byte of new TextEncoder().encode(value)) hash = ((hash ^ BigInt(byte)) * PRIME) & MASK;
  return hash.toString(16).padStart(16, "0");
}

/** The API server's comparison of `0x` hex strings: shorter is smaller, else lexical. */
function hexLess(a: string, b: string): boolean {
  return a.length !== b.length ? a.length < b.length : a < b;
}

function invalid(message: string): ApiFailure {
  return new ApiFailure(500, "", `invalid shard selector: ${message}`);
}

type Token = { kind: "ident" | "string" | "punct"; value: string };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (text.startsWith("||", i)) {
      tokens.push({ kind: "punct", value: "||" });
      i += 2;
    } else if ("(),.".includes(c)) {
      tokens.push({ kind: "punct", value: c });
      i++;
    } else if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw invalid("CEL parse error: Syntax error: unterminated string literal");
      tokens.push({ kind: "string", value: text.slice(i + 1, end) });
      i = end + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      const match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i))!;
      tokens.push({ kind: "ident", value: match[0] });
      i += match[0].length;
    } else {
      throw invalid(`CEL parse error: Syntax error: token recognition error at: '${c}'`);
    }
  }
  return tokens;
}

interface Range {
  readonly key: string;
  readonly start: string;
  readonly end: string;
}

function hexLiteral(token: Token | undefined, name: string): string {
  if (token?.kind !== "string") {
    throw invalid(
      `${name} must be a string literal (e.g. '0xff'), got expression kind ${token?.kind}`,
    );
  }
  const s = token.value;
  if (!s.startsWith("0x")) throw invalid(`${name} must have '0x' prefix, got "${s}"`);
  const hex = s.slice(2);
  if (!hex) throw invalid(`${name}: hex value is required after '0x'`);
  if (hex.length > 17) {
    throw invalid(`${name}: hex value too long (${hex.length} chars, max 17): "${hex}"`);
  }
  const bad = [...hex].find((c) => !/[0-9a-f]/.test(c));
  if (bad !== undefined) throw invalid(`${name}: invalid hex character "${bad}" in "${s}"`);
  if (hex.length === 17 && s !== TOP) {
    throw invalid(`${name}: 17-digit hex value must be '${TOP}' (2^64), got "${s}"`);
  }
  if (hex.length < 16) {
    throw invalid(
      `${name} must be a 0x-prefixed 16-digit hex value, got "${s}" (did you mean "0x${
        hex.padStart(16, "0")
      }"?)`,
    );
  }
  return s;
}

/**
 * Parses a `shardSelector` as the API server does.
 * @param text The query parameter; `null`, absent or `""` selects everything.
 * @returns The selector, or `undefined` for none.
 * @throws {ApiFailure} 500 `invalid shard selector: …` as the API server answers.
 */
export function parseShardSelector(text: string | null | undefined): ShardSelector | undefined {
  if (text === null || text === undefined || text === "") return undefined;
  if (!text.trim()) {
    throw invalid("empty shard selector is not allowed; omit the parameter for unfiltered lists");
  }
  const tokens = tokenize(text);
  let at = 0;
  const next = () => tokens[at++];
  const expect = (value: string) => {
    const token = next();
    if (token?.value !== value || token.kind !== "punct") {
      throw invalid(
        `CEL parse error: Syntax error: mismatched input '${
          token?.value ?? "<EOF>"
        }' expecting '${value}'`,
      );
    }
  };
  const term = (): Range[] => {
    const token = next();
    if (token?.kind === "punct" && token.value === "(") {
      const inner = expression();
      expect(")");
      return inner;
    }
    if (token?.kind !== "ident") {
      throw invalid(
        "unexpected expression kind; expected shardRange() call or || operator",
      );
    }
    if (token.value !== "shardRange") {
      throw invalid(`unsupported function "${token.value}"; only shardRange() and || are allowed`);
    }
    expect("(");
    const args: Token[][] = [[]];
    for (let depth = 0;;) {
      const t = next();
      if (!t) throw invalid("CEL parse error: Syntax error: mismatched input '<EOF>'");
      if (t.kind === "punct" && t.value === ")" && depth === 0) break;
      if (t.kind === "punct" && t.value === "(") depth++;
      if (t.kind === "punct" && t.value === ")") depth--;
      if (t.kind === "punct" && t.value === "," && depth === 0) args.push([]);
      else args.at(-1)!.push(t);
    }
    if (args.length !== 3) {
      throw invalid(`shardRange() requires exactly 3 arguments, got ${args.length}`);
    }
    const path = args[0]!.map((t) => t.value).join("");
    if (!args[0]!.every((t) => t.kind === "ident" || t.value === ".") || !path) {
      throw invalid("shardRange() first argument: expected field path (e.g. object.metadata.uid)");
    }
    if (!FIELDS.includes(path)) {
      throw invalid(`unsupported field path "${path}"; supported: ${FIELDS.join(", ")}`);
    }
    const literal = (arg: Token[], name: string) =>
      hexLiteral(arg.length === 1 ? arg[0] : undefined, name);
    const start = literal(args[1]!, "hexStart");
    const end = literal(args[2]!, "hexEnd");
    if (!hexLess(start, end)) {
      throw invalid(`shard range start ${start} must be less than end ${end}`);
    }
    return [{ key: path, start, end }];
  };
  const expression = (): Range[] => {
    const ranges = term();
    while (tokens[at]?.kind === "punct" && tokens[at]!.value === "||") {
      at++;
      ranges.push(...term());
    }
    return ranges;
  };
  const ranges = expression();
  if (at < tokens.length) {
    throw invalid(`CEL parse error: Syntax error: extraneous input '${tokens[at]!.value}'`);
  }
  const key = ranges[0]!.key;
  const other = ranges.find((r) => r.key !== key);
  if (other) {
    throw invalid(`all shard ranges must use the same field, got "${key}" and "${other.key}"`);
  }
  const field = key === "object.metadata.uid" ? "uid" : "namespace";
  return {
    text: ranges.map((r) => `shardRange(${r.key}, '${r.start}', '${r.end}')`).join(" || "),
    matches: (object) => {
      const value = object.metadata?.[field];
      const hash = `0x${hashField(typeof value === "string" ? value : "")}`;
      return ranges.some((r) => !hexLess(hash, r.start) && hexLess(hash, r.end));
    },
  };
}
