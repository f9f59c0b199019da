/**
 * The reconcile benchmark's operator (bench/reconcile.ts): every KopfExample owns one ConfigMap,
 * kept by `on.reconcile` with server-side apply. Nothing is written to the parent.
 * @module
 */
import { on } from "../../mod.ts";

on.startup(function quiet({ settings }) {
  settings.posting.enabled = false;
});

on.reconcile(
  "kopfexamples",
  { owns: ["configmaps"], concurrency: 16 },
  async function child({ name, uid, apply }) {
    await apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: `${name}-child`,
        labels: { bench: "child" },
        ownerReferences: [{
          apiVersion: "kopf.dev/v1",
          kind: "KopfExample",
          name,
          uid,
          controller: true,
        }],
      },
      data: { parent: name },
    });
  },
);
