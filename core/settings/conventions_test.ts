import assert from "node:assert/strict";
import { Patch } from "../structs/patches.ts";
import { remove, resolve } from "../structs/dicts.ts";
import {
  AnnotationKeys,
  detectMarkedPrefixes,
  makeSafeKey,
  makeSuffix,
  markKey,
  removeAnnotations,
  removeEmptyStanzas,
  storeMarker,
  withoutOperatorAnnotations,
} from "./conventions.ts";
// Produced by real Python Kopf (kopf==1.45.2) with tests/compat/kopf_formats.py; see there.
import KOPF from "../../tests/compat/kopf_formats.json" with { type: "json" };

Deno.test("AnnotationKeys.make() produces Kopf's V2 and V1 keys for all recorded ids", () => {
  assert.ok(KOPF.keys.length >= 100);
  for (const { prefix, v1, key, keys } of KOPF.keys) {
    assert.deepEqual(new AnnotationKeys({ prefix, v1 }).make(key), keys, `${prefix} ${v1} ${key}`);
  }
});

Deno.test("AnnotationKeys.make() defaults to kopf.zalando.org with V1 keys", () => {
  const keys = new AnnotationKeys();
  assert.deepEqual(keys.make("create_fn"), ["kopf.zalando.org/create_fn"]);
  assert.deepEqual(keys.make("a".repeat(70)), [
    `kopf.zalando.org/${"a".repeat(56)}-DKa84Q`,
    `kopf.zalando.org/${"a".repeat(39)}-DKa84Q`,
  ]);
  assert.throws(() => new AnnotationKeys({ prefix: "" }), RangeError);
});

Deno.test("AnnotationKeys.make() marks keys of ReplicaSets owned by Deployments", () => {
  const keys = new AnnotationKeys();
  assert.deepEqual(keys.make("create_fn", KOPF.inputs.RS_BODY), KOPF.marked_keys);
  assert.equal(markKey("k", { kind: "ReplicaSet", metadata: {} }), "k");
  assert.equal(
    markKey("k", { kind: "Pod", metadata: { ownerReferences: [{ kind: "Deployment" }] } }),
    "k",
  );
});

Deno.test("makeSuffix() hashes like Kopf", () => {
  for (const [text, suffix] of Object.entries(KOPF.suffixes)) {
    assert.equal(makeSuffix(text), suffix, text);
  }
});

Deno.test("makeSafeKey() replaces slashes and angle brackets", () => {
  assert.equal(makeSafeKey("a/b<c>d"), "a.b_c_d");
});

Deno.test("detectMarkedPrefixes() finds Kopf's prefixes, subdomains and marked prefixes", () => {
  const found = detectMarkedPrefixes([
    "kopf.zalando.org/create_fn",
    "other.kopf.zalando.org/x",
    "notkopf.zalando.org/x",
    "example.com/kopf-managed",
    "example.com/last-handled-configuration",
    "unmarked.example.com/x",
    "no-prefix",
  ]);
  assert.deepEqual([...found].sort(), [
    "example.com",
    "kopf.zalando.org",
    "other.kopf.zalando.org",
  ]);
});

Deno.test("withoutOperatorAnnotations() drops operators' and ignored annotations, copying only when it must", () => {
  const users = { "example.com/owner": "team-a", "no-prefix": "x" };
  assert.equal(withoutOperatorAnnotations(users), users, "nothing to drop: the same object");
  const mixed = {
    ...users,
    "kopf.zalando.org/last-handled-configuration": '{"spec":{}}',
    "other.kopf.zalando.org/create_fn": "{}",
    "marked.example.com/kopf-managed": "yes",
    "marked.example.com/create_fn": "{}",
    "kubectl.kubernetes.io/last-applied-configuration": "{}",
  };
  const kept = withoutOperatorAnnotations(mixed);
  assert.deepEqual(kept, users);
  assert.notEqual(kept, mixed);
  assert.ok("kopf.zalando.org/last-handled-configuration" in mixed, "the input stays as it was");
  assert.equal(
    withoutOperatorAnnotations({ "kopf.zalando.org/touch-dummy": "x" }),
    undefined,
    "nothing left",
  );
  assert.equal(withoutOperatorAnnotations({}), undefined);
});

