// Hand-written stand-in for what `kopf generate types crds/example.yaml` emits (the generator's
// own output is checked by tests/tooling_types_test.ts).
import { type TypedObject, typedResource } from "../../mod.ts";

export interface KopfExampleSpec {
  field?: string;
  items?: string[];
  duration?: number | string;
  nested?: {
    size: number;
    color?: "red" | "blue";
  };
}

export interface KopfExampleStatus {
  message?: string;
  [k: string]: unknown;
}

export interface ClosedStatus {
  message?: string;
  count?: number;
}

export interface KopfExample extends TypedObject<KopfExampleSpec, KopfExampleStatus> {
  apiVersion?: "kopf.dev/v1";
  kind?: "KopfExample";
}

export interface Closed extends TypedObject<KopfExampleSpec, ClosedStatus> {}

// The full form, as generated: handlers and the client take it.
export const KopfExamples = typedResource<KopfExample>({
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  kind: "KopfExample",
  namespaced: true,
});
// The short form: for handlers only.
export const ClosedOnes = typedResource<Closed>("kopf.dev", "v1", "kopfexamples");
