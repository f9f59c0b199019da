import assert from "node:assert/strict";
import { cherrypick, deepCopy, isMapping, parseField, remove, resolve } from "../structs/dicts.ts";
import { diff } from "../structs/diffs.ts";
import { Patch } from "../structs/patches.ts";
import { dumpCompact } from "./_pyjson.ts";
import {
  detectMarkedPrefixes,
  IGNORED_ANNOTATIONS,
  removeAnnotations,
  removeEmptyStanzas,
} from "./conventions.ts";
import {
  AnnotationsDiffBaseStorage,
  type DiffBaseStorage,
  MultiDiffBaseStorage,
  StatusDiffBaseStorage,
} from "./diffbase.ts";
// Produced by real Python Kopf (kopf==1.45.2) with tests/compat/kopf_formats.py: the same
// storage calls on the same inputs, the resulting essences/patches dumped as JSON.
import KOPF from "../../tests/compat/kopf_formats.json" with { type: "json" };

const { RICH_BODY, MINIMAL_BODY, STORED_BODY } = KOPF.inputs;
const EXPECTED = KOPF.diffbase;
const LHC = "kopf.zalando.org/last-handled-configuration";

/** Same content and same key order (the order decides the stored string). */
function assertSameEssence(actual: unknown, expected: unknown): void {
  assert.deepEqual(actual, expected);
  assert.equal(dumpCompact(actual), dumpCompact(expected));
}

function patchOf(fn: (patch: Patch) => void): unknown {
  const patch = new Patch();
  fn(patch);
  return patch.toJSON();
}

const dflt = new AnnotationsDiffBaseStorage();
const statusDb = new StatusDiffBaseStorage();
const multi = new MultiDiffBaseStorage([dflt, statusDb]);

Deno.test("DiffBaseStorage.build() computes Kopf's essence exactly, key order included", () => {
  const extra = ["status.field", "metadata.name", "spec.absent", "status.absent.x"];
  assertSameEssence(dflt.build({ body: RICH_BODY }), EXPECTED.build);
  assertSameEssence(dflt.build({ body: RICH_BODY, extraFields: extra }), EXPECTED.build_extra);
  assertSameEssence(dflt.build({ body: MINIMAL_BODY }), EXPECTED.build_minimal);
  const ignoring = new AnnotationsDiffBaseStorage({
    ignoredFields: ["spec.nested", "spec.absent.x"],
  });
  assertSameEssence(ignoring.build({ body: RICH_BODY }), EXPECTED.build_ignored);
  const custom = new AnnotationsDiffBaseStorage({
    prefix: "example.com",
    key: "diff-base",
    v1: false,
  });
  assertSameEssence(custom.build({ body: RICH_BODY }), EXPECTED.build_custom);
  assertSameEssence(
    statusDb.build({ body: RICH_BODY, extraFields: ["status.kopf", "status.field"] }),
    EXPECTED.build_status,
  );
  assertSameEssence(
    multi.build({ body: RICH_BODY, extraFields: ["status.field"] }),
    EXPECTED.build_multi,
  );
});

Deno.test("DiffBaseStorage.build() shares nothing with the body", () => {
  const body = structuredClone(RICH_BODY);
  const essence = dflt.build({ body }) as { spec: { items: string[] } };
  essence.spec.items.push("x");
  assert.deepEqual(body, RICH_BODY);
});

Deno.test("AnnotationsDiffBaseStorage.store() writes the same string as Python Kopf", () => {
  const store = (
    storage: DiffBaseStorage,
    body: Record<string, unknown>,
    essence = storage.build({ body }),
  ) => patchOf((patch) => storage.store({ body, patch, essence }));
  assert.deepEqual(store(dflt, RICH_BODY), EXPECTED.store);
  assert.deepEqual(
    store(dflt, RICH_BODY, dflt.build({ body: RICH_BODY, extraFields: ["status.field"] })),
    EXPECTED.store_extra,
  );
  assert.deepEqual(store(dflt, {}, dflt.build({ body: MINIMAL_BODY })), EXPECTED.store_minimal);
  const custom = new AnnotationsDiffBaseStorage({
    prefix: "example.com",
    key: "diff-base",
    v1: false,
  });
  assert.deepEqual(store(custom, RICH_BODY), EXPECTED.store_custom);
  const long = new AnnotationsDiffBaseStorage({ key: "k".repeat(70) });
  assert.deepEqual(store(long, {}, { spec: { a: 1 } }), EXPECTED.store_long_key);
  assert.deepEqual(store(statusDb, RICH_BODY), EXPECTED.store_status);
  assert.deepEqual(store(multi, RICH_BODY), EXPECTED.store_multi);
});

