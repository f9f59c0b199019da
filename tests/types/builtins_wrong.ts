// Misuses of the built-in kinds' types (tests/tooling_builtins_test.ts): each marked line must
// fail to compile, and no other.
import { on } from "../../mod.ts";
import { type ConfigMap, Deployments, type Pod, Pods } from "../../kits/builtins.ts";

on.create(Pods, function pods({ spec }) {
  return spec.containerz; // expected error
});

on.create(Deployments, function deployments({ spec }) {
  const replicas: string = spec.replicas ?? ""; // expected error
  return replicas;
});

export const pod: Pod = {
  kind: "Deployment", // expected error
  spec: { containers: [{ image: "busybox" }] }, // expected error
};
export const configMap: ConfigMap = { data: { key: 1 } }; // expected error