Deno.test("storeMarker() marks custom prefixes once and never Kopf's own", () => {
  const patch = new Patch();
  storeMarker("kopf.zalando.org", patch, {});
  storeMarker("kopf.example.com", patch, {});
  assert.equal(patch.isEmpty, true);
  storeMarker("example.com", patch, {});
  assert.deepEqual(patch.body, {
    metadata: { annotations: { "example.com/kopf-managed": "yes" } },
  });
  const marked = new Patch();
  storeMarker("example.com", marked, {
    metadata: { annotations: { "example.com/kopf-managed": "yes" } },
  });
  assert.equal(marked.isEmpty, true);
});

Deno.test("removeAnnotations() and removeEmptyStanzas() clean essences in place", () => {
  const essence: Record<string, unknown> = {
    spec: {},
    metadata: { annotations: { a: "1", b: "2" }, labels: {} },
    status: null,
  };
  removeAnnotations(essence, ["a", "absent"]);
  removeEmptyStanzas(essence);
  assert.deepEqual(essence, { spec: {}, metadata: { annotations: { b: "2" } } });
  removeAnnotations(essence, ["b"]);
  removeEmptyStanzas(essence);
  assert.deepEqual(essence, { spec: {} });
});

Deno.test("removeEmptyStanzas() does what removing each empty stanza by its path did, on every shape", () => {
  // The reference: each of the four stanzas, when present and empty (Python's falsiness),
  // removed by its dotted path — which also drops a parent left empty.
  const reference = (essence: Record<string, unknown>) => {
    for (const field of ["metadata.annotations", "metadata.labels", "metadata", "status"]) {
      const value = resolve(essence, field);
      if (value !== undefined && isFalsy(value)) remove(essence, field);
    }
  };
  const isFalsy = (v: unknown) =>
    v !== null && typeof v === "object" ? Object.keys(v).length === 0 : !v;
  const values = [undefined, null, {}, [], "", 0, false, "x", 1, [1], { k: "v" }];
  let shapes = 0;
  for (const annotations of values) {
    for (const labels of values) {
      for (const extra of [undefined, "kept"]) {
        for (const status of values) {
          const metadata: Record<string, unknown> = {};
          if (annotations !== undefined) metadata.annotations = annotations;
          if (labels !== undefined) metadata.labels = labels;
          if (extra !== undefined) metadata.name = extra;
          for (const meta of [metadata, "odd", 0]) {
            const essence = () => {
              const e: Record<string, unknown> = {
                spec: { a: 1 },
                metadata: structuredClone(meta),
              };
              if (status !== undefined) e.status = structuredClone(status);
              return e;
            };
            const expected = essence();
            reference(expected);
            const actual = essence();
            removeEmptyStanzas(actual);
            assert.deepEqual(actual, expected, JSON.stringify(essence()));
            shapes++;
          }
        }
      }
    }
  }
  assert.equal(shapes, 11 * 11 * 2 * 11 * 3);
});

Deno.test("AnnotationKeys.make() remembers formed keys without changing them (fast path)", () => {
  // One instance for all: the second round is served from its memory and must be identical
  // to what fresh instances form.
  const shared = new Map<string, AnnotationKeys>();
  for (let round = 0; round < 2; round++) {
    for (const { prefix, v1, key, keys } of KOPF.keys) {
      const id = `${prefix} ${v1}`;
      if (!shared.has(id)) shared.set(id, new AnnotationKeys({ prefix, v1 }));
      const made = shared.get(id)!.make(key);
      assert.deepEqual(made, keys, `${id} ${key} (round ${round})`);
      made.push("mutated"); // callers get their own array
    }
  }
  // Marked and unmarked forms of one key stay apart.
  const keys = new AnnotationKeys();
  for (let round = 0; round < 2; round++) {
    assert.deepEqual(keys.make("create_fn", KOPF.inputs.RS_BODY), KOPF.marked_keys);
    assert.deepEqual(keys.make("create_fn", { kind: "Pod" }), ["kopf.zalando.org/create_fn"]);
    assert.deepEqual(keys.make("create_fn"), ["kopf.zalando.org/create_fn"]);
  }
});
