/**
 * The options of resource handlers (`on.create` … `on.event`), the handler function types, and
 * the argument handling that every `on.*` registration shares.
 * @module
 */

import type { ErrorsMode } from "../actions/execution.ts";
import type { ChangingContext, EventContext, FieldContext } from "../intents/contexts.ts";
import type { ABSENT, MetaFilter, PRESENT, ValueFilter, WhenCallback } from "../intents/filters.ts";
import type { OperatorRegistry } from "../intents/registries.ts";
import type { FieldSpec } from "../structs/dicts.ts";
import { closest } from "../util/suggest.ts";
import type { ActivityOptions } from "./_on_activities.ts";
import type { AdmissionOptions } from "./_on_admission.ts";
import type { IndexOptions } from "./indexing.ts";
import type { ReconcileOptions } from "./reconciling.ts";
import type { DaemonOptions, TimerOptions } from "./spawning.ts";

/** Options every resource handler accepts. */
export interface HandlerOptions<C = never> {
  /** Handler id (default: the function name, plus `/field` for field filters). */
  readonly id?: string;
  /** The registry to add to. @default the default registry */
  readonly registry?: OperatorRegistry;
  /** Passed back to the handler as `param`. */
  readonly param?: unknown;
  /** Label filters: values, `PRESENT`, `ABSENT` or callbacks. */
  readonly labels?: MetaFilter;
  /** Annotation filters: values, `PRESENT`, `ABSENT` or callbacks. */
  readonly annotations?: MetaFilter;
  /** Whole-object filter callback. */
  readonly when?: WhenCallback<C>;
  /** A field (dotted string or path) the handler cares about. */
  readonly field?: FieldSpec;
  /** Value filter of `field`. */
  readonly value?: ValueFilter;
}

/**
 * A value filter of a typed field (`value`, `old`, `new` with a `field` of a typed resource):
 * a value of the field's own type, `PRESENT`, `ABSENT`, or a callback of the value — so a
 * misspelt enum value is a compile error. An untyped field (`V` unknown) takes any
 * {@link ValueFilter}.
 * @typeParam V The field's type.
 */
export type TypedValueFilter<V> = unknown extends V ? ValueFilter
  : NonNullable<V> | typeof PRESENT | typeof ABSENT | ((value: V, context: never) => boolean);

/**
 * `value` of a typed field (see {@link TypedValueFilter}).
 * @typeParam V The field's type.
 */
export interface TypedValueOption<V> {
  /** Value filter of `field`, of the field's type. */
  readonly value?: TypedValueFilter<V>;
}

/**
 * `value`, `old` and `new` of a typed field (update and field handlers; see
 * {@link TypedValueFilter}).
 * @typeParam V The field's type.
 */
export interface TypedValueOptions<V> extends TypedValueOption<V> {
  /** Filter of the old value of `field`, of the field's type. */
  readonly old?: TypedValueFilter<V>;
  /** Filter of the new value of `field`, of the field's type. */
  readonly new?: TypedValueFilter<V>;
}

/** Options of resource-changing handlers. */
export interface ChangingOptions<C = never> extends HandlerOptions<C> {
  /** Treatment of arbitrary errors. @default "temporary" */
  readonly errors?: ErrorsMode;
  /** Overall timeout in seconds since the first attempt. */
  readonly timeout?: number;
  /** Maximum number of attempts. */
  readonly retries?: number;
  /** Seconds before retrying arbitrary errors. @default 60 */
  readonly backoff?: number;
}

/** Options of update and field handlers. */
export interface UpdateOptions<C = never> extends ChangingOptions<C> {
  /** Filter of the old value of `field`. */
  readonly old?: ValueFilter;
  /** Filter of the new value of `field`. */
  readonly new?: ValueFilter;
}

/** Options of delete handlers. */
export interface DeleteOptions<C = never> extends ChangingOptions<C> {
  /** Do not block deletion with a finalizer (best effort: may be missed). @default false */
  readonly optional?: boolean;
}

/** Options of resume handlers. */
export interface ResumeOptions<C = never> extends ChangingOptions<C> {
  /** Also resume objects already marked for deletion. @default false */
  readonly deleted?: boolean;
}

/** Options of field handlers (`field` is required). */
export interface FieldOptions<C = never> extends UpdateOptions<C> {
  /** The field to watch. */
  readonly field: FieldSpec;
}

/**
 * A resource-changing handler function.
 * @typeParam R Its result (stored in `status.<id>`); registrations check it is JSON (see
 *   `StorableResult`).
 */
export type Changing<S, T, R = unknown> = (context: ChangingContext<S, T>) => R;
/**
 * A handler function with a `field`: its `old`, `new` (of type `V`) and `diff` are the field's.
 * @typeParam R Its result (stored in `status.<id>`).
 */
export type FieldChanging<S, T, V = unknown, R = unknown> = (context: FieldContext<S, T, V>) => R;
/**
 * An event-watching handler function.
 * @typeParam R Its result (stored in `status.<id>`).
 */
