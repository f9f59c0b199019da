// Must compile: the client infers the object type from a typed resource constant, and the
// client and the hierarchy functions take typed objects (interfaces without an index
// signature) wherever they take an object, outside handlers too. Checked by
// tests/typed_handlers_test.ts.
import { info, type KubeClient, type KubeObject, reconcile } from "../../mod.ts";
import { applyObject } from "../../client.ts";
import { postEvent } from "../../core/client/events.ts";
import { adopt, appendOwnerReference, harmonizeNaming, label } from "../../kits/hierarchies.ts";
import { type ConfigMap, ConfigMaps, Pods } from "../../kits/builtins.ts";
import { type KopfExample, KopfExamples } from "./_kopfexample.ts";

const text = (_: string | undefined) => {};
const nums = (_: number | undefined) => {};
const PODS = { group: "", version: "v1", plural: "pods", namespaced: true };

export async function uses(client: KubeClient): Promise<void> {
  // Typed by the constant: no type argument, no cast.
  const one = await client.api.get(KopfExamples, "x", { namespace: "default" });
  const typed: KopfExample = one;
  text(one.status?.message);
  nums(one.spec?.nested?.size);
  const { items } = await client.api.list(KopfExamples, { namespace: "default" });
  text(items[0]?.spec?.field);
  for await (const page of client.api.listPages(KopfExamples)) text(page.items[0]?.spec?.field);
  const made = await client.api.create(KopfExamples, {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: { name: "x" },
    spec: { field: "y", nested: { size: 1, color: "red" } },
  });
  text(made.spec?.field);
  const patched = await client.api.patch(KopfExamples, "x", { spec: { field: "z" } });
  text(patched.status?.message);
  const replaced = await client.api.replace(KopfExamples, "x", typed);
  text(replaced.spec?.nested?.color);
  // An explicit type argument takes a generated interface too (it has no index signature).
  const explicit = await client.api.get<KopfExample>(PODS, "x");
  text(explicit.spec?.field);
  // Untyped resources give untyped objects, as before.
  const untyped: KubeObject = await client.api.get(PODS, "p");
  const listed: KubeObject[] = (await client.api.list(PODS)).items;
  // Built-in kinds are full references too.
  const pod = await client.api.get(Pods, "p", { namespace: "default" });
  text(pod.spec?.containers[0]?.image);
  // Typed objects go where any object goes: the hierarchy functions, outside a handler.
  const child: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", data: { a: "b" } };
  adopt(child, one);
  adopt([child, pod], typed, { nested: "spec.template" });
  label(child, { app: "x" }, { owner: one });
  harmonizeNaming(child, undefined, { owner: one });
  appendOwnerReference(child, pod);
  const stored = await client.api.create(ConfigMaps, child);
  text(stored.data?.a);
  await client.api.create(PODS, pod);
  // Server-side apply returns the typed object; Events take typed objects.
  const applied = await client.api.get(KopfExamples, "x");
  const kept = await applyObject(client.api, KopfExamples, applied, { fieldManager: "me" });
  text(kept.spec?.field);
  info(one, { reason: "Seen" });
  info([one, pod], { reason: "Seen" });
  await postEvent(client.api, pod, { type: "Normal", reason: "Seen", message: "" });
  await client.api.create(PODS, { apiVersion: "v1", kind: "Pod", spec: { anything: 1 } });
  void [untyped, listed];
}

// Reconcilers too: typed by the constant, applying typed children, reading typed cached ones.
reconcile(KopfExamples, { owns: ["configmaps"] }, async (ctx) => {
  text(ctx.spec.field);
  const child: ConfigMap = { apiVersion: "v1", kind: "ConfigMap", data: { a: "b" } };
  adopt(child);
  await ctx.apply(child);
  text(ctx.cache.get<ConfigMap>("configmaps", "x")?.data?.a);
});
