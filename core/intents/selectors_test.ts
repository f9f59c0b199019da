import assert from "node:assert/strict";
import type { Resource } from "../structs/resources.ts";
import {
  describeSelector,
  EVERYTHING,
  isSpecific,
  matchesResource,
  parseSelector,
  resolveSelector,
} from "./selectors.ts";

function res(overrides: Partial<Resource> & Pick<Resource, "plural">): Resource {
  return {
    group: "",
    version: "v1",
    kind: overrides.plural,
    singular: overrides.plural.replace(/s$/, ""),
    namespaced: true,
    verbs: ["list", "watch", "patch"],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
    ...overrides,
  };
}

const KEX = res({
  group: "kopf.dev",
  version: "v1",
  plural: "kopfexamples",
  singular: "kopfexample",
  kind: "KopfExample",
  shortNames: ["kopfexes", "kopfex", "kexes", "kex"],
  categories: ["all"],
});
const KEX_V2 = { ...KEX, version: "v2", preferred: false };
const PODS = res({ plural: "pods", kind: "Pod", shortNames: ["po"], categories: ["all"] });
const METRIC_PODS = res({
  group: "metrics.k8s.io",
  version: "v1beta1",
  plural: "pods",
  kind: "PodMetrics",
  verbs: ["get", "list", "watch"],
});
const SECRETS = res({ plural: "secrets", kind: "Secret" });
const EVENTS = res({ plural: "events", kind: "Event" });
const EVENTS_K8S = res({ group: "events.k8s.io", plural: "events", kind: "Event" });
const DEPLOYMENTS = res({
  group: "apps",
  plural: "deployments",
  kind: "Deployment",
  shortNames: ["deploy"],
  categories: ["all"],
});
const BINDINGS = res({ plural: "bindings", kind: "Binding", verbs: ["create"] });
const WIDGETS_A = res({ group: "a.example.com", plural: "widgets", kind: "Widget" });
const WIDGETS_B = res({ group: "b.example.com", plural: "widgets", kind: "Widget" });

const ALL = [
  KEX,
  KEX_V2,
  PODS,
  METRIC_PODS,
  SECRETS,
  EVENTS,
  EVENTS_K8S,
  DEPLOYMENTS,
  BINDINGS,
  WIDGETS_A,
  WIDGETS_B,
];

// --- parseSelector -------------------------------------------------------------------------

Deno.test("parseSelector() takes a plain name as any name form without group/version (RSPEC-05)", () => {
  assert.deepEqual(parseSelector("kopfexamples"), { name: "kopfexamples" });
  assert.deepEqual(parseSelector("kex"), { name: "kex" });
});

Deno.test("parseSelector() reads the kubectl dotted form plural.group (RSPEC-03)", () => {
  assert.deepEqual(parseSelector("deployments.apps"), { name: "deployments", group: "apps" });
  assert.deepEqual(parseSelector("pods.metrics.k8s.io"), {
    name: "pods",
    group: "metrics.k8s.io",
  });
});

Deno.test("parseSelector() reads pods.v1 as the core group with version v1 (RSPEC-03, RSPEC-04)", () => {
  assert.deepEqual(parseSelector("pods.v1"), { name: "pods", version: "v1", group: "" });
});

Deno.test("parseSelector() reads plural.version.group (RSPEC-03)", () => {
  assert.deepEqual(parseSelector("kopfexamples.v1.kopf.dev"), {
    name: "kopfexamples",
    version: "v1",
    group: "kopf.dev",
  });
  assert.deepEqual(parseSelector("pods.v1beta1.metrics.k8s.io"), {
    name: "pods",
    version: "v1beta1",
    group: "metrics.k8s.io",
  });
});

Deno.test("parseSelector() does not mistake a version-like group label for a version (RSPEC-03)", () => {
  assert.deepEqual(parseSelector("things.v2ray.io"), { name: "things", group: "v2ray.io" });
});

Deno.test("parseSelector() takes a 2-part array as group and name (RSPEC-01, RSPEC-02)", () => {
  assert.deepEqual(parseSelector(["kopf.dev", "kopfexamples"]), {
    group: "kopf.dev",
    name: "kopfexamples",
  });
});

Deno.test("parseSelector() splits group/version in a 2-part array (RSPEC-01)", () => {
  assert.deepEqual(parseSelector(["kopf.dev/v1", "kopfexamples"]), {
    group: "kopf.dev",
    version: "v1",
    name: "kopfexamples",
  });
});

Deno.test("parseSelector() takes 'v1' alone as the core legacy group (RSPEC-04)", () => {
  assert.deepEqual(parseSelector(["v1", "pods"]), { group: "", version: "v1", name: "pods" });
  assert.deepEqual(parseSelector(["v1", "v1", "pods"]), {
    group: "",
    version: "v1",
    name: "pods",
  });
});

