/**
 * Registration mistakes fail at the registration (at import), for every `on.*` function: unknown
 * option names (with the likely meant one), non-function handlers, options that are not an
 * object, a missing resource, and Kopf's positional `group, version, plural`.
 */

import assert from "node:assert/strict";
import { getDefaultRegistry, OperatorRegistry, setDefaultRegistry } from "../intents/registries.ts";
import { on } from "./on.ts";

type Registrar = (...args: unknown[]) => unknown;

/** Every registration function with a resource, and the options a valid call needs. */
const RESOURCE_FNS: Array<[string, Record<string, unknown>]> = [
  ["create", {}],
  ["update", {}],
  ["delete", {}],
  ["resume", {}],
  ["field", { field: "spec.size" }],
  ["event", {}],
  ["validate", {}],
  ["mutate", {}],
  ["daemon", {}],
  ["timer", {}],
  ["index", {}],
  ["reconcile", {}],
];
const ACTIVITY_FNS = ["startup", "cleanup", "login", "probe"];

function registrar(name: string): Registrar {
  return (on as unknown as Record<string, Registrar>)[name]!;
}

function throwsMessage(call: () => unknown): string {
  try {
    call();
  } catch (error) {
    assert.ok(error instanceof TypeError, `a TypeError, got ${error}`);
    return error.message;
  }
  assert.fail("did not throw");
}

Deno.test("every on.* rejects an unknown option, naming the likely meant one", () => {
  for (const [name, required] of RESOURCE_FNS) {
    const registry = new OperatorRegistry();
    const message = throwsMessage(() =>
      registrar(name)("kopfexamples", { ...required, registry, feild: "spec.size" }, () => {})
    );
    assert.match(message, new RegExp(`^on\\.${name}\\(\\): unknown option \`feild\``), name);
    assert.match(message, /\(did you mean `field`\?\)/, name);
  }
  for (const name of ACTIVITY_FNS) {
    const registry = new OperatorRegistry();
    const message = throwsMessage(() => registrar(name)({ registry, retires: 3 }, () => {}));
    assert.match(message, new RegExp(`^on\\.${name}\\(\\): unknown option \`retires\``), name);
    assert.match(message, /did you mean `retries`/, name);
  }
});

Deno.test("Kopf's snake_case option names suggest their camelCase spelling", () => {
  const registry = new OperatorRegistry();
  assert.match(
    throwsMessage(() =>
      on.daemon("kopfexamples", { registry, cancellation_timeout: 5 } as never, () => {})
    ),
    /unknown option `cancellation_timeout` \(did you mean `cancellationTimeout`\?\)/,
  );
  assert.match(
    throwsMessage(() =>
      on.validate("kopfexamples", { registry, side_effects: true } as never, () => {})
    ),
    /did you mean `sideEffects`/,
  );
  // Far from every known name: no suggestion, but the list of accepted ones.
  const message = throwsMessage(() =>
    on.create("kopfexamples", { registry, colour: "red" } as never, () => {})
  );
  assert.doesNotMatch(message, /did you mean/);
  assert.match(message, /it accepts id, registry, param, labels, annotations, when, field/);
});

Deno.test("an option of another kind of handler is refused (old/new are update/field options)", () => {
  const registry = new OperatorRegistry();
  assert.match(
    throwsMessage(() =>
      on.create("kopfexamples", { registry, field: "spec.a", new: 1 } as never, () => {})
    ),
    /^on\.create\(\): unknown option `new`/,
  );
  assert.match(
    throwsMessage(() => on.timer("kopfexamples", { registry, optional: true } as never, () => {})),
    /^on\.timer\(\): unknown option `optional`/,
  );
});

Deno.test("every on.* rejects a handler that is not a function, and options that are not an object", () => {
  for (const [name, required] of RESOURCE_FNS) {
    const registry = new OperatorRegistry();
    assert.match(
      throwsMessage(() => registrar(name)("kopfexamples", { ...required, registry }, "fn")),
      new RegExp(`^on\\.${name}\\(\\): the handler must be a function, got the string "fn"`),
    );
    assert.match(
      throwsMessage(() => registrar(name)("kopfexamples", ["field"], () => {})),
      new RegExp(`^on\\.${name}\\(\\): the options must be an object, got an array`),
    );
    assert.match(
      throwsMessage(() => registrar(name)("kopfexamples", { ...required, registry })),
      new RegExp(
        `^on\\.${name}\\(\\)(: the handler must be a function, got undefined| needs a handler function after the options)$`,
      ),
    );
  }
  for (const name of ACTIVITY_FNS) {
    assert.match(
      throwsMessage(() => registrar(name)({ registry: new OperatorRegistry() }, 42)),
      new RegExp(`^on\\.${name}\\(\\): the handler must be a function, got number 42`),
    );
  }
});

