// deno-lint-ignore-file require-await -- async handlers that return at once are the point here
// Must NOT compile: each line marked `expected error` returns a value that cannot be stored in
// status as JSON. tests/typed_handlers_test.ts checks that `deno check` reports an error on every
// marked line (and on no other).
import { daemon, on, timer } from "../../mod.ts";
import { KopfExamples } from "./_kopfexample.ts";

class Client {
  name = "c";
  close() {}
}

on.create("kopfexamples", () => 10n); // expected error
on.create("kopfexamples", () => () => 1); // expected error
on.create("kopfexamples", () => new Map()); // expected error
on.create("kopfexamples", () => ({ a: 1n })); // expected error
on.create("kopfexamples", () => Symbol()); // expected error
on.create("kopfexamples", () => new Set([1])); // expected error
on.create("kopfexamples", () => new WeakMap()); // expected error
on.create("kopfexamples", () => new Client()); // expected error
on.create("kopfexamples", () => [1, new Map()]); // expected error
on.create("kopfexamples", () => ({ a: { b: [{ c: { d: () => 1 } }] } })); // expected error
on.create("kopfexamples", () => ({ pending: Promise.resolve(1) })); // expected error
on.create("kopfexamples", async () => 10n); // expected error
on.create("kopfexamples", async () => ({ m: new Map() })); // expected error
on.update("kopfexamples", { id: "x" }, () => 10n); // expected error
on.delete("kopfexamples", { optional: true }, () => Symbol()); // expected error
on.resume("kopfexamples", () => ({ f: () => 1 })); // expected error
on.field("kopfexamples", { field: "spec.x" }, () => 1n); // expected error
on.update(KopfExamples, { field: "spec.field" }, () => new Map()); // expected error
on.create(KopfExamples, ({ spec }) => ({ size: BigInt(spec.items?.length ?? 0) })); // expected error
on.event("kopfexamples", () => new Set()); // expected error
daemon("kopfexamples", async () => 10n); // expected error
timer(KopfExamples, { interval: 1 }, () => ({ at: Symbol() })); // expected error
on.timer("kopfexamples", { interval: 1 }, () => () => {}); // expected error
on.create("kopfexamples", async ({ subhandler, execute }) => {
  subhandler(() => 1n); // expected error
  await execute({ a: () => new Map() }); // expected error
  await execute([() => 1, () => Symbol()]); // expected error
});
function named() {
  return { count: 1n };
}
on.create("kopfexamples", named); // expected error
// Probe results are served as JSON by the liveness endpoint.
on.probe(() => 10n); // expected error
on.probe({ id: "p" }, async () => ({ seen: new Map() })); // expected error