Deno.test("parseSelector() takes a 3-part array as group, version, name (RSPEC-01)", () => {
  assert.deepEqual(parseSelector(["kopf.dev", "v1", "kopfexamples"]), {
    group: "kopf.dev",
    version: "v1",
    name: "kopfexamples",
  });
  assert.deepEqual(parseSelector(["", "v1", "pods"]), { group: "", version: "v1", name: "pods" });
});

Deno.test("parseSelector() supports EVERYTHING alone and in group/version arrays (RSPEC-09)", () => {
  assert.deepEqual(parseSelector(EVERYTHING), { everything: true });
  assert.deepEqual(parseSelector([EVERYTHING]), { everything: true });
  assert.deepEqual(parseSelector(["apps", "v1", EVERYTHING]), {
    group: "apps",
    version: "v1",
    everything: true,
  });
  assert.deepEqual(parseSelector(["apps/v1", EVERYTHING]), {
    group: "apps",
    version: "v1",
    everything: true,
  });
  assert.deepEqual(parseSelector(["v1", EVERYTHING]), {
    group: "",
    version: "v1",
    everything: true,
  });
});

Deno.test("parseSelector() passes keyword selectors through (RSPEC-07)", () => {
  const fields = { group: "kopf.dev", kind: "KopfExample", category: "all" };
  assert.deepEqual(parseSelector(fields), fields);
});

Deno.test("parseSelector() rejects empty, slashed and over-long specs (RSPEC-01)", () => {
  assert.throws(() => parseSelector(""), TypeError);
  assert.throws(() => parseSelector("kopf.dev/v1"), TypeError);
  assert.throws(() => parseSelector([]), TypeError);
  assert.throws(() => parseSelector(["a", "b", "c", "d"]), TypeError);
});

// --- matchesResource -------------------------------------------------------------------------

Deno.test("matchesResource() matches a name against plural, singular, kind and short names (RSPEC-06)", () => {
  for (const name of ["kopfexamples", "kopfexample", "KopfExample", "kex", "kopfexes"]) {
    assert.equal(matchesResource({ name }, KEX), true, name);
  }
  assert.equal(matchesResource({ name: "kexx" }, KEX), false);
  assert.equal(matchesResource({ name: "pods" }, KEX), false);
});

Deno.test("matchesResource() without a version serves only preferred versions (RSPEC-05)", () => {
  assert.equal(matchesResource({ name: "kopfexamples" }, KEX), true);
  assert.equal(matchesResource({ name: "kopfexamples" }, KEX_V2), false);
  assert.equal(matchesResource({ name: "kopfexamples", version: "v2" }, KEX_V2), true);
  assert.equal(matchesResource({ name: "kopfexamples", version: "v2" }, KEX), false);
});

Deno.test("matchesResource() checks the group, including the empty core group (RSPEC-02, RSPEC-04)", () => {
  assert.equal(matchesResource({ group: "kopf.dev", name: "kex" }, KEX), true);
  assert.equal(matchesResource({ group: "other.dev", name: "kex" }, KEX), false);
  assert.equal(matchesResource({ group: "", name: "pods" }, PODS), true);
  assert.equal(matchesResource({ group: "", name: "pods" }, METRIC_PODS), false);
});

Deno.test("matchesResource() checks each keyword field exactly (RSPEC-07)", () => {
  assert.equal(matchesResource({ kind: "KopfExample" }, KEX), true);
  assert.equal(matchesResource({ kind: "kopfexample" }, KEX), false);
  assert.equal(matchesResource({ plural: "kopfexamples" }, KEX), true);
  assert.equal(matchesResource({ plural: "kopfexample" }, KEX), false);
  assert.equal(matchesResource({ singular: "kopfexample" }, KEX), true);
  assert.equal(matchesResource({ singular: "kopfexamples" }, KEX), false);
  assert.equal(matchesResource({ shortcut: "kex" }, KEX), true);
  assert.equal(matchesResource({ shortcut: "kopfexample" }, KEX), false);
});

Deno.test("matchesResource() with a category matches only resources declaring it (RSPEC-08)", () => {
  assert.equal(matchesResource({ category: "all" }, KEX), true);
  assert.equal(matchesResource({ category: "all" }, SECRETS), false);
});

Deno.test("matchesResource() with EVERYTHING excludes core and events.k8s.io events (RSPEC-10)", () => {
  assert.equal(matchesResource({ everything: true }, PODS), true);
  assert.equal(matchesResource({ everything: true }, EVENTS), false);
  assert.equal(matchesResource({ everything: true }, EVENTS_K8S), false);
  assert.equal(matchesResource({ name: "events" }, EVENTS), true);
  assert.equal(matchesResource({ group: "", version: "v1", name: "events" }, EVENTS), true);
});