Deno.test("the default diff-base annotation is compact JSON with a trailing newline", () => {
  const body = {
    apiVersion: "v1",
    kind: "X",
    metadata: { name: "n", labels: { a: "b" } },
    spec: { size: 1 },
  };
  const patch = new Patch();
  dflt.store({ body, patch, essence: dflt.build({ body }) });
  assert.equal(patch.annotations[LHC], '{"spec":{"size":1},"metadata":{"labels":{"a":"b"}}}\n');
});

Deno.test("fetch() reads what Kopf stored, in storage order for Multi", () => {
  assert.deepEqual(dflt.fetch({ body: STORED_BODY }), EXPECTED.fetch);
  assert.deepEqual(statusDb.fetch({ body: STORED_BODY }), EXPECTED.fetch_status);
  assert.deepEqual(multi.fetch({ body: STORED_BODY }), EXPECTED.fetch_multi);
  assert.equal(dflt.fetch({ body: {} }), EXPECTED.fetch_absent);
  assert.equal(
    statusDb.fetch({ body: { status: { kopf: { "last-handled-configuration": 1 } } } }),
    null,
  );
});

Deno.test("mayHold() is false only where fetch() finds no essence, for every storage", () => {
  const plainKey = "kopf.zalando.org/last-handled-configuration";
  const field = ["status", "kopf", "last-handled-configuration"];
  const bodies: Record<string, Record<string, unknown>> = {
    "nothing": {},
    "stored by Kopf": STORED_BODY,
    "an annotation that is not a mapping": { metadata: { annotations: { [plainKey]: "[1]" } } },
    "a status field that is not a string": {
      status: { kopf: { "last-handled-configuration": 1 } },
    },
    "only in status (overflow)": { status: { kopf: { "last-handled-configuration": "{}" } } },
  };
  // A storage that keeps the default: it asks fetch().
  class Custom extends StatusDiffBaseStorage {}
  const storages = { dflt, statusDb, multi, custom: new Custom() };
  for (const [name, storage] of Object.entries(storages)) {
    for (const [state, body] of Object.entries(bodies)) {
      const fetched = storage.fetch({ body });
      const may = storage.mayHold({ body });
      assert.ok(may || fetched === null, `${name}, ${state}: mayHold false but fetched`);
    }
    assert.equal(storage.mayHold({ body: {} }), false, `${name}: nothing stored`);
    assert.equal(storage.mayHold({ body: STORED_BODY }), true, `${name}: stored by Kopf`);
  }
  assert.equal(resolve(bodies["only in status (overflow)"], field), "{}");
  assert.equal(dflt.mayHold({ body: bodies["only in status (overflow)"]! }), true, "overflow");
});

Deno.test("an object stored by Python Kopf shows no diff to us, and ours shows none either", () => {
  const stored = {
    ...RICH_BODY,
    metadata: {
      ...RICH_BODY.metadata,
      annotations: { ...RICH_BODY.metadata.annotations, ...EXPECTED.store.metadata.annotations },
    },
  };
  assert.deepEqual(diff(dflt.fetch({ body: stored }), dflt.build({ body: stored })), []);

  const patch = new Patch();
  dflt.store({ body: RICH_BODY, patch, essence: dflt.build({ body: RICH_BODY }) });
  const ours = {
    ...RICH_BODY,
    metadata: {
      ...RICH_BODY.metadata,
      annotations: { ...RICH_BODY.metadata.annotations, ...patch.annotations },
    },
  };
  assert.deepEqual(diff(dflt.fetch({ body: ours }), dflt.build({ body: ours })), []);
});

Deno.test("Kopf-marked annotations of other operators never enter the essence", () => {
  const body = {
    metadata: {
      annotations: {
        "op-b.example.com/kopf-managed": "yes",
        "op-b.example.com/create_fn": "{}",
        "sub.kopf.zalando.org/x": "1",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
        "keep.example.com/x": "1",
      },
    },
  };
  assert.deepEqual(dflt.build({ body }), {
    metadata: { annotations: { "keep.example.com/x": "1" } },
  });
});

