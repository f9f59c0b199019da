// Must compile: every handler kind typed by one name or by a typed resource constant, and
// untyped code unchanged. Checked by tests/typed_handlers_test.ts.
import { ABSENT, daemon, index, on, PRESENT, timer } from "../../mod.ts";
import type { ChangingContext, SpawnedContext } from "../../mod.ts";
import { type Closed, ClosedOnes, type KopfExample, KopfExamples } from "./_kopfexample.ts";

const text = (_: string | undefined) => {};
const nums = (_: number | undefined) => {};

on.create<KopfExample>("kopfexamples", ({ spec, status, body, patch, old, new: now, diff }) => {
  text(spec.field);
  text(status.message);
  text(body.spec?.field);
  text(body.metadata?.name);
  patch.status.message = "done";
  patch.spec.field = null;
  text(old?.spec?.field);
  text(now?.spec?.items?.[0]);
  for (const [op, path] of diff) if (op === "change" && path[0] === "spec") text(path[1]);
});
on.create(KopfExamples, ({ spec, patch }) => {
  text(spec.field);
  patch.status.message = spec.field ?? "";
});
on.update(KopfExamples, { field: "spec.field" }, ({ old, new: now, spec }) => {
  text(spec.field);
  return [old, now];
});
on.update<KopfExample>("kopfexamples", { field: "spec.field" }, ({ old }) => old);
on.delete(ClosedOnes, { optional: true }, ({ status, patch }) => {
  nums(status.count);
  patch.status.count = 1;
});
on.resume(KopfExamples, ({ spec }) => text(spec.field));
on.field(KopfExamples, { field: "spec.items" }, ({ spec, old }) => [spec.items, old]);
on.event(KopfExamples, ({ spec, type }) => [spec.field, type]);
on.validate(KopfExamples, ({ spec, new: object }) => text(object?.spec?.field ?? spec.field));
on.mutate<KopfExample>("kopfexamples", ({ patch }) => {
  patch.spec.field = "x";
});
daemon(KopfExamples, async ({ spec, sleep }) => {
  text(spec.field);
  await sleep(1);
});
timer<Closed>("kopfexamples", { interval: 1 }, ({ status }) => nums(status.count));
on.timer(ClosedOnes, { interval: 1 }, ({ patch }) => {
  patch.status.message = "tick";
});
index(KopfExamples, ({ spec, name }) => ({ [name ?? ""]: spec.field }));
on.index<KopfExample>("kopfexamples", ({ spec }) => spec.items);

// Field handlers of a typed resource: `old`/`new` have the type of the field at the path.
on.field(KopfExamples, { field: "spec.field" }, ({ old, new: now }) => [text(old), text(now)]);
on.field(KopfExamples, { field: "spec.nested.size" }, ({ new: now }) => nums(now));
on.field(KopfExamples, { field: "spec.nested.color", new: "red" }, ({ new: now }) => {
  const color: "red" | "blue" | undefined = now;
  return color;
});
on.field(KopfExamples, { field: "metadata.labels.app" }, ({ old }) => text(old));
on.update(KopfExamples, { field: "spec.duration" }, ({ new: now }) => {
  return typeof now === "string" ? text(now) : nums(now);
});
on.create(KopfExamples, { field: "spec.items" }, ({ new: now }) => now?.map((item) => text(item)));
on.field(KopfExamples, { field: ["spec", "anything"] }, ({ new: now }) => now); // unchecked form
// Value filters of a typed field: its own values, PRESENT/ABSENT, callbacks of its type.
on.field(KopfExamples, { field: "spec.nested.color", old: "blue", new: "red" }, () => {});
on.update(KopfExamples, { field: "spec.nested.size", value: 3 }, () => {});
on.create(KopfExamples, { field: "spec.field", value: PRESENT }, () => {});
on.delete(KopfExamples, { field: "spec.field", value: ABSENT }, () => {});
on.resume(KopfExamples, { field: "spec.nested.size", value: (size) => (size ?? 0) > 2 }, () => {});
on.field(KopfExamples, { field: ["spec", "anything"], value: { any: "thing" } }, () => {});
on.field("kopfexamples", { field: "spec.x", new: "whatever" }, () => {});
on.field<KopfExample>("kopfexamples", { field: "spec.field" }, ({ old }) => old);

// Old spellings keep compiling: a spec type, spec and status types, annotated contexts.
interface Spec {
  field: string;
}
on.create<Spec>("kopfexamples", ({ spec, status, body }) => [spec.field, status.x, body.spec]);
on.update<Spec, { done: boolean }>("kopfexamples", ({ status }) => status.done);
on.create("kopfexamples", ({ spec, patch, old }) => {
  patch.status["anything"] = { nested: 1 };
  return [spec.whatever, old];
});
on.create("kopfexamples", ({ spec }: ChangingContext<Spec>) => spec.field);
daemon("kopfexamples", ({ spec }: SpawnedContext) => spec.anything);
on.field("kopfexamples", { field: "spec.x" }, ({ old, new: now }) => [old, now]);

// Kopf 1.45 (K26-07): name and uid are strings for handlers of stored objects.
const strict = (_: string) => {};
on.create(KopfExamples, ({ name, uid }) => [strict(name), strict(uid)]);
daemon(KopfExamples, ({ name, uid }) => [strict(name), strict(uid)]);
on.event("kopfexamples", ({ name, uid }) => [strict(name), strict(uid)]);