// --- isSpecific / resolveSelector ------------------------------------------------------------

Deno.test("isSpecific() is true for names and false for categories and EVERYTHING (RSPEC-12)", () => {
  assert.equal(isSpecific({ name: "pods" }), true);
  assert.equal(isSpecific({ kind: "Pod" }), true);
  assert.equal(isSpecific({ shortcut: "po" }), true);
  assert.equal(isSpecific({ category: "all" }), false);
  assert.equal(isSpecific({ everything: true }), false);
  assert.equal(isSpecific({ group: "apps", everything: true }), false);
  assert.equal(isSpecific({ group: "apps" }), false);
});

Deno.test("resolveSelector() prefers core v1 over other groups (RSPEC-13)", () => {
  const resolution = resolveSelector(parseSelector("pods"), ALL);
  assert.deepEqual(resolution.resources, [PODS]);
  assert.equal(resolution.ambiguous, undefined);
});

Deno.test("resolveSelector() serves the named non-core group when it is given (RSPEC-03)", () => {
  const resolution = resolveSelector(parseSelector("pods.metrics.k8s.io"), ALL);
  assert.deepEqual(resolution.resources, [METRIC_PODS]);
});

Deno.test("resolveSelector() serves nothing when a name matches several non-core groups (RSPEC-12)", () => {
  const resolution = resolveSelector(parseSelector("widgets"), ALL);
  assert.deepEqual(resolution.resources, []);
  assert.deepEqual(resolution.ambiguous, [WIDGETS_A, WIDGETS_B]);
  const exact = resolveSelector(parseSelector("widgets.a.example.com"), ALL);
  assert.deepEqual(exact.resources, [WIDGETS_A]);
  assert.equal(exact.ambiguous, undefined);
});

Deno.test("resolveSelector() is not ambiguous for a specific name in one group (RSPEC-12)", () => {
  const resolution = resolveSelector(parseSelector("kex"), ALL);
  assert.deepEqual(resolution.resources, [KEX]);
  assert.equal(resolution.ambiguous, undefined);
});

Deno.test("resolveSelector() lets categories match many groups without ambiguity (RSPEC-08, RSPEC-12)", () => {
  const resolution = resolveSelector({ category: "all" }, ALL);
  assert.deepEqual(new Set(resolution.resources), new Set([KEX, PODS, DEPLOYMENTS]));
  assert.equal(resolution.ambiguous, undefined);
});

Deno.test("resolveSelector() with EVERYTHING serves all watchable resources but events (RSPEC-09, RSPEC-10)", () => {
  const resolution = resolveSelector(parseSelector(EVERYTHING), ALL);
  assert.deepEqual(
    new Set(resolution.resources),
    new Set([KEX, PODS, METRIC_PODS, SECRETS, DEPLOYMENTS, WIDGETS_A, WIDGETS_B]),
  );
  assert.equal(resolution.ambiguous, undefined);
});

Deno.test("resolveSelector() with EVERYTHING in a group/version serves only that group (RSPEC-09)", () => {
  const resolution = resolveSelector(parseSelector(["apps", "v1", EVERYTHING]), ALL);
  assert.deepEqual(resolution.resources, [DEPLOYMENTS]);
  const core = resolveSelector(parseSelector(["v1", EVERYTHING]), ALL);
  assert.deepEqual(new Set(core.resources), new Set([PODS, SECRETS]));
});

Deno.test("resolveSelector() serves core v1 events when named explicitly (RSPEC-10)", () => {
  assert.deepEqual(resolveSelector(parseSelector(["v1", "events"]), ALL).resources, [EVENTS]);
  // events.k8s.io also has "events", but core v1 wins for a group-less name.
  assert.deepEqual(resolveSelector(parseSelector("events"), ALL).resources, [EVENTS]);
});

Deno.test("resolveSelector() excludes resources that cannot be listed and watched (RSPEC-15)", () => {
  assert.deepEqual(resolveSelector(parseSelector("bindings"), ALL).resources, []);
  const everything = resolveSelector(parseSelector(EVERYTHING), ALL).resources;
  assert.equal(everything.includes(BINDINGS), false);
  const listOnly = res({ plural: "things", verbs: ["list"] });
  assert.deepEqual(resolveSelector({ name: "things" }, [listOnly]).resources, []);
});

Deno.test("describeSelector() names EVERYTHING and keyword fields (RSPEC-09)", () => {
  assert.equal(describeSelector({ everything: true }), "EVERYTHING");
  assert.equal(describeSelector({ everything: true, group: "" }), "EVERYTHING in v1");
  assert.equal(describeSelector({ everything: true, group: "apps" }), "EVERYTHING in apps");
  assert.equal(
    describeSelector({ group: "kopf.dev", name: "kex" }),
    'group="kopf.dev" name="kex"',
  );
});
