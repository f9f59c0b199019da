import assert from "node:assert/strict";
import { classify, RequestCounters } from "./counters.ts";

Deno.test("classify() names verbs and resources like the API server's authorizer", () => {
  const q = (s: string) => new URLSearchParams(s);
  assert.deepEqual(classify("GET", "/api/v1/namespaces/ns/pods"), {
    verb: "list",
    resource: "pods",
  });
  assert.deepEqual(classify("GET", "/api/v1/namespaces/ns/pods", q("watch=true")), {
    verb: "watch",
    resource: "pods",
  });
  assert.deepEqual(classify("GET", "/api/v1/namespaces/ns/pods/p"), {
    verb: "get",
    resource: "pods",
  });
  assert.deepEqual(classify("GET", "/api/v1/namespaces"), { verb: "list", resource: "namespaces" });
  assert.deepEqual(classify("GET", "/api/v1/namespaces/ns"), {
    verb: "get",
    resource: "namespaces",
  });
  assert.deepEqual(classify("PATCH", "/apis/kopf.dev/v1/namespaces/ns/kopfexamples/x/status"), {
    verb: "patch",
    resource: "kopfexamples/status",
  });
  assert.deepEqual(classify("PATCH", "/apis/kopf.dev/v1/clusterkopfpeerings/x"), {
    verb: "patch",
    resource: "clusterkopfpeerings",
  });
  assert.deepEqual(classify("POST", "/api/v1/namespaces/ns/events"), {
    verb: "create",
    resource: "events",
  });
  assert.deepEqual(classify("DELETE", "/api/v1/namespaces/ns/pods"), {
    verb: "deletecollection",
    resource: "pods",
  });
  assert.deepEqual(classify("GET", "/apis"), { verb: "discovery", resource: "/apis" });
  assert.deepEqual(classify("GET", "/apis/kopf.dev/v1"), {
    verb: "discovery",
    resource: "/apis/kopf.dev/v1",
  });
});

Deno.test("RequestCounters counts, filters and diffs", () => {
  const c = new RequestCounters();
  c.record({ verb: "patch", resource: "kopfexamples", code: 200 });
  c.record({ verb: "patch", resource: "kopfexamples", code: 200 });
  const before = c.snapshot();
  c.record({ verb: "create", resource: "events", code: 201 });
  c.record({ verb: "list", resource: "kopfexamples", code: 200 });
  assert.equal(c.count(), 4);
  assert.equal(c.writes(), 3);
  assert.equal(c.writes({ resource: "kopfexamples" }), 2);
  assert.equal(c.count({ code: 201 }), 1);
  const after = c.since(before);
  assert.equal(after.count(), 2);
  assert.equal(after.writes({ resource: "kopfexamples" }), 0);
  c.reset();
  assert.equal(c.count(), 0);
});
