/**
 * The reconcile handler of examples/20-reconcile (see example.ts), apart from its registration
 * so that tests can register it into their own registry.
 * @module
 */
import type { JsonValue, KubeObject, ReconcileContext, ReconcileOptions } from "../../mod.ts";
import { adopt } from "../../kits/hierarchies.ts";
import { setCondition } from "../../kits/conditions.ts";

/** The KopfApp's spec. */
export interface AppSpec {
  /** Goes into the ConfigMap and the Deployment's environment. */
  readonly message?: string;
  /** Replicas of the Deployment (0 by default: the demo needs no running Pods). */
  readonly replicas?: number;
}

/** The registration options (exported for the tests, which register into their own registry). */
export const OPTIONS: ReconcileOptions<ReconcileContext<AppSpec>> = {
  id: "app",
  owns: ["configmaps", "deployments.apps"],
  finalizer: true,
  fieldManager: "kopf-example-20",
};

/**
 * Makes the children of one KopfApp match its spec.
 *
 * @param ctx The reconcile context.
 */
export async function reconcileApp(ctx: ReconcileContext<AppSpec>): Promise<void> {
  if (ctx.deleting) {
    // Kubernetes deletes the children (owner references); clean up anything outside it here.
    ctx.logger.info(`Cleaning up after ${ctx.name}.`);
    return;
  }
  ctx.logger.debug(`Reconciling ${ctx.name} at generation ${ctx.meta.generation}.`);
  const message = ctx.spec.message ?? "";
  const labels = { app: ctx.name! };
  const config: KubeObject = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: `${ctx.name}-config` },
    data: { message },
  };
  const deployment: KubeObject = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: `${ctx.name}-app` },
    spec: {
      replicas: ctx.spec.replicas ?? 0,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [{
            name: "app",
            image: "registry.k8s.io/pause:3.10",
            env: [{ name: "MESSAGE", value: message }],
          }],
        },
      },
    },
  };
  adopt([config, deployment]); // owner reference to the KopfApp, its namespace and labels
  await ctx.apply(config);
  await ctx.apply(deployment);
  ctx.logger.debug(`Reconciled ${ctx.name}.`);
  ctx.patch.status.conditions = setCondition(ctx.status, {
    type: "Ready",
    status: "True",
    reason: "ChildrenApplied",
    message: "The ConfigMap and the Deployment match the spec",
  }, { generation: ctx.meta.generation as number | undefined }) as unknown as JsonValue;
}