export type Eventing<S, T, R = unknown> = (context: EventContext<S, T>) => R;
/** The default type of `spec` and `status`. */
export type Default = Record<string, unknown>;

/** `(options, fn)` or just `(fn)`: the options and the function, either way. */
export function splitArgs<F, O>(a: O | F, b: F | undefined): [O, F] {
  return b === undefined ? [{} as O, a as F] : [a as O, b];
}

/**
 * The option names one kind of registration accepts; keyed by name so that the compiler keeps
 * each list complete and exact against its options interface.
 */
export type OptionKeys = Readonly<Record<string, true>>;

const HANDLER_KEYS = {
  id: true,
  registry: true,
  param: true,
  labels: true,
  annotations: true,
  when: true,
  field: true,
  value: true,
} as const satisfies Record<keyof HandlerOptions, true>;

const RETRY_KEYS = { errors: true, timeout: true, retries: true, backoff: true } as const;

const CHANGING_KEYS = { ...HANDLER_KEYS, ...RETRY_KEYS } as const satisfies Record<
  keyof ChangingOptions,
  true
>;
const UPDATE_KEYS = { ...CHANGING_KEYS, old: true, new: true } as const satisfies Record<
  keyof UpdateOptions,
  true
>;

/** The accepted options of every `on.*` registration, by its name in messages. */
export const OPTION_KEYS = {
  "on.create": CHANGING_KEYS,
  "on.update": UPDATE_KEYS,
  "on.delete": { ...CHANGING_KEYS, optional: true } satisfies Record<keyof DeleteOptions, true>,
  "on.resume": { ...CHANGING_KEYS, deleted: true } satisfies Record<keyof ResumeOptions, true>,
  "on.field": UPDATE_KEYS satisfies Record<keyof FieldOptions, true>,
  "on.event": HANDLER_KEYS,
  "on.validate": {
    ...HANDLER_KEYS,
    operations: true,
    operation: true,
    subresource: true,
    persistent: true,
    sideEffects: true,
    ignoreFailures: true,
  } satisfies Record<keyof AdmissionOptions, true>,
  "on.startup": { id: true, registry: true, param: true, ...RETRY_KEYS } satisfies Record<
    keyof ActivityOptions,
    true
  >,
  "on.daemon": {
    ...HANDLER_KEYS,
    ...RETRY_KEYS,
    initialDelay: true,
    cancellationBackoff: true,
    cancellationTimeout: true,
    cancellationPolling: true,
  } satisfies Record<keyof DaemonOptions, true>,
  "on.timer": {
    ...HANDLER_KEYS,
    ...RETRY_KEYS,
    initialDelay: true,
    interval: true,
    sharp: true,
    idle: true,
  } satisfies Record<keyof TimerOptions, true>,
  "on.index": { ...HANDLER_KEYS, errors: true, backoff: true } satisfies Record<
    keyof IndexOptions,
    true
  >,
  "on.reconcile": {
    ...HANDLER_KEYS,
    owns: true,
    watches: true,
    finalizer: true,
    resync: true,
    statusChanges: true,
    fieldManager: true,
    concurrency: true,
    errors: true,
    backoff: true,
    retries: true,
  } satisfies Record<keyof ReconcileOptions, true>,
} as const satisfies Record<string, OptionKeys>;

/** What {@link registrationArgs} needs to know of the registration it checks. */
export interface RegistrationCall {
  /** The function's name in messages, e.g. `on.create`. */
  readonly name: string;
  /** The option names it accepts. */
  readonly keys: OptionKeys;
  /** Whether its first argument is a resource spec (not for `on.startup` and its kind). */
  readonly resource: boolean;
  /** Option names refused with a reason of their own (e.g. retries of admission handlers). */
  readonly refused?: Readonly<Record<string, string>>;
}

/**
 * Checks and splits the arguments of a registration — `(spec, options, fn)`, `(spec, fn)`,
 * `(options, fn)` or `(fn)` — so that a mistake fails at import, not silently at runtime (a
 * dynamic import is not type-checked): an unknown option name (with the likely meant one), a
 * handler that is not a function, options that are not an object, a missing resource, and
 * Kopf's positional `group, version, plural` (with the line to write instead).
 *
 * @param call Which registration.
 * @param args All its arguments, as given.
 * @returns The options (an empty object when none were given) and the function.
 * @throws {TypeError} naming the registration and the mistake.
 */