Deno.test("DiffBaseStorage.build() agrees with copying the whole body first (fast path)", () => {
  // The former implementation of the annotations storage's build(), step by step: a deep copy
  // of the whole body, the top-level deletions, then the same clean-ups.
  const reference = (
    storage: AnnotationsDiffBaseStorage,
    body: Record<string, unknown>,
    extra: string[][],
  ) => {
    const essence = deepCopy({ ...body });
    for (const key of ["apiVersion", "kind", "metadata", "status"]) delete essence[key];
    cherrypick(body, essence, ["metadata.labels", "metadata.annotations"]);
    const annotations = resolve(essence, "metadata.annotations");
    if (isMapping(annotations)) {
      const foreign = detectMarkedPrefixes(Object.keys(annotations));
      for (const key of Object.keys(annotations)) {
        const prefix = key.includes("/") ? key.slice(0, key.indexOf("/")) : null;
        if ((prefix !== null && foreign.has(prefix)) || IGNORED_ANNOTATIONS.includes(key)) {
          delete annotations[key];
        }
      }
    }
    cherrypick(body, essence, extra);
    removeEmptyStanzas(essence);
    for (const field of storage.ignoredFields) {
      if (parseField(field).length) remove(essence, field);
    }
    removeAnnotations(essence, storage.keys.make(storage.key, body));
    removeEmptyStanzas(essence);
    return essence;
  };
  const bodies: Record<string, unknown>[] = [
    RICH_BODY,
    MINIMAL_BODY,
    STORED_BODY,
    {},
    { kind: "X", spec: null, data: { a: [1, { b: 2 }] }, status: { phase: "Running" } },
    JSON.parse('{"__proto__":{"x":1},"metadata":{"labels":{},"annotations":{}},"spec":{}}'),
    { metadata: { annotations: { "other.kopf.zalando.org/x": "1", "a/b": "c" } }, z: 1, a: 2 },
  ];
  const extras = [[], [["status", "phase"]], [["metadata", "labels"]]];
  const storages = [dflt, new AnnotationsDiffBaseStorage({ ignoredFields: ["spec.a", "z"] })];
  for (const storage of storages) {
    for (const body of bodies) {
      for (const extra of extras) {
        const actual = storage.build({ body, extraFields: extra });
        assertSameEssence(actual, reference(storage, body, extra));
        assert.equal(Object.getPrototypeOf(actual), Object.prototype);
      }
    }
  }
});

