import assert from "node:assert/strict";
import { type LogEntry, Logger } from "../../actions/loggers.ts";
import { parseSelector, type SelectorFields } from "../../intents/selectors.ts";
import type { Resource } from "../../structs/resources.ts";
import { ResourceResolver } from "./resolving.ts";

function resource(group: string, plural: string): Resource {
  return {
    group,
    version: "v1",
    plural,
    singular: plural.slice(0, -1),
    kind: plural,
    namespaced: true,
    verbs: ["list", "watch"],
    shortNames: [],
    categories: [],
    subresources: [],
    preferred: true,
  };
}

function resolver(selectors: SelectorFields[]) {
  const logs: LogEntry[] = [];
  const logger = new Logger(["kopf", "test"], { listeners: [(entry) => logs.push(entry)] });
  return {
    resolver: new ResourceResolver({ registry: { selectors: () => selectors }, logger }),
    logs,
  };
}

Deno.test("ResourceResolver: the served resources, with every selector naming each", () => {
  const kex = parseSelector("kopfexamples");
  const dotted = parseSelector("kopfexamples.kopf.dev");
  const { resolver: r, logs } = resolver([kex, dotted]);
  const served = r.resolve([resource("kopf.dev", "kopfexamples"), resource("", "pods")]);
  assert.deepEqual([...served.keys()], ["kopfexamples.v1.kopf.dev"]);
  assert.deepEqual(
    served.get("kopfexamples.v1.kopf.dev")!.selectors,
    new Set([JSON.stringify(kex), JSON.stringify(dotted)]),
  );
  assert.equal(logs.length, 0);
});

Deno.test("ResourceResolver: an unknown name is reported once, and again after it came and went", () => {
  const { resolver: r, logs } = resolver([parseSelector("nosuchthings")]);
  const none: Resource[] = [];
  assert.equal(r.resolve(none).size, 0);
  assert.equal(r.resolve(none).size, 0);
  assert.deepEqual(logs.map((e) => e.message), [
    'No resource matches name="nosuchthings": is its CRD installed? ' +
    "Its handlers will start when it appears",
  ]);
  assert.equal(r.resolve([resource("kopf.dev", "nosuchthings")]).size, 1);
  r.resolve(none);
  assert.equal(logs.length, 2);
});

Deno.test("ResourceResolver: an ambiguous name serves nothing and is reported once", () => {
  const { resolver: r, logs } = resolver([parseSelector("things")]);
  const both = [resource("a.example", "things"), resource("b.example", "things")];
  assert.equal(r.resolve(both).size, 0);
  assert.equal(r.resolve(both).size, 0);
  assert.equal(logs.length, 1);
  assert.match(
    logs[0]!.message,
    /^Ambiguous resource selector .* matches things\.v1\.a\.example, things\.v1\.b\.example; serving none of them: specify the group$/,
  );
});

Deno.test("ResourceResolver: a misspelled name is reported with the discovered name it likely means", () => {
  const { resolver: r, logs } = resolver([parseSelector("widgest"), parseSelector("foobars")]);
  r.resolve([resource("example.com", "widgets"), resource("", "pods")]);
  assert.deepEqual(logs.map((e) => e.message), [
    'No resource matches name="widgest" (did you mean "widgets"?): is its CRD installed? ' +
    "Its handlers will start when it appears",
    'No resource matches name="foobars": is its CRD installed? ' +
    "Its handlers will start when it appears",
  ]);
});
