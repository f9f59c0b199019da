/**
 * Fixtures of the hierarchies kit's tests (`kits/hierarchies*_test.ts`): the parent object of
 * the examples in Kopf's docs and the owner reference to it.
 * @module
 */

import type { KubeObject } from "./hierarchies.ts";

/** The parent's uid. */
export const UID = "6b931859-5d50-4b5c-956b-ea2fed0d1058";

/** The parent of the examples in Kopf's docs. */
export function parent(): KubeObject {
  return {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: {
      name: "kopf-example-1",
      namespace: "default",
      uid: UID,
      labels: { somelabel: "somevalue" },
    },
    spec: { field: "value" },
  };
}

/** The controlling, blocking owner reference to {@link parent}. */
export const OWNER_REF = {
  controller: true,
  blockOwnerDeletion: true,
  apiVersion: "kopf.dev/v1",
  kind: "KopfExample",
  name: "kopf-example-1",
  uid: UID,
};
