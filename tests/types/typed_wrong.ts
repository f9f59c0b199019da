// Must NOT compile: each line marked `expected error` is a misuse that the types catch.
// tests/typed_handlers_test.ts checks that `deno check` reports an error on every marked line.
import { daemon, index, on } from "../../mod.ts";
import { ClosedOnes, type KopfExample, KopfExamples } from "./_kopfexample.ts";

on.create<KopfExample>("kopfexamples", ({ spec }) => spec.feild); // expected error
on.create(KopfExamples, ({ spec }) => spec.duration.toFixed()); // expected error
on.update(KopfExamples, ({ patch }) => {
  patch.spec.feild = "x"; // expected error
});
on.delete(ClosedOnes, ({ patch }) => {
  patch.status.mesage = "x"; // expected error
});
on.resume(ClosedOnes, ({ status }) => status.whatever); // expected error
on.create(KopfExamples, ({ old }) => old.spec); // expected error
on.update(KopfExamples, ({ diff }) => diff.filter(([, path]) => path[0] === "spek")); // expected error
on.event(KopfExamples, ({ body }) => body.spec?.feild); // expected error
on.validate(KopfExamples, ({ new: object }) => object?.spec?.feild); // expected error
daemon(KopfExamples, ({ spec }) => spec.items?.push(1)); // expected error
index(ClosedOnes, ({ status }) => status.count?.toUpperCase()); // expected error
on.field(KopfExamples, { field: "spec.items" }, ({ spec }) => spec.itmes); // expected error
// Admission requests may lack both (generateName, a creation's uid): still string | undefined.
on.validate(KopfExamples, ({ name }) => name.length); // expected error
on.mutate(KopfExamples, ({ uid }) => uid.length); // expected error
// Field paths of typed resources are checked, and `old`/`new` typed by them.
on.field(KopfExamples, { field: "spec.feild" }, () => {}); // expected error
on.field(KopfExamples, { field: "spec.nested.colour" }, () => {}); // expected error
on.field(KopfExamples, { field: "status.message" }, () => {}); // expected error
on.field(KopfExamples, { field: "spec.nested.size" }, ({ new: now }) => now?.toUpperCase()); // expected error
on.field(KopfExamples, { field: "spec.field" }, ({ old }) => old.length); // expected error
on.update(KopfExamples, { field: "spec.nested.size" }, ({ old }) => old?.toUpperCase()); // expected error
// Value filters of a typed field are of the field's type (on.field; the other on.* with a field
// fall back to their unchecked form, as for a wrong path).
on.field(KopfExamples, { field: "spec.nested.color", new: "green" }, () => {}); // expected error
on.field(KopfExamples, { field: "spec.nested.color", old: "rde" }, () => {}); // expected error
on.field(KopfExamples, { field: "spec.nested.size", value: "3" }, () => {}); // expected error
