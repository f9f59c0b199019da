/**
 * Level-based reconciliation (not in Kopf): a KopfApp owns a ConfigMap and a Deployment, and one
 * reconcile handler makes them match the KopfApp's spec — whatever happened before.
 *
 * - It runs for every KopfApp at start, whenever a KopfApp changes (not for status-only
 *   changes), and whenever a ConfigMap or Deployment it controls changes or is deleted: delete
 *   the ConfigMap and it is back at once; edit it and the edit is reverted.
 * - Children are stated with server-side apply (`ctx.apply`), so there is no diffing by hand.
 *   A reconcile that finds everything in place sends no request at all: the shared informer
 *   cache shows the children, and an apply that would change nothing is skipped.
 * - A burst of changes to one KopfApp coalesces into a few reconciles (a work queue of keys).
 * - `finalizer: true`: deleting a KopfApp reconciles it once more with `ctx.deleting` (for
 *   cleanup outside Kubernetes); Kubernetes' garbage collector then deletes the children, which
 *   carry an owner reference to it.
 *
 *   kubectl apply -f examples/20-reconcile/crd.yaml
 *   kopf run examples/20-reconcile/example.ts --verbose
 *   kubectl apply -f examples/20-reconcile/app.yaml
 *   kubectl delete configmap kopf-app-1-config       # recreated at once
 *   kubectl patch kapp kopf-app-1 --type merge -p '{"spec":{"message":"bye"}}'
 *   kubectl get kapp kopf-app-1 -o jsonpath='{.status.conditions}'
 */
import { on } from "../../mod.ts";
import { OPTIONS, reconcileApp } from "./reconciler.ts";

on.reconcile("kopfapps", OPTIONS, reconcileApp);
