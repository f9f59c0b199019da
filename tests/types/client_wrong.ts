// Must NOT compile: each line marked `expected error` is a misuse that the client's types catch.
// tests/typed_handlers_test.ts checks that `deno check` reports an error on every marked line.
import type { KubeClient } from "../../mod.ts";
import { ConfigMaps, Pods } from "../../kits/builtins.ts";
import { ClosedOnes, KopfExamples } from "./_kopfexample.ts";

const text = (_: string | undefined) => {};

export async function misuses(client: KubeClient): Promise<void> {
  const one = await client.api.get(KopfExamples, "x");
  text(one.spec?.feild); // expected error
  const count: number | undefined = one.status?.message; // expected error
  const { items } = await client.api.list(KopfExamples);
  text(items[0]?.spec?.nested?.size); // expected error
  await client.api.create(KopfExamples, { kind: "KopfExample", spec: { feild: "y" } }); // expected error
  await client.api.create(KopfExamples, { kind: "Other" }); // expected error
  await client.api.get(ClosedOnes, "x"); // expected error
  const pod = await client.api.get(Pods, "p");
  text(pod.spec?.containerz); // expected error
  await client.api.create(ConfigMaps, { kind: "ConfigMap", data: { a: 1 } }); // expected error
  void count;
}
