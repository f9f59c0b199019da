/**
 * Label selectors (`=`, `==`, `!=`, `in`, `notin`, `exists`, `!key`, `>`/`<`) and field
 * selectors (`metadata.name`, `metadata.namespace`, and per-resource fields such as
 * `involvedObject.uid` of Events), parsed and matched as the API server does.
 * @module
 */

import { badRequest } from "./errors.ts";
import { coreEventField } from "./events.ts";
import type { KubeObject, ResourceDef } from "./types.ts";

/** A parsed selector: a predicate over objects. */
export type Selector = (object: KubeObject) => boolean;

interface Requirement {
  key: string;
  op: "=" | "!=" | "in" | "notin" | "exists" | "!" | ">" | "<";
  values: string[];
}

/** Tokens that are not identifiers or values. */
const OPERATOR = /^(!=|==|=|>|<|\(|\)|,|!)$/;
const TOKEN = /\s*(!=|==|=|>|<|\(|\)|,|!|[^\s!=<>(),]+)/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    const start = TOKEN.lastIndex;
    const match = TOKEN.exec(text);
    if (!match) {
      if (text.slice(start).trim() === "") break;
      throw badRequest(`unable to parse requirement: invalid label selector: ${text}`);
    }
    tokens.push(match[1]!);
  }
  return tokens;
}

/** Parses a label selector; throws 400 BadRequest when malformed. */
export function parseLabelSelector(text: string | null | undefined): Selector {
  if (!text || !text.trim()) return () => true;
  const tokens = tokenize(text);
  const requirements: Requirement[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw badRequest(`unable to parse requirement: ${why}`);
  };
  const word = (what: string): string => {
    const token = tokens[i++];
    if (token === undefined || OPERATOR.test(token)) {
      fail(`found '${token ?? ""}', expected: ${what}`);
    }
    return token!;
  };
  const isWord = (token: string | undefined): token is string =>
    token !== undefined && !OPERATOR.test(token);
  // `(a,b)`, read as the API server reads it: `()` is the set of the empty value, and an empty
  // place between commas or next to a parenthesis is the empty value too (`(a,)` = {a, ""}).
  const valueSet = (): string[] => {
    if (tokens[i++] !== "(") fail(`found '${tokens[i - 1] ?? ""}' expected: '('`);
    const values = new Set<string>();
    const first = tokens[i];
    if (first === ")") {
      i++;
      return [""];
    }
    if (first !== "," && !isWord(first)) {
      fail(`found '${first ?? ""}', expected: ',', ')' or identifier`);
    }
    for (;;) {
      const token = tokens[i++];
      if (isWord(token)) {
        values.add(token);
        if (tokens[i] === ",") continue;
        if (tokens[i] === ")") break;
        fail(`found '${tokens[i] ?? ""}', expected: ',' or ')'`);
      } else if (token === ",") {
        if (values.size === 0) values.add("");
        if (tokens[i] === ")") {
          values.add("");
          break;
        }
        if (tokens[i] === ",") values.add("");
      } else {
        fail(`found '${token ?? ""}', expected: ',', or identifier`);
      }
    }
    i++; // the ")"
    return [...values];
  };
  while (i < tokens.length) {
    if (tokens[i] === "!") {
      i++;
      requirements.push({ key: word("identifier"), op: "!", values: [] });
    } else {
      const key = word("identifier");
      const op = tokens[i];
      if (op === undefined || op === ",") {
        requirements.push({ key, op: "exists", values: [] });
      } else if (op === "=" || op === "==" || op === "!=" || op === ">" || op === "<") {
        i++;
        const next = tokens[i];
        const value = next === undefined || next === "," ? "" : word("value");
        requirements.push({ key, op: op === "==" ? "=" : op, values: [value] });
      } else if (op === "in" || op === "notin") {
        i++;
        requirements.push({ key, op, values: valueSet() });
      } else {
        fail(`found '${op}', expected: in, notin, =, ==, !=, gt, lt`);
      }
    }
    if (i < tokens.length) {
      if (tokens[i] !== ",") fail(`found '${tokens[i]}', expected: ','`);
      i++;
      if (i >= tokens.length) throw badRequest("found '', expected: identifier after ','");
    }
  }
  return (object) => {
    const labels = object.metadata?.labels ?? {};
    return requirements.every(({ key, op, values }) => {
      const has = Object.hasOwn(labels, key);
      const value = labels[key];
      switch (op) {
        case "=":
          return has && value === values[0];
        case "!=":
          return !has || value !== values[0];
        case "in":
          return has && values.includes(value!);
        case "notin":
          return !has || !values.includes(value!);
        case "exists":
          return has;
        case "!":
          return !has;
        case ">":
        case "<": {
          const a = Number(value);
          const b = Number(values[0]);
          if (!has || !Number.isInteger(a) || !Number.isInteger(b)) return false;
          return op === ">" ? a > b : a < b;
        }
      }
    });
  };
}

/** Field paths a resource supports in field selectors (beyond metadata.name/namespace). */
const EXTRA_FIELDS: Record<string, readonly string[]> = {
  "events.k8s.io/events": [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "type",
  ],
  "/events": [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
  ],
  "/secrets": ["type"],
  "/namespaces": ["status.phase"],
  "/pods": [
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
  ],
};

function fieldValue(object: KubeObject, path: string): string {
  if (path === "source") path = "source.component";
  let value: unknown = object;
  for (const part of path.split(".")) {
    value = typeof value === "object" && value !== null
      ? (value as Record<string, unknown>)[part]
      : undefined;
  }
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : String(value);
}

/** Parses a field selector for a resource; throws 400 BadRequest for unsupported fields. */
export function parseFieldSelector(
  text: string | null | undefined,
  def: Pick<ResourceDef, "group" | "plural" | "namespaced">,
): Selector {
  if (!text || !text.trim()) return () => true;
  const supported = [
    "metadata.name",
    "metadata.namespace",
    ...EXTRA_FIELDS[
      `${def.group}/${def.plural}`
    ] ?? [],
  ];
  const terms = text.split(",").map((term) => {
    const match = /^\s*([^!=\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(term);
    if (!match) throw badRequest(`invalid selector: '${text}'; can't understand '${term}'`);
    const events = def.group === "events.k8s.io";
    const [, given, op, value] = match as unknown as [string, string, string, string];
    const field = events ? coreEventField(given) : given;
    if (field === undefined) throw badRequest(`field label not supported: ${given}`);
    if (!supported.includes(field)) {
      throw badRequest(
        `"${field}" is not a known field selector: only ${
          supported.map((f) => `"${f}"`).join(", ")
        }`,
      );
    }
    return { field, negate: op === "!=", value };
  });
  return (object) =>
    terms.every(({ field, negate, value }) => (fieldValue(object, field) === value) !== negate);
}
