/**
 * Registration mistakes as `kopf run` users meet them (the handler files are imported
 * dynamically, never type-checked): each is one `error:` line at start naming the file, the line
 * and the mistake, with no stack, and exit code 1; a syntax error keeps Deno's location and code
 * frame; a `field` the CRD's schema cannot hold is a warning naming the handler, once.
 */

import assert from "node:assert/strict";
import { spawnOperator } from "./_operator.ts";
import {
  applyCrds,
  eventually,
  KOPFEXAMPLES,
  tempDir,
  testClient,
  testNamespace,
} from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const MOD = new URL("../mod.ts", import.meta.url).href;

async function runToExit(args: string[]): Promise<{ code: number; lines: string[] }> {
  const op = await spawnOperator(args);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const code = await Promise.race([
    op.exited,
    new Promise<number>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`did not exit: ${op.lines.join("\n")}`)), 30_000);
    }),
  ]).finally(() => clearTimeout(timer));
  return { code, lines: op.lines.filter((l) => l.trim()) };
}

Deno.test(
  "each registration mistake is one error line at start: the file:line, the mistake, no stack; exit 1",
  opts,
  async () => {
    await using dir = await tempDir();
    const cases: Array<[string, string, RegExp]> = [
      [
        "typo.ts",
        `on.create("kopfexamples", { feild: "spec.size" }, function create_fn() {});`,
        /^error: Cannot load handlers from .*typo\.ts: .*typo\.ts:3:4: on\.create\(\): unknown option `feild` \(did you mean `field`\?\); it accepts /,
      ],
      [
        "snake.ts",
        `on.daemon("kopfexamples", { cancellation_timeout: 5 }, async function monitor() {});`,
        /: .*snake\.ts:3:4: on\.daemon\(\): unknown option `cancellation_timeout` \(did you mean `cancellationTimeout`\?\)/,
      ],
      [
        "nonfn.ts",
        `const handlers = { create_fn() {} };\non.update("kopfexamples", { field: "spec.size" }, handlers.update_fn);`,
        /: .*nonfn\.ts:4:4: on\.update\(\): the handler must be a function, got undefined$/,
      ],
      [
        "positional.ts",
        `on.create("example.com", "v1", "widgets", function create_fn() {});`,
        new RegExp(
          String.raw`: .*positional\.ts:3:4: on\.create\("example\.com", "v1", "widgets", …\): ` +
            String
              .raw`Kopf's positional group, version, plural are not accepted \(the handler would be lost\); ` +
            String.raw`write on\.create\("widgets\.v1\.example\.com", create_fn\) or ` +
            String
              .raw`on\.create\(\{ group: "example\.com", version: "v1", plural: "widgets" \}, create_fn\)$`,
        ),
      ],
      [
        "startup.ts",
        `on.startup({ retires: 3 }, function configure() {});`,
        /: .*startup\.ts:3:4: on\.startup\(\): unknown option `retires` \(did you mean `retries`\?\)/,
      ],
    ];
    for (const [file, line, pattern] of cases) {
      await Deno.writeTextFile(
        `${dir.path}/${file}`,
        `import { on } from "${MOD}";\n\n${line}\n`,
      );
      const { code, lines } = await runToExit([`${dir.path}/${file}`, "--standalone"]);
      assert.equal(code, 1, `${file}: ${lines.join("\n")}`);
      const errors = lines.filter((l) => l.startsWith("error:"));
      assert.equal(errors.length, 1, `one error line for ${file}: ${lines.join("\n")}`);
      assert.match(errors[0]!, pattern);
      assert.deepEqual(
        lines.filter((l) => /^\s+at /.test(l)),
        [],
        `no stack for ${file}: ${lines.join("\n")}`,
      );
    }
  },
);

Deno.test(
  "a syntax error in a handler file keeps Deno's file:line:col and code frame",
  opts,
  async () => {
    await using dir = await tempDir();
    await Deno.writeTextFile(
      `${dir.path}/syntax.ts`,
      `import { on } from "${MOD}";\nconst sizes = { small: 1; };\non.create("kopfexamples", () => sizes);\n`,
    );
    const { code, lines } = await runToExit([`${dir.path}/syntax.ts`, "--standalone"]);
    assert.equal(code, 1, lines.join("\n"));
    const at = lines.findIndex((l) => l.startsWith("error:"));
    assert.match(
      lines[at]!,
      /^error: Cannot load handlers from .*syntax\.ts: .*syntax\.ts:2:25: SyntaxError: Expected ',', got ';'$/,
    );
    assert.equal(lines.filter((l) => l.startsWith("error:")).length, 1);
    // The code frame: the offending line of the file, as Deno shows it.
    assert.ok(
      lines.slice(at + 1).some((l) => l.includes("const sizes = { small: 1; };")),
      lines.join("\n"),
    );
  },
);

Deno.test(
  "a field the CRD's schema cannot hold is warned once at start, naming the handler and the path",
  opts,
  async () => {
    using client = await testClient();
    await applyCrds(client, "crds/example.yaml"); // spec and status keep unknown fields
    const namespace = await testNamespace("registration");
    await using dir = await tempDir();
    await Deno.writeTextFile(
      `${dir.path}/h.ts`,
      `import { on } from "${MOD}";\n` +
        `on.field("kopfexamples", { field: "spce.size" }, function typo_top() {});\n` +
        `on.update("kopfexamples", { field: "metadata.lables.app" }, function typo_meta() {});\n` +
        `on.event("kopfexamples", { field: "spec.anything.deep" }, function fine_spec() {});\n` +
        `on.daemon("kopfexamples", { field: "metadata.labels.app" }, async function fine_labels() {});\n` +
        `on.create("kopfexamples", { field: "status.x" }, function fine_status() {});\n` +
        `on.create("kopfexamples", function done() { return "ok"; });\n`,
    );
    await using op = await spawnOperator([`${dir.path}/h.ts`, "-n", namespace, "--standalone"]);
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: "r" },
    }, { namespace });
    // The checks run before the watch starts: once a handler ran, every warning is out.
    await op.waitForLine(/Handler 'done' succeeded/);
    await eventually(
      async () => (await client.api.get(KOPFEXAMPLES, "r", { namespace })).status,
      15_000,
      "handled",
    );
    const warnings = op.lines.filter((l) => l.includes("filters on field"));
    assert.equal(warnings.length, 2, op.lines.join("\n"));
    assert.match(
      warnings[0]!,
      /Handler 'typo_top\/spce\.size' filters on field 'spce\.size', which objects of kopfexamples\.v1\.kopf\.dev cannot have by their CRD's schema: no field `spce` at the top level \(did you mean `spec`\?\)/,
    );
    assert.match(warnings[0]!, /WARNING|warning/);
    assert.match(
      warnings[1]!,
      /Handler 'typo_meta\/metadata\.lables\.app' filters on field 'metadata\.lables\.app', .*no field `lables` in `metadata` \(did you mean `labels`\?\)/,
    );
    assert.equal(await op.stop(), 0);
  },
);
