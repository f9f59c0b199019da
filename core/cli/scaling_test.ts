// Unit tests of the scale-out options of kopf run and of kopf shards' argument errors.
import assert from "node:assert/strict";
import { createSettings } from "../settings/settings.ts";
import { applyScalingOptions, shardsCommand } from "./scaling.ts";

Deno.test("applyScalingOptions(): --shards with its options sets settings.sharding", () => {
  const settings = createSettings();
  const error = applyScalingOptions({
    shards: true,
    "shard-count": "8",
    "shard-by": "namespace",
    "lease-name": "ops",
    "lease-namespace": "operators",
  }, settings);
  assert.equal(error, undefined);
  assert.equal(settings.sharding.enabled, true);
  assert.equal(settings.sharding.shards, 8);
  assert.equal(settings.sharding.key, "namespace");
  assert.equal(settings.sharding.name, "ops");
  assert.equal(settings.sharding.namespace, "operators");
  assert.equal(settings.leadership.enabled, false);
});

Deno.test("applyScalingOptions(): unusable combinations and values get one clear message", () => {
  const cases: Array<[Parameters<typeof applyScalingOptions>[0], RegExp]> = [
    [{ shards: true, "leader-elect": true }, /mutually exclusive/],
    [{ "shard-count": "8" }, /--shard-count and --shard-by need --shards/],
    [
      { shards: true, "shard-count": "0" },
      /--shard-count must be an integer from 1 to \d+, got '0'/,
    ],
    [{ shards: true, "shard-count": "x" }, /got 'x'/],
    [{ shards: true, "shard-by": "name" }, /--shard-by must be uid or namespace, got 'name'/],
    [{ "lease-name": "x" }, /need --leader-elect or --shards/],
  ];
  for (const [values, pattern] of cases) {
    const settings = createSettings();
    assert.match(applyScalingOptions(values, settings) ?? "", pattern, JSON.stringify(values));
    assert.equal(settings.sharding.enabled && settings.leadership.enabled, false);
  }
});

Deno.test("kopf shards: an unknown option is one error line; --help prints the usage", async () => {
  const errors: string[] = [];
  const output: string[] = [];
  const options = { print: (l: string) => errors.push(l), output: (l: string) => output.push(l) };
  assert.equal(await shardsCommand(["--bogus"], options), 1);
  assert.equal(errors.length, 1);
  assert.match(errors[0]!, /^error: .*'--bogus'.*\(see kopf shards --help\)$/);
  assert.equal(await shardsCommand(["--help"], options), 0);
  assert.match(output.join("\n"), /^Usage: kopf shards/);
});