Deno.test("AnnotationsDiffBaseStorage keeps an essence that would overflow the annotations in status", () => {
  const storage = new AnnotationsDiffBaseStorage();
  const KEY = "kopf.zalando.org/last-handled-configuration";
  const FIELD = ["status", "kopf", "last-handled-configuration"];
  const big = { blob: "x".repeat(140_000) };
  const body = {
    metadata: {
      name: "big",
      annotations: {
        "kubectl.kubernetes.io/last-applied-configuration": JSON.stringify(big),
        [KEY]: '{"spec":{"old":1}}\n', // an earlier, small essence: must not stay behind
      },
    },
    spec: big,
  };
  const warnings: string[] = [];
  const patch = new Patch();
  const essence = storage.build({ body });
  storage.store({ body, patch, essence, warn: (m) => warnings.push(m) });
  assert.equal(resolve(patch.body, ["metadata", "annotations", KEY]), null);
  assert.equal(resolve(patch.body, FIELD), dumpCompact(essence));
  assert.match(warnings[0]!, /over the API server's limit of 262144 bytes/);
  // Read back from the status once the annotation is gone.
  const stored = { ...body, metadata: { name: "big" }, status: { kopf: {} } };
  (stored.status.kopf as Record<string, unknown>)["last-handled-configuration"] = dumpCompact(
    essence,
  );
  assert.deepEqual(storage.fetch({ body: stored }), essence);

  // Small again: back to the annotation, and the status copy is removed.
  const small = { ...stored, spec: { size: 1 } };
  const back = new Patch();
  storage.store({ body: small, patch: back, essence: storage.build({ body: small }) });
  assert.equal(resolve(back.body, ["metadata", "annotations", KEY]), '{"spec":{"size":1}}\n');
  assert.equal(resolve(back.body, FIELD), null);

  // Ordinary objects: the annotation only, no warning, nothing in status.
  const plain = new Patch();
  const quiet: string[] = [];
  const tiny = { metadata: { name: "t" }, spec: { a: 1 } };
  storage.store({
    body: tiny,
    patch: plain,
    essence: storage.build({ body: tiny }),
    warn: (m) => quiet.push(m),
  });
  assert.equal(resolve(plain.body, FIELD), undefined);
  assert.deepEqual(quiet, []);
  // Without an overflow storage the annotation is written whatever its size (as Kopf).
  const strict = new AnnotationsDiffBaseStorage({ overflow: null });
  const doomed = new Patch();
  strict.store({ body, patch: doomed, essence });
  assert.equal(typeof resolve(doomed.body, ["metadata", "annotations", KEY]), "string");
});

Deno.test("MultiDiffBaseStorage.build() gives what building with each storage in turn gives, without rebuilding", () => {
  const a = new AnnotationsDiffBaseStorage({ ignoredFields: ["spec.x.y"] });
  const b = new StatusDiffBaseStorage({ ignoredFields: ["spec.z"] });
  const body = {
    apiVersion: "v1",
    kind: "K",
    metadata: { name: "n", labels: { l: "1" }, annotations: { [LHC]: "{}", keep: "me" } },
    spec: { x: { y: 1 }, z: 2, w: { v: [] }, keep: true },
    status: { field: 1 },
  };
  const extraFields = [["status", "field"]];
  // Kopf's definition: the common essence, then every storage's build over the previous result.
  const chained = [a, b].reduce(
    (essence, storage) => storage.build({ body: essence, extraFields }),
    new AnnotationsDiffBaseStorage().build({ body, extraFields }),
  );
  const combined = new MultiDiffBaseStorage([a, b]).build({ body, extraFields });
  assertSameEssence(combined, chained);
  // spec.x emptied by the first storage's ignored field is dropped before the second one's.
  assert.equal(resolve(combined, "spec.x"), undefined);
  assert.equal(resolve(combined, "spec.z"), undefined);
});

Deno.test("quickSameEssence() says true only where the built essences are equal, without building", () => {
  const base = {
    apiVersion: "kopf.dev/v1",
    kind: "KopfExample",
    metadata: {
      name: "n",
      generation: 3,
      labels: { app: "x" },
      annotations: { note: "a", [LHC]: '{"spec":{}}' },
    },
    spec: { size: 1 },
    status: { create_fn: { done: true } },
  };
  const variant = (change: (body: typeof base) => void) => {
    const body = deepCopy(base) as typeof base;
    change(body);
    return body;
  };
  const cases: [string, typeof base, boolean][] = [
    [
      "only status and Kopf's own annotations differ",
      variant((b) => {
        b.status = { create_fn: { done: false } };
        b.metadata.annotations[LHC] = '{"spec":{"size":1}}';
        (b.metadata.annotations as Record<string, string>)[
          "kubectl.kubernetes.io/last-applied-configuration"
        ] = "{}";
      }),
      true,
    ],
    ["a label differs", variant((b) => (b.metadata.labels.app = "y")), false],
    ["a user's annotation differs", variant((b) => (b.metadata.annotations.note = "b")), false],
    [
      "the generation differs with the spec (any CRD)",
      variant((b) => (b.metadata.generation = 4, b.spec.size = 2)),
      false,
    ],
    [
      "the generation differs, the spec does not (status of a CRD without the subresource)",
      variant((b) => (b.metadata.generation = 4, b.status = { create_fn: { done: false } })),
      true,
    ],
    [
      "a new top-level field, the generation differing",
      variant((b) => (b.metadata.generation = 4, Object.assign(b, { data: { a: 1 } }))),
      false,
    ],
  ];
  for (const storage of [dflt, multi, new AnnotationsDiffBaseStorage({ prefix: "my.op" })]) {
    for (const [what, other, quick] of cases) {
      assert.equal(storage.quickSameEssence(base, other), quick, what);
      if (quick) {
        assert.deepEqual(storage.build({ body: other }), storage.build({ body: base }), what);
      }
    }
    // Without a generation the fields are compared; with extra fields nothing is told cheaply.
    const noGeneration = variant((b) => delete (b.metadata as { generation?: number }).generation);
    assert.equal(storage.quickSameEssence(noGeneration, deepCopy(noGeneration)), true);
    const changed = variant((
      b,
    ) => (delete (b.metadata as { generation?: number }).generation, b.spec.size = 5));
    assert.equal(storage.quickSameEssence(noGeneration, changed), false);
    assert.equal(storage.quickSameEssence(base, base, ["status.create_fn"]), false);
  }
  // A storage that builds essences its own way is never answered cheaply.
  class Custom extends AnnotationsDiffBaseStorage {
    override build(args: { body: Record<string, unknown> }) {
      return super.build(args);
    }
  }
  assert.equal(new Custom().quickSameEssence(base, base), false);
  assert.equal(new MultiDiffBaseStorage([new Custom()]).quickSameEssence(base, base), false);
});
