import assert from "node:assert/strict";
import type { Resource } from "../../structs/resources.ts";
import { watchSelectors } from "./watch_selectors.ts";

const KEX: Resource = {
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  namespaced: true,
  verbs: [],
  shortNames: ["kex"],
  categories: [],
  subresources: [],
  preferred: true,
};

Deno.test("watchSelectors() joins every entry that selects the resource, in Kopf's and handlers' spellings (K26-14)", () => {
  const selectors = watchSelectors({
    labelSelectors: {
      "kopf.dev/kopfexamples": "team=a",
      "kopf.dev/v1/kopfexamples": "tier in (x,y)",
      "kex": "!legacy",
      "pods": "ignored=yes",
      "kopfexamples.v2.kopf.dev": "ignored=yes",
    },
    fieldSelectors: { "kopfexamples.kopf.dev": "metadata.name!=skip" },
  }, KEX);
  assert.deepEqual(selectors, {
    labelSelector: "team=a,tier in (x,y),!legacy",
    fieldSelector: "metadata.name!=skip",
  });
  assert.deepEqual(watchSelectors({ labelSelectors: {}, fieldSelectors: {} }, KEX), {});
});

Deno.test("watchSelectors() names the setting and the key that is not a resource (K26-14)", () => {
  assert.throws(
    () => watchSelectors({ labelSelectors: { "a/b/c/d": "x=y" }, fieldSelectors: {} }, KEX),
    /settings\.watching\.labelSelectors: the key "a\/b\/c\/d" does not name a resource/,
  );
});
