/**
 * The current operator's connection: which cluster `KubeClient.connect()` and `autoConfigure()`
 * reach when called without a kubeconfig or context from inside a running operator — the
 * operator's own (`--embedded`, `--kubeconfig`, `--context`, login handlers), not whatever
 * `KUBECONFIG` / `~/.kube/config` says.
 *
 * The rule, for several operators in one process too:
 * 1. Inside an operator's work (its handlers, filters, daemons — anything started from within
 *    `operator()`/`run()`/`start()`, tracked across `await`s with `AsyncLocalStorage`): that
 *    operator's connection; before it has connected (startup handlers), its kubeconfig and
 *    context options.
 * 2. Elsewhere, when exactly one operator runs in the process: that one's.
 * 3. Otherwise (none, or several and the call belongs to none): the environment, as before.
 *
 * An explicit `kubeconfig` or `context` always wins.
 * @module
 */

import { AsyncLocalStorage } from "node:async_hooks";
import type { ConnectionInfo } from "./connection.ts";

/** One running operator's connection, as its handlers should use it. */
export class OperatorScope {
  /** The operator's kubeconfig file(s), as it was given them (empty: the environment's). */
  readonly paths: readonly string[];
  /** The operator's kubeconfig context, if given. */
  readonly context: string | undefined;
  /** The operator's connection, once it has connected. */
  connection: ConnectionInfo | undefined;

  /**
   * Creates the scope of an operator that has not connected yet.
   *
   * @param options The operator's kubeconfig and context options.
   */
  constructor(
    options: { readonly kubeconfig?: string | readonly string[]; readonly context?: string } = {},
  ) {
    this.paths = options.kubeconfig === undefined
      ? []
      : ([] as string[]).concat(options.kubeconfig);
    this.context = options.context || undefined;
  }
}

// On the global object, so that a second copy of the library (e.g. a kit imported from a
// published version while the CLI runs from a checkout) sees the same operators.
const KEY = Symbol.for("kopf.operatorScopes");
type Scopes = { current: AsyncLocalStorage<OperatorScope>; active: Set<OperatorScope> };
type WithScopes = { [KEY]?: Scopes };
const scopes: Scopes = (globalThis as WithScopes)[KEY] ??= {
  current: new AsyncLocalStorage<OperatorScope>(),
  active: new Set(),
};

/**
 * Runs an operator's work with its scope as the current one (inherited by everything it starts)
 * and as one of the process's running operators until the work settles.
 *
 * @param scope The operator's scope.
 * @param work The operator's work.
 * @returns What `work` resolves to.
 */
export async function withOperatorScope<T>(
  scope: OperatorScope,
  work: () => Promise<T>,
): Promise<T> {
  scopes.active.add(scope);
  try {
    return await scopes.current.run(scope, work);
  } finally {
    scopes.active.delete(scope);
  }
}

/**
 * The scope of the operator whose work is running here; else the only running operator's.
 *
 * @returns The scope, or `undefined` outside operators (or with several, outside all of them).
 */
export function currentOperatorScope(): OperatorScope | undefined {
  const own = scopes.current.getStore();
  if (own) return own;
  if (scopes.active.size !== 1) return undefined;
  return scopes.active.values().next().value;
}
