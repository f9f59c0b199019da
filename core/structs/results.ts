/**
 * Handler results at compile time: what a handler returns is stored in `status.<handler id>` as
 * JSON, so a value that JSON cannot hold (a BigInt, a Symbol, a function, a Map or Set, an object
 * with methods) is a type error at the handler — the same values that fail the handler at run
 * time (`storageProblem()` in core/actions/outcomes.ts). Results typed `unknown` or `any` are
 * left to that run-time check.
 *
 * The registrations (`on.create`, `on.field`, `on.event`, `daemon`, `timer`, `subhandler`, …)
 * infer the result type `R` from the handler and expect a handler returning
 * `StorableResult<R>`: for a JSON result this is `R` itself; elsewhere a {@link NotStorable}
 * marker is intersected where the refused value is, and `deno check` reports the handler.
 *
 * @example Caught and not caught
 * ```ts
 * import type { StorableResult } from "./results.ts";
 * type A = StorableResult<{ count: number; at: Date }>; // { count: number; at: Date }
 * type B = StorableResult<{ count: bigint }>; // … & { count: NotStorable<"a BigInt"> }
 * type C = StorableResult<unknown>; // unknown: checked at run time only
 * ```
 * @module
 */

/**
 * What a {@link StorableResult} puts where a handler's result holds a value that JSON cannot
 * hold, so that the compiler's message names it (e.g. `NotStorable<"a BigInt">`). No value has
 * this type.
 *
 * @typeParam What The kind of value, e.g. `"a BigInt"`, `"a function"`, `"a Map"`.
 */
export interface NotStorable<What extends string> {
  /** Why the value is refused: handler results are stored in `status` as JSON. */
  readonly "not JSON: handler results are stored in status": What;
}

/**
 * The type a handler result of type `R` must have to be stored in `status` as it is: `R`
 * itself when it is JSON — `null`, booleans, numbers, strings, arrays and plain objects of them,
 * `undefined`/`void` (nothing is stored, or the field is left out), objects with `toJSON()` (a
 * `Date`), `unknown` and `any` — and, for a promise, the same of what it resolves to. Elsewhere
 * `R` intersected with a {@link NotStorable} marker at each refused value, which no value has:
 * a BigInt, a Symbol, a function, a Map, Set, WeakMap, WeakSet, a promise inside the result, or
 * an object with methods (a class instance). Objects and arrays are looked into 8 levels deep.
 *
 * Not caught at compile time (the run-time check fails the handler instead): `NaN` and
 * `±Infinity` (they are numbers), `undefined` in arrays, circular references, class instances
 * without methods, values typed `unknown`/`any`, values deeper than 8 levels, and results of a
 * generic type (those are refused: cast them to `unknown`).
 *
 * @typeParam R The handler's result type (inferred from the handler).
 * @typeParam Above The levels above this value (internal: leave it out).
 */
export type StorableResult<R, Above extends readonly unknown[] = []> =
  & R
  & (
    Above["length"] extends 8 ? R
      : 0 extends (1 & R) ? R // any
      : unknown extends R ? R // unknown: the run-time check decides
      : R extends string | number | boolean | null | undefined | void ? R
      : R extends bigint ? NotStorable<"a BigInt">
      : R extends symbol ? NotStorable<"a Symbol">
      : R extends (...args: never[]) => unknown ? NotStorable<"a function">
      : R extends { toJSON(...args: never[]): unknown } ? R // Date: stored as its toJSON()
      : R extends ReadonlyMap<unknown, unknown> ? NotStorable<"a Map">
      : R extends ReadonlySet<unknown> ? NotStorable<"a Set">
      : R extends WeakMap<never, unknown> ? NotStorable<"a WeakMap">
      : R extends WeakSet<never> ? NotStorable<"a WeakSet">
      : R extends PromiseLike<infer U>
        ? Above extends [] ? PromiseLike<StorableResult<U, [unknown]>>
        : NotStorable<"a Promise inside the result">
      // Arrays, tuples and objects, member by member (methods of class instances included).
      : { [K in keyof R]: StorableResult<R[K], [...Above, unknown]> }
  );
