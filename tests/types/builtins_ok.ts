// Correct uses of the built-in kinds' types (tests/tooling_builtins_test.ts): must compile.
import { on } from "../../mod.ts";
import {
  type ConfigMap,
  ConfigMaps,
  type Deployment,
  Deployments,
  Jobs,
  Leases,
  type Pod,
  Pods,
  Secrets,
  Services,
} from "../../kits/builtins.ts";

on.create(Pods, function pods({ spec, status, logger }) {
  const images: string[] = spec.containers.map((c) => c.image ?? "");
  const phase: string | undefined = status.phase;
  logger.info(`${images.join(",")} ${phase}`);
});

on.field(Deployments, { field: "spec.replicas" }, function scaled({ spec, patch }) {
  const replicas: number | undefined = spec.replicas;
  const port: number | string | undefined = spec.strategy?.rollingUpdate?.maxSurge;
  patch.status.observedGeneration = replicas ?? 0;
  return String(port);
});

on.update(Services, function services({ spec }) {
  return spec.ports?.map((p) => p.port);
});

on.create(Jobs, function jobs({ spec, status }) {
  return [spec.template.spec?.restartPolicy, status.succeeded];
});

on.create(Leases, function leases({ spec }) {
  return spec.holderIdentity;
});

on.event(ConfigMaps, function configmaps({ body }) {
  const data: Record<string, string> | undefined = body.data;
  return data;
});

on.event(Secrets, function secrets({ body }) {
  return body.type;
});

export const pod: Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", labels: { a: "b" } },
  spec: { containers: [{ name: "c", image: "busybox", ports: [{ containerPort: 80 }] }] },
};
export const configMap: ConfigMap = { metadata: { name: "c" }, data: { key: "value" } };
export const deployment: Deployment = {
  spec: {
    selector: { matchLabels: { app: "x" } },
    template: { metadata: { labels: { app: "x" } }, spec: { containers: [{ name: "x" }] } },
  },
};
