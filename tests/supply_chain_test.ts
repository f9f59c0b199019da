/**
 * Supply chain: `tools/deno.sh` installs Deno only from a tarball whose sha512 is the pinned
 * integrity (a mismatch installs nothing), and the frozen lock of deno.json makes an import that
 * deno.lock does not hold fail instead of silently rewriting the lock (in a temporary copy).
 */

import assert from "node:assert/strict";
import { tempDir } from "./_support.ts";

const ROOT = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

async function run(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; output: string }> {
  const out = await new Deno.Command(command, {
    args: [...args],
    cwd: options.cwd ?? ROOT,
    env: { NO_COLOR: "1", ...options.env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, output: text };
}

async function entries(path: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(path)) names.push(entry.name);
  return names.sort();
}

Deno.test("tools/deno.sh: a package whose integrity differs from the pinned one is refused and nothing is installed", async () => {
  await using cache = await tempDir("kopf-deno-cache-");
  const wrong = `sha512-${"A".repeat(86)}==`;
  const { code, output } = await run("bash", ["tools/deno.sh", "--version"], {
    env: { KOPF_TS_CACHE: cache.path, KOPF_TS_DENO_INTEGRITY: wrong },
  });
  assert.equal(code, 3, output);
  assert.match(
    output,
    /error: integrity mismatch for @deno\/[-\w]+@2\.9\.6: expected sha512-A+==, got sha512-/,
  );
  assert.match(output, /nothing installed/);
  assert.deepEqual(await entries(cache.path), [], "the cache holds no Deno and no leftovers");
});

Deno.test("tools/deno.sh: with the pinned integrity it installs into an empty cache, and reuses it", async () => {
  await using cache = await tempDir("kopf-deno-cache-");
  const first = await run("bash", ["tools/deno.sh", "--version"], {
    env: { KOPF_TS_CACHE: cache.path },
  });
  assert.equal(first.code, 0, first.output);
  assert.match(first.output, /\[deno\] installing @deno\/[-\w]+@2\.9\.6/);
  assert.match(first.output, /^deno 2\.9\.6 /m);
  assert.deepEqual(await entries(cache.path), ["deno-2.9.6-verified"]);
  const again = await run("bash", ["tools/deno.sh", "--version"], {
    env: { KOPF_TS_CACHE: cache.path },
  });
  assert.equal(again.code, 0, again.output);
  assert.doesNotMatch(again.output, /installing/);
});

Deno.test("deno.json's frozen lock: an import missing from deno.lock fails `deno check` and leaves the lock as it was", async () => {
  await using dir = await tempDir("kopf-frozen-");
  for (const file of ["deno.json", "deno.lock"]) {
    await Deno.copyFile(`${ROOT}/${file}`, `${dir.path}/${file}`);
  }
  // A version range the lock has no entry for (the lock holds `npm:yaml@2.9.1` exactly).
  await Deno.writeTextFile(
    `${dir.path}/unlocked.ts`,
    'import { parse } from "npm:yaml@^2.9.0";\nconsole.log(parse("a: 1"));\n',
  );
  const before = await Deno.readTextFile(`${dir.path}/deno.lock`);
  const { code, output } = await run(Deno.execPath(), ["check", "unlocked.ts"], { cwd: dir.path });
  assert.notEqual(code, 0, output);
  assert.match(output, /The lockfile is out of date/);
  assert.equal(await Deno.readTextFile(`${dir.path}/deno.lock`), before);
});

/** The image references of a Dockerfile's stages, with the `ARG` defaults filled in. */
function stageImages(dockerfile: string): string[] {
  const defaults = new Map<string, string>();
  const images: string[] = [];
  for (const line of dockerfile.split("\n")) {
    const arg = /^ARG ([A-Z_]+)=(\S*)$/.exec(line);
    if (arg) defaults.set(arg[1]!, arg[2]!.replace(/^"(.*)"$/, "$1"));
    const from = /^FROM (\S+)/.exec(line);
    if (from) {
      images.push(from[1]!.replace(/\$\{([A-Z_]+)\}/g, (_, name) => defaults.get(name) ?? ""));
    }
  }
  return images;
}

Deno.test("Dockerfile: every base image is pinned by digest, and its Deno comes from tools/deno.sh (the pinned integrity), which .dockerignore lets in", async () => {
  const dockerfile = await Deno.readTextFile(`${ROOT}/Dockerfile`);
  const images = stageImages(dockerfile);
  assert.equal(images.length, 2, images.join(", "));
  for (const image of images) {
    assert.match(image, /^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$/, `not pinned: ${image}`);
  }
  // No stage takes Deno from an image tag: the build installs it through the verifying script.
  assert.ok(!images.some((image) => image.includes("deno")), images.join(", "));
  assert.match(dockerfile, /^RUN bash tools\/deno\.sh install --frozen/m);
  const ignored = (await Deno.readTextFile(`${ROOT}/.dockerignore`)).split("\n");
  assert.ok(ignored.indexOf("!tools/deno.sh") > ignored.indexOf("tools"), ignored.join("\n"));
  // The stage images are read as Docker does: a FROM without a default is caught.
  assert.deepEqual(stageImages("ARG A=x:1@sha256:ab\nFROM ${A} AS b\nFROM ${B}\n"), [
    "x:1@sha256:ab",
    "",
  ]);
});
