/**
 * Types of the built-in kinds (X-TOOL-05): `kits/builtins.ts` is what `kopf generate builtins`
 * makes of the test control plane's OpenAPI v3 documents, unchanged; handlers typed by its
 * constants compile, and misuses of their fields are compile errors.
 */

import assert from "node:assert/strict";
import { main } from "../core/cli/main.ts";
import { assertCompileErrors, denoCheck } from "./_typecheck.ts";
import { kubeconfigPath, tempDir } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const here = (path: string) => decodeURIComponent(new URL(path, import.meta.url).pathname);

Deno.test(
  "kopf generate builtins: kits/builtins.ts is what the test control plane's OpenAPI documents generate (X-TOOL-05)",
  opts,
  async () => {
    await using dir = await tempDir();
    const lines: string[] = [];
    const code = await main(
      [
        "generate",
        "builtins",
        "-o",
        `${dir.path}/builtins.ts`,
        "--import",
        "../core/intents/typed_resources.ts",
      ],
      { kubeconfig: await kubeconfigPath(), write: (line) => lines.push(line) },
    );
    assert.equal(code, 0, lines.join("\n"));
    const generated = (await Deno.readTextFile(`${dir.path}/builtins.ts`))
      .replace(`-o ${dir.path}/builtins.ts`, "-o kits/builtins.ts");
    const checkedIn = await Deno.readTextFile(here("../kits/builtins.ts"));
    assert.equal(
      generated,
      checkedIn,
      "generate again: kopf generate builtins -o kits/builtins.ts --import ../core/intents/typed_resources.ts",
    );
    for (
      const kind of [
        "Pod",
        "Deployment",
        "Service",
        "ConfigMap",
        "Secret",
        "Job",
        "Event",
        "Lease",
        "Namespace",
      ]
    ) {
      assert.match(checkedIn, new RegExp(`export interface ${kind} extends TypedObject<`), kind);
    }
  },
);

Deno.test("built-in types: handlers typed by Pods, Deployments, … compile (X-TOOL-05)", async () => {
  const { ok, output } = await denoCheck(new URL("./types/builtins_ok.ts", import.meta.url));
  assert.ok(ok, output);
});

Deno.test("built-in types: each misuse of a field is a compile error (X-TOOL-05)", async () => {
  await assertCompileErrors(new URL("./types/builtins_wrong.ts", import.meta.url), 5);
});