export function registrationArgs<O, F>(
  call: RegistrationCall,
  args: readonly unknown[],
): { options: O; fn: F } {
  const given = [...args];
  // A trailing undefined after the function (options passed on): as if not given.
  while (given.at(-1) === undefined && typeof given.at(-2) === "function") given.pop();
  const name = call.name;
  if (call.resource) {
    const spec = given[0];
    if (typeof spec === "string" && typeof given[1] === "string") {
      throw new TypeError(positionalMessage(name, given));
    }
    if (typeof spec === "function" || spec === undefined || spec === null) {
      const fn = typeof spec === "function" ? spec.name || "fn" : "fn";
      throw new TypeError(
        `${name}() needs the resource first, e.g. ${name}("kopfexamples", ${fn}); got ${
          describe(spec)
        }`,
      );
    }
    given.shift();
  }
  if (given.length === 0 || (given.length === 1 && isOptions(given[0]))) {
    throw new TypeError(
      `${name}() needs a handler function${given.length ? " after the options" : ""}`,
    );
  }
  if (given.length > 2) {
    throw new TypeError(
      `${name}() takes ${
        call.resource ? "a resource, " : ""
      }options and a function; got ${args.length} arguments`,
    );
  }
  const [options, fn] = given.length === 1 ? [{}, given[0]] : given;
  if (typeof fn !== "function") {
    throw new TypeError(`${name}(): the handler must be a function, got ${describe(fn)}`);
  }
  if (!isOptions(options)) {
    throw new TypeError(`${name}(): the options must be an object, got ${describe(options)}`);
  }
  const unknown = Object.keys(options).filter((key) => !Object.hasOwn(call.keys, key));
  for (const key of unknown) {
    const reason = call.refused?.[key];
    if (reason !== undefined) throw new TypeError(reason);
  }
  if (unknown.length) {
    const hints = unknown.map((key) => {
      const meant = closest(key, Object.keys(call.keys));
      return meant ? `\`${key}\` (did you mean \`${meant}\`?)` : `\`${key}\``;
    });
    throw new TypeError(
      `${name}(): unknown option${unknown.length > 1 ? "s" : ""} ${hints.join(", ")}; ` +
        `it accepts ${Object.keys(call.keys).join(", ")}`,
    );
  }
  return { options: options as O, fn: fn as F };
}

function isOptions(value: unknown): value is object {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The message for Kopf's `on.create("example.com", "v1", "widgets", fn)`. */
function positionalMessage(name: string, args: readonly unknown[]): string {
  const strings: string[] = [];
  for (const arg of args) {
    if (typeof arg !== "string") break;
    strings.push(arg);
  }
  const rest = args.slice(strings.length);
  const fn = rest.find((arg) => typeof arg === "function") as
    | ((...a: never[]) => unknown)
    | undefined;
  const options = rest.find((arg) => typeof arg === "object" && arg !== null);
  const tail = `${options ? `${render(options)}, ` : ""}${fn?.name || "fn"}`;
  const given = `${name}(${[...strings.map((s) => JSON.stringify(s)), "…"].join(", ")})`;
  let group: string | undefined;
  let version: string | undefined;
  let plural: string;
  if (strings.length === 3) [group, version, plural] = strings as [string, string, string];
  else if (strings.length === 2) {
    const [first, second] = strings as [string, string];
    plural = second;
    if (first === "v1") [group, version] = ["", "v1"];
    else if (first.includes("/")) [group, version] = first.split("/", 2) as [string, string];
    else group = first;
  } else {
    return `${given}: a resource is one argument (see the resource spellings in docs/filters.md); ` +
      `its name parts cannot be separate arguments`;
  }
  const dotted = [plural, version, group].filter((part) => part).join(".");
  const fields = [
    group !== undefined ? `group: ${JSON.stringify(group)}` : "",
    version !== undefined ? `version: ${JSON.stringify(version)}` : "",
    `plural: ${JSON.stringify(plural)}`,
  ].filter(Boolean).join(", ");
  return `${given}: Kopf's positional group, version, plural are not accepted (the handler ` +
    `would be lost); write ${name}(${
      JSON.stringify(dotted)
    }, ${tail}) or ${name}({ ${fields} }, ${tail})`;
}

/** A short rendering of an argument for messages: literals as written, others by type. */
function render(value: unknown, depth = 0): string {
  if (typeof value === "function") return value.name || "fn";
  if (typeof value !== "object" || value === null) {
    return typeof value === "string" ? JSON.stringify(value) : String(value);
  }
  if (depth > 1) return "…";
  if (Array.isArray(value)) return `[${value.map((v) => render(v, depth + 1)).join(", ")}]`;
  const entries = Object.entries(value).map(([k, v]) => `${k}: ${render(v, depth + 1)}`);
  return entries.length ? `{ ${entries.join(", ")} }` : "{}";
}

/** What a wrong argument is, for messages. */
function describe(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}`;
  if (typeof value === "function") return `the function ${value.name || "(anonymous)"}`;
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

/** Rejects filter combinations that could never match, at registration rather than at runtime. */
export function validateFilters(options: UpdateOptions<unknown>): void {
  const hasField = options.field !== undefined && options.field !== null;
  if (
    !hasField &&
    (options.value !== undefined || options.old !== undefined || options.new !== undefined)
  ) {
    throw new TypeError("The value, old and new filters need a field");
  }
  if (options.value !== undefined && (options.old !== undefined || options.new !== undefined)) {
    throw new TypeError("The value filter and the old/new filters are mutually exclusive");
  }
  for (const filters of [options.labels, options.annotations]) {
    for (const [key, v] of Object.entries(filters ?? {})) {
      if (v === null || v === undefined) {
        throw new TypeError(`Filter '${key}': use PRESENT or ABSENT instead of null`);
      }
    }
  }
}
