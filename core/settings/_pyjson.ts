/**
 * JSON serialisation byte-for-byte as Python's `json.dumps(value, separators=(",", ":"))`,
 * which is how Kopf writes its annotations (progress records, the last-handled configuration).
 *
 * Differences from `JSON.stringify` that matter for compatibility:
 * - every non-ASCII character (and DEL, 0x7f) is escaped as `\uXXXX` in lowercase hex, astral
 *   characters as surrogate pairs (`ensure_ascii=True`);
 * - non-integral numbers use Python's `repr`: exponent form below 1e-4 (`1e-05`, `1.5e-07`)
 *   and from 1e16 up, with a signed, at least two-digit exponent (`1e+21`);
 * - integral numbers below 1e21 print as integers, as the API server hands them over (Go prints
 *   such float64 values without an exponent, so Python parses them as `int`).
 *
 * Known limits: JavaScript numbers cannot tell `1.0` from `1` (Kopf would print `1.0` for a
 * float it parsed from `1.0`, which the API server never sends); objects with integer-like keys
 * (`"10"`) iterate those keys first in JavaScript, so their order may differ from Python's.
 * @module
 */

/**
 * Serialise a JSON-like value compactly, exactly as Python's `json.dumps` with `(",", ":")`
 * separators. Keys with `undefined` values are skipped; `undefined` in arrays becomes `null`.
 * @param value The value.
 * @returns The JSON text.
 */
export function dumpCompact(value: unknown): string {
  // Most essences are plain: integers, printable ASCII. Then the runtime's own serialiser writes
  // exactly what Python does, many times faster than walking the value here.
  if (value !== undefined && isPlain(value)) return JSON.stringify(value);
  return dumpSlow(value);
}

/**
 * Whether `JSON.stringify` writes the value exactly as Python would: only integral numbers below
 * 1e21, strings of printable ASCII, and plain objects and arrays of such (no `undefined` in
 * arrays, which both would write as `null` anyway, but keep it simple).
 */
function isPlain(value: unknown): boolean {
  switch (typeof value) {
    case "boolean":
      return true;
    case "number":
      return Number.isInteger(value) && Math.abs(value) < 1e21;
    case "string":
      return PRINTABLE_ASCII.test(value);
    case "object": {
      if (value === null) return true;
      if (Array.isArray(value)) return value.every((item) => item !== undefined && isPlain(item));
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      for (const key in value) {
        if (!PRINTABLE_ASCII.test(key)) return false;
        const item = (value as Record<string, unknown>)[key];
        if (item !== undefined && !isPlain(item)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function dumpSlow(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return formatNumber(value);
    case "bigint":
      return value.toString();
    case "string":
      return quote(value);
  }
  if (Array.isArray(value)) return `[${value.map(dumpSlow).join(",")}]`;
  if (typeof value === "object") {
    const mapping = value as Readonly<Record<string, unknown>>;
    let out = "{";
    for (const key of Object.keys(mapping)) {
      const item = mapping[key];
      if (item === undefined) continue;
      if (out.length > 1) out += ",";
      out += `${quote(key)}:${dumpSlow(item)}`;
    }
    return `${out}}`;
  }
  throw new TypeError(`Cannot serialise a value of type ${typeof value} to JSON`);
}

const SHORT_ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
  "\b": "\\b",
  "\f": "\\f",
};

/** Printable ASCII only: Python and `JSON.stringify` escape it alike (only `"` and `\\`). */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function quote(text: string): string {
  if (PRINTABLE_ASCII.test(text)) return JSON.stringify(text);
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const code = text.charCodeAt(i);
    const short = SHORT_ESCAPES[ch];
    if (short !== undefined) out += short;
    else if (code < 0x20 || code >= 0x7f) out += `\\u${code.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out + '"';
}

function formatNumber(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
  // Integral values below 1e21 reach Kopf as JSON integers (the API server prints them so).
  if (Number.isInteger(value) && Math.abs(value) < 1e21) return String(value);
  // Python's float repr: the same shortest round-trip digits as JavaScript, but a different
  // switch to the exponent form (decimal point position <= -4 or > 16) and exponent style.
  const [mantissa, exp] = value.toExponential().split("e") as [string, string];
  const exponent = Number(exp);
  if (exponent < -4 || exponent >= 16) {
    const sign = exponent < 0 ? "-" : "+";
    return `${mantissa}e${sign}${String(Math.abs(exponent)).padStart(2, "0")}`;
  }
  return String(value);
}