Deno.test("a handler given without its resource is refused with the line to write", () => {
  assert.equal(
    throwsMessage(() => registrar("create")(function create_fn() {})),
    'on.create() needs the resource first, e.g. on.create("kopfexamples", create_fn); ' +
      "got the function create_fn",
  );
});

Deno.test("Kopf's positional group, version, plural is refused with the two lines that work", () => {
  for (const [name] of RESOURCE_FNS) {
    const message = throwsMessage(() =>
      registrar(name)("example.com", "v1", "widgets", function create_fn() {})
    );
    assert.equal(
      message,
      `on.${name}("example.com", "v1", "widgets", …): Kopf's positional group, version, ` +
        `plural are not accepted (the handler would be lost); write ` +
        `on.${name}("widgets.v1.example.com", create_fn) or ` +
        `on.${name}({ group: "example.com", version: "v1", plural: "widgets" }, create_fn)`,
    );
  }
  assert.match(
    throwsMessage(() =>
      registrar("update")("kopf.dev", "kopfexamples", { field: "spec.a" }, function upd() {})
    ),
    /write on\.update\("kopfexamples\.kopf\.dev", \{ field: "spec\.a" \}, upd\) or on\.update\(\{ group: "kopf\.dev", plural: "kopfexamples" \}, \{ field: "spec\.a" \}, upd\)$/,
  );
  assert.match(
    throwsMessage(() => registrar("create")("v1", "pods", () => {})),
    /write on\.create\("pods\.v1", fn\) or on\.create\(\{ group: "", version: "v1", plural: "pods" \}, fn\)$/,
  );
});

Deno.test("the suggested spellings of a positional resource register as the intended resource", () => {
  const registry = new OperatorRegistry();
  on.create("widgets.v1.example.com", { registry }, function a() {});
  on.create(
    { group: "example.com", version: "v1", plural: "widgets" },
    { registry },
    function b() {},
  );
  const [first, second] = registry.registrations.map((r) => r.selector);
  assert.deepEqual(first, { name: "widgets", version: "v1", group: "example.com" });
  assert.deepEqual(second, { group: "example.com", version: "v1", plural: "widgets" });
});

Deno.test("valid registrations still register, with every accepted option of each kind", () => {
  const registry = new OperatorRegistry();
  const common = { registry, param: 1, labels: { a: "b" }, annotations: {}, when: () => true };
  const retried = { errors: "permanent" as const, timeout: 1, retries: 1, backoff: 1 };
  on.create(
    "kopfexamples",
    { ...common, ...retried, id: "c", field: "spec.a", value: 1 },
    () => {},
  );
  on.update("kopfexamples", { ...common, id: "u", field: "spec.a", old: 1, new: 2 }, () => {});
  on.delete("kopfexamples", { ...common, id: "d", optional: true }, () => {});
  on.resume("kopfexamples", { ...common, id: "r", deleted: true }, () => {});
  on.field("kopfexamples", { ...common, id: "f", field: "spec.a" }, () => {});
  on.event("kopfexamples", { ...common, id: "e" }, () => {});
  on.validate("kopfexamples", {
    ...common,
    id: "v",
    operations: ["CREATE"],
    subresource: null,
    persistent: true,
    sideEffects: false,
    ignoreFailures: true,
  }, () => {});
  on.daemon("kopfexamples", {
    ...common,
    ...retried,
    id: "dm",
    initialDelay: 1,
    cancellationBackoff: 1,
    cancellationTimeout: 1,
    cancellationPolling: 1,
  }, () => {});
  on.timer(
    "kopfexamples",
    { ...common, ...retried, id: "t", interval: 1, sharp: true, idle: 1 },
    () => {},
  );
  on.index("kopfexamples", { ...common, id: "i", errors: "ignored", backoff: 1 }, () => {});
  on.reconcile("kopfexamples", {
    ...common,
    id: "rc",
    resync: 10,
    concurrency: 2,
    finalizer: true,
    statusChanges: false,
    fieldManager: "m",
    owns: [],
    watches: [],
    errors: "temporary",
    backoff: 1,
    retries: 1,
  }, () => {});
  on.startup({ registry, id: "s", param: 1, ...retried }, () => {});
  // The short forms (into the default registry), and a trailing undefined (options passed on).
  const previous = getDefaultRegistry();
  setDefaultRegistry(registry);
  try {
    on.create("kopfexamples", function short() {});
    on.update("kopfexamples", function shortUpdate() {}, undefined);
  } finally {
    setDefaultRegistry(previous);
  }
  assert.deepEqual(registry.registrations.map((r) => r.handler.id), [
    "c/spec.a",
    "u/spec.a",
    "d",
    "r",
    "f/spec.a",
    "e",
    "dm",
    "t",
    "i",
    "short",
    "shortUpdate",
  ]);
  assert.equal(registry.webhooks().length, 1);
  assert.equal(registry.reconcilers().length, 1);
  assert.equal(registry.activities("startup").length, 1);
});
