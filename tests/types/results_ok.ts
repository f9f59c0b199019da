// deno-lint-ignore-file require-await -- async handlers that return at once are the point here
// Must compile: handler results that are JSON, or typed `unknown`/`any` (left to the run-time
// check), for every handler kind whose result is stored in status. Checked by
// tests/typed_handlers_test.ts.
import { daemon, on, timer } from "../../mod.ts";
import type { ChangingContext } from "../../mod.ts";
import { KopfExamples } from "./_kopfexample.ts";

// deno-lint-ignore no-explicit-any
declare const anything: any;
declare const unknownValue: unknown;
class Counter {
  count = 1;
}
interface Report {
  name: string;
  size?: number;
  tags: readonly string[];
  nested: { at: Date; items: { id: number; ok: boolean | null }[] };
  extra: Record<string, unknown>;
}
declare const report: Report;

// unknown and any: the run-time check decides.
on.create("kopfexamples", ({ old }) => old);
on.update("kopfexamples", ({ spec }) => spec.x);
on.resume("kopfexamples", () => unknownValue);
on.delete("kopfexamples", () => anything);
on.create("kopfexamples", () => ({ value: unknownValue, any: anything }));
on.field("kopfexamples", { field: "spec.x" }, ({ old, new: now }) => [old, now]);
// Nothing: void, undefined, null.
on.create("kopfexamples", () => {});
on.create("kopfexamples", () => undefined);
on.create("kopfexamples", () => null);
on.create("kopfexamples", async () => {});
// JSON values: primitives, objects, arrays, nested, optional fields, Date (stored by toJSON()).
on.create("kopfexamples", () => "done");
on.create("kopfexamples", () => 1);
on.create("kopfexamples", () => true);
on.create("kopfexamples", () => [1, "two", null, { three: [3] }]);
on.create("kopfexamples", () => ({ message: "hello", at: new Date(), n: [{ deep: { er: 1 } }] }));
on.create("kopfexamples", () => report);
on.create("kopfexamples", () => Math.random() > 0.5 ? { a: 1 } : undefined);
on.create("kopfexamples", (): Record<string, unknown> => ({}));
on.create("kopfexamples", () => new Counter()); // no methods: a run-time failure, not a type error
// Promises of JSON.
on.create("kopfexamples", async () => ({ message: "hello" }));
on.update("kopfexamples", async ({ old }) => await Promise.resolve(old));
on.create("kopfexamples", (): Promise<Report> => Promise.resolve(report));
// Options, typed resources, typed field paths, explicit types.
on.create("kopfexamples", { id: "x" }, () => ({ id: "x" }));
on.create(KopfExamples, ({ spec }) => ({ field: spec.field, items: spec.items }));
on.field(KopfExamples, { field: "spec.nested" }, ({ new: now }) => now);
on.update(KopfExamples, { field: "spec.duration" }, ({ old }) => old);
on.create<{ size: number }>("kopfexamples", ({ spec }) => ({ size: spec.size }));
// Declared functions.
function named({ spec }: ChangingContext) {
  return { seen: spec };
}
on.create("kopfexamples", named);
on.update("kopfexamples", named); // the same function, registered twice
// Event handlers, daemons and timers, sub-handlers.
on.event("kopfexamples", ({ type }) => ({ type }));
on.event("kopfexamples", ({ body }) => body);
daemon("kopfexamples", async ({ stopped, sleep }) => {
  while (!stopped.aborted) await sleep(1);
});
daemon(KopfExamples, ({ spec }) => spec.nested);
timer("kopfexamples", { interval: 1 }, ({ spec }) => ({ seen: spec }));
on.timer("kopfexamples", { interval: 1 }, () => new Date());
on.create("kopfexamples", async ({ subhandler, execute }) => {
  subhandler(({ old }) => old);
  subhandler(() => ({ a: [1] }));
  await execute({ a: ({ spec }) => spec.x, b: () => ({ b: 1 }), c: async () => {} });
  await execute([() => "one", () => null]);
  await execute();
});
// Probe results are served as JSON.
on.probe(() => ({ objects: 3, ready: true }));
on.probe({ id: "when" }, async () => new Date());
on.probe(function unknown_result(): unknown {
  return 1;
});
// Handlers whose results are not stored in status keep their own result types.
on.index("kopfexamples", () => new Map());
on.validate("kopfexamples", () => Symbol());
