/**
 * Status conditions as the Kubernetes API conventions define them: a list under
 * `status.conditions`, one entry per `type`, each with `status` (`True`, `False`, `Unknown`),
 * a CamelCase `reason`, a human `message`, the `observedGeneration` it was computed from, and the
 * `lastTransitionTime` when its `status` last changed.
 *
 * {@link setCondition} is pure: it returns the new list and never touches the time of a
 * condition whose status did not change, so a reconcile that finds everything as it was writes
 * nothing.
 *
 * @example Reporting readiness from a reconcile handler
 * ```ts
 * import { setCondition } from "./conditions.ts";
 * const status = { conditions: [] };
 * const conditions = setCondition(status, {
 *   type: "Ready",
 *   status: "True",
 *   reason: "ChildrenApplied",
 *   message: "The ConfigMap and the Deployment are applied",
 * }, { generation: 3 });
 * // ctx.patch.status.conditions = conditions;
 * ```
 * @module
 */

/**
 * One condition, as stored in `status.conditions`. (A type, not an interface, so that a list of
 * them is a `JsonValue`: `ctx.patch.status.conditions = setCondition(…)` needs no cast.)
 */
export type Condition = {
  /** The aspect it describes, CamelCase (`Ready`, `Available`). */
  readonly type: string;
  /** `True`, `False` or `Unknown`. */
  readonly status: "True" | "False" | "Unknown";
  /** Why, as one CamelCase word (`ChildrenApplied`). */
  readonly reason: string;
  /** Details for humans. */
  readonly message: string;
  /** The `metadata.generation` the condition was computed from. */
  readonly observedGeneration?: number;
  /** When `status` last changed, RFC 3339 in seconds. */
  readonly lastTransitionTime: string;
};

/** What {@link setCondition} is told: the condition without its bookkeeping. */
export interface ConditionInput {
  /** The aspect it describes, CamelCase (`Ready`). */
  readonly type: string;
  /** `True`, `False` or `Unknown`. */
  readonly status: "True" | "False" | "Unknown";
  /** Why, as one CamelCase word. */
  readonly reason: string;
  /** Details for humans. @default "" */
  readonly message?: string;
}

/** Options of {@link setCondition}. */
export interface SetConditionOptions {
  /** The object's `metadata.generation`, recorded as `observedGeneration`. */
  readonly generation?: number | undefined;
  /** The time of a transition. @default now */
  readonly now?: Date;
}

/**
 * The conditions with one set: replaced when its `type` exists, appended otherwise. Its
 * `lastTransitionTime` stays when the `status` is unchanged and is `now` otherwise; other
 * conditions are kept as they are.
 *
 * @param status The current status (read-only), e.g. `ctx.status`; `conditions` may be absent.
 * @param condition The type, status, reason and message.
 * @param options The generation observed and the time.
 * @returns The new list, for `ctx.patch.status.conditions` or an applied status.
 * @throws {TypeError} for an empty type or reason, or a status other than True/False/Unknown.
 */
export function setCondition(
  status: { readonly conditions?: unknown } | undefined,
  condition: ConditionInput,
  options: SetConditionOptions = {},
): Condition[] {
  if (!condition.type) throw new TypeError("A condition needs a type, e.g. Ready");
  if (!condition.reason) throw new TypeError("A condition needs a reason, e.g. ChildrenApplied");
  if (!["True", "False", "Unknown"].includes(condition.status)) {
    throw new TypeError(`A condition status is True, False or Unknown, not ${condition.status}`);
  }
  const current = Array.isArray(status?.conditions) ? status.conditions as Condition[] : [];
  const previous = current.find((c) => c?.type === condition.type);
  const time = (options.now ?? new Date()).toISOString().replace(/\.\d+Z$/, "Z");
  const next: Condition = {
    type: condition.type,
    status: condition.status,
    reason: condition.reason,
    message: condition.message ?? "",
    ...(options.generation !== undefined ? { observedGeneration: options.generation } : {}),
    lastTransitionTime: previous?.status === condition.status && previous.lastTransitionTime
      ? previous.lastTransitionTime
      : time,
  };
  return previous ? current.map((c) => c === previous ? next : c) : [...current, next];
}

/**
 * One condition by type.
 *
 * @param status The status, e.g. `ctx.status`.
 * @param type The condition type.
 * @returns The condition, or `undefined`.
 */
export function getCondition(
  status: { readonly conditions?: unknown } | undefined,
  type: string,
): Condition | undefined {
  const current = Array.isArray(status?.conditions) ? status.conditions as Condition[] : [];
  return current.find((c) => c?.type === type);
}
