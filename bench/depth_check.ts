/**
 * The cost of refusing over-deep objects at the door (`settings.watching.maxDepth`): the depth
 * walk (`nestedDeeperThan`) that every listed or watched object now gets, beside what each
 * object already costs — parsing its line of the watch stream and building its essence (a
 * deep copy) in a processing cycle. Objects: a small one (a ConfigMap-like object with managed
 * fields), a large one (a Deployment-like object with a pod template, ~40 KB of JSON).
 *
 *   tools/deno.sh bench bench/depth_check.ts
 *
 * Figures are one run on this machine, not assertions (docs/reliability.md quotes them).
 * @module
 */
import { deepCopy, nestedDeeperThan } from "../core/structs/dicts.ts";

function managedFields(spec: unknown): unknown {
  const fields = (value: unknown): unknown => {
    if (typeof value !== "object" || value === null) return {};
    const out: Record<string, unknown> = { ".": {} };
    for (const [key, child] of Object.entries(value)) out[`f:${key}`] = fields(child);
    return out;
  };
  return [{
    manager: "kubectl",
    operation: "Update",
    fieldsType: "FieldsV1",
    fieldsV1: fields(spec),
  }];
}

const smallSpec = { data: { a: "1", b: "2", c: "three" } };
const small = {
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: {
    name: "small",
    namespace: "default",
    uid: "4f1c6c2e-0000-0000-0000-000000000000",
    resourceVersion: "12345",
    labels: { app: "demo" },
    annotations: { "example.com/owner": "team-a" },
    managedFields: managedFields(smallSpec),
  },
  ...smallSpec,
};

const container = (i: number) => ({
  name: `c${i}`,
  image: `registry.example.com/app:${i}`,
  args: ["--port", "8080", "--verbose"],
  env: Array.from({ length: 20 }, (_, j) => ({ name: `VAR_${j}`, value: `value-${j}` })),
  ports: [{ containerPort: 8080, protocol: "TCP" }],
  resources: { limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "100m", memory: "128Mi" } },
  livenessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 10 },
  volumeMounts: Array.from({ length: 5 }, (_, j) => ({ name: `v${j}`, mountPath: `/m/${j}` })),
});
const largeSpec = {
  spec: {
    replicas: 3,
    selector: { matchLabels: { app: "demo" } },
    template: {
      metadata: { labels: { app: "demo" } },
      spec: {
        containers: Array.from({ length: 6 }, (_, i) => container(i)),
        volumes: Array.from({ length: 5 }, (_, j) => ({ name: `v${j}`, emptyDir: {} })),
      },
    },
  },
  status: { replicas: 3, conditions: [{ type: "Available", status: "True" }] },
};
const large = {
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { ...small.metadata, name: "large", managedFields: managedFields(largeSpec) },
  ...largeSpec,
};

for (const [name, object] of [["small", small], ["large", large]] as const) {
  const line = JSON.stringify({ type: "MODIFIED", object });
  Deno.bench(`${name} (${line.length} B): parse the watch line`, { group: name }, () => {
    JSON.parse(line);
  });
  Deno.bench(`${name}: deep copy (an essence)`, { group: name, baseline: true }, () => {
    deepCopy(object);
  });
  Deno.bench(`${name}: depth check (maxDepth 1000)`, { group: name }, () => {
    nestedDeeperThan(object, 1000);
  });
}
