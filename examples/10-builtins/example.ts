/**
 * Handlers for a built-in resource (Pods) and background work started by handlers.
 * Port of Kopf's example 10-builtins.
 *
 * Every Pod that appears (or already exists when the operator starts), except in `kube-*`
 * namespaces, gets a "killer" timer: after 30 seconds the operator deletes the Pod through the
 * API. If the Pod is deleted earlier, its delete handler cancels the timer. The delete handler
 * also means a finalizer on every served Pod while the operator serves it.
 *
 * The delay can be changed with the `POD_KILL_DELAY` environment variable (seconds); this is
 * not in Kopf's original and exists so that the test can see a kill without waiting 30 seconds.
 *
 *   kopf run examples/10-builtins/example.ts --verbose
 *   kubectl run kopf-pod --image=busybox -- sleep 1
 */
import {
  type ChangingContext,
  declarePermissions,
  KubeClient,
  type Logger,
  on,
} from "../../mod.ts";

const PODS = { group: "", version: "v1", plural: "pods", namespaced: true };
const KILL_DELAY = Number(Deno.env.get("POD_KILL_DELAY") || 30);

// For `kopf generate rbac`: the background kill deletes Pods itself.
declarePermissions(["", "v1", "pods"], ["delete"], { reason: "the Pod killer" });

/** The pending kills: `namespace/name` → a controller that cancels the kill. */
const tasks = new Map<string, AbortController>();

function pod_in_sight({ namespace, name, logger }: ChangingContext): void {
  if (!namespace || !name || namespace.startsWith("kube-")) return;
  const key = `${namespace}/${name}`;
  tasks.get(key)?.abort(); // Never two timers for one Pod.
  const controller = new AbortController();
  tasks.set(key, controller);
  // Deliberately not awaited: the handler finishes now; the kill happens in the background.
  void pod_killer(namespace, name, logger, KILL_DELAY, controller.signal).finally(() => {
    if (tasks.get(key) === controller) tasks.delete(key);
  });
}

on.resume("pods", pod_in_sight);
on.create("pods", pod_in_sight);

on.delete("pods", function pod_deleted({ namespace, name }) {
  tasks.get(`${namespace}/${name}`)?.abort();
});

async function pod_killer(
  namespace: string,
  name: string,
  logger: Logger,
  timeout: number,
  signal: AbortSignal,
): Promise<void> {
  logger.info(`=== Pod killing happens in ${timeout}s.`);
  const killed = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(true), timeout * 1000);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(false);
    }, { once: true });
  });
  if (!killed) {
    logger.info("=== Pod killing is cancelled!");
    return;
  }
  logger.info("=== Pod killing happens NOW!");
  try {
    using client = await KubeClient.connect();
    await client.api.delete(PODS, name, { namespace });
  } catch (error) {
    logger.exception("=== Pod killing failed.", error);
  }
}
