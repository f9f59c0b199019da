/**
 * `kopf build --image` without a cluster: the archive's layout, the image's configuration (user
 * 65532, `--cached-only`, no shell in the base), and reproducibility (two builds of the same
 * project give the same digest). A tiny project of its own (a fake `kopf run` entry, no npm
 * packages) keeps the build fast; the base's Debian packages come from `apt-get download` (cached
 * once) and the test is skipped where there is no apt-get or dpkg-deb.
 */

import assert from "node:assert/strict";
import { readTar, type TarEntry, writeTar } from "./_tar.ts";
import { buildImage } from "./image.ts";
import { qualifiedImageName } from "./oci.ts";
import { RUNTIME_DENO_FLAGS, RUNTIME_V8_FLAGS } from "./runtime_flags.ts";

const gunzip = async (data: Uint8Array): Promise<Uint8Array> =>
  new Uint8Array(
    await new Response(
      new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
        new DecompressionStream("gzip"),
      ),
    ).arrayBuffer(),
  );

async function hasTools(): Promise<boolean> {
  for (const tool of ["apt-get", "dpkg-deb"]) {
    const found = await new Deno.Command("sh", { args: ["-c", `command -v ${tool}`] }).output()
      .then((o) => o.success, () => false);
    if (!found) return false;
  }
  return Deno.build.os === "linux";
}

const tools = await hasTools();
if (!tools) {
  console.warn("core/cli/generate/image_test.ts: no apt-get/dpkg-deb; image tests skipped");
}

async function project(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "kopf-image-test-" });
  await Deno.writeTextFile(`${dir}/deno.json`, "{}\n");
  await Deno.mkdir(`${dir}/lib`);
  await Deno.writeTextFile(
    `${dir}/lib/cli.ts`,
    "export function main(args: string[]): Promise<number> {\n" +
      "  console.log(JSON.stringify(args));\n  return Promise.resolve(0);\n}\n",
  );
  await Deno.writeTextFile(`${dir}/handlers.ts`, 'import "./lib/helper.ts";\n');
  await Deno.writeTextFile(`${dir}/lib/helper.ts`, "export const x = 1;\n");
  return dir;
}

Deno.test("writeTar() and readTar(): long names, links, fixed metadata", () => {
  const long = `${"d".repeat(80)}/${"f".repeat(80)}.ts`;
  const entries: TarEntry[] = [
    { path: "b", type: "file", mode: 0o755, data: new TextEncoder().encode("x") },
    { path: "a", type: "dir", mode: 0o755 },
    { path: long, type: "file", mode: 0o644, data: new Uint8Array(513) },
    { path: "l", type: "symlink", mode: 0o777, target: "b" },
  ];
  const archive = writeTar(entries);
  assert.deepEqual(archive, writeTar([...entries].reverse()), "the order of entries is fixed");
  const read = readTar(archive);
  assert.deepEqual(read.map((e) => [e.path, e.type]), [
    ["a", "dir"],
    ["b", "file"],
    [long, "file"],
    ["l", "symlink"],
  ]);
  assert.equal(read[2]!.data.length, 513);
  assert.equal(read[3]!.target, "b");
  // mtime (offset 136) is the epoch in every header.
  assert.equal(new TextDecoder().decode(archive.subarray(136, 147)), "00000000000");
  assert.throws(() => writeTar([entries[0]!, entries[0]!]), /Duplicate path/);
});

Deno.test("qualifiedImageName() names images as container runtimes resolve them", () => {
  assert.equal(qualifiedImageName("op:1.0"), "docker.io/library/op:1.0");
  assert.equal(qualifiedImageName("me/op"), "docker.io/me/op:latest");
  assert.equal(qualifiedImageName("registry.example.com/op:2"), "registry.example.com/op:2");
  assert.equal(qualifiedImageName("localhost/op"), "localhost/op:latest");
});

Deno.test({
  name: "kopf build --image: a reproducible OCI archive that runs deno --cached-only as 65532",
  ignore: !tools,
  sanitizeResources: false,
  async fn() {
    const dir = await project();
    try {
      const build = (output: string) =>
        buildImage({
          handlers: ["handlers.ts"],
          cwd: dir,
          output,
          name: "img-test:1",
          cliModule: new URL(`file://${dir}/lib/cli.ts`).href,
        });
      const one = await build("one.oci.tar");
      const two = await build("two.oci.tar");
      assert.equal(one.digest, two.digest, "same input, same digest");
      assert.deepEqual(one.bytes, await Deno.readFile(`${dir}/two.oci.tar`));
      assert.equal(one.name, "docker.io/library/img-test:1");

      const files = new Map(readTar(one.bytes).map((e) => [e.path, e.data]));
      const json = (path: string) => JSON.parse(new TextDecoder().decode(files.get(path)));
      assert.deepEqual(json("oci-layout"), { imageLayoutVersion: "1.0.0" });
      const index = json("index.json");
      assert.equal(index.manifests[0].digest, one.digest);
      assert.equal(index.manifests[0].annotations["io.containerd.image.name"], one.name);
      const manifest = json(`blobs/sha256/${one.digest.slice(7)}`);
      const config = json(`blobs/sha256/${manifest.config.digest.slice(7)}`);
      assert.equal(config.config.User, "65532:65532");
      assert.equal(config.created, undefined, "no timestamp in the config");
      const entrypoint: string[] = config.config.Entrypoint;
      assert.deepEqual(entrypoint.slice(0, 3), ["/usr/local/bin/deno", "run", "-A"]);
      assert.ok(entrypoint.includes("--cached-only"), entrypoint.join(" "));
      // The operator runs with the flags of `kopf build` and `kopf run` (docs/performance.md).
      for (const flag of [...RUNTIME_DENO_FLAGS, `--v8-flags=${RUNTIME_V8_FLAGS.join(",")}`]) {
        assert.ok(entrypoint.includes(flag), `${flag} in ${entrypoint.join(" ")}`);
      }
      assert.equal(entrypoint.at(-1), "/app/.kopf/build/image_main.ts");
      assert.equal(manifest.layers.length, 3);

      const layers = await Promise.all(
        manifest.layers.map(async (l: { digest: string }) =>
          readTar(await gunzip(files.get(`blobs/sha256/${l.digest.slice(7)}`)!))
        ),
      );
      const [base, denoLayer, app] = layers as TarEntry[][];
      const basePaths = new Set(base!.map((e) => e.path));
      for (const shell of ["bin/sh", "bin/bash", "usr/bin/sh", "bin/dash"]) {
        assert.ok(!basePaths.has(shell), `no ${shell}`);
      }
      for (const wanted of ["etc/passwd", "etc/ssl/certs/ca-certificates.crt", "tmp"]) {
        assert.ok(basePaths.has(wanted), `base has ${wanted}`);
      }
      assert.ok([...basePaths].some((p) => /^lib\/[^/]+-linux-gnu\/libc\.so\.6$/.test(p)));
      assert.ok([...basePaths].some((p) => p.startsWith("usr/share/zoneinfo/Europe/")));
      const passwd = new TextDecoder().decode(base!.find((e) => e.path === "etc/passwd")!.data);
      assert.match(passwd, /^nonroot:x:65532:65532:/m);
      assert.deepEqual(denoLayer!.filter((e) => e.type === "file").map((e) => e.path), [
        "usr/local/bin/deno",
      ]);
      const appPaths = app!.filter((e) => e.type === "file").map((e) => e.path).sort();
      assert.deepEqual(appPaths, [
        "app/.kopf/build/image_main.ts",
        "app/deno.json",
        "app/handlers.ts",
        "app/lib/cli.ts",
        "app/lib/helper.ts",
      ]);
      const entry = new TextDecoder().decode(
        app!.find((e) => e.path === "app/.kopf/build/image_main.ts")!.data,
      );
      assert.match(entry, /from "\.\.\/\.\.\/lib\/cli\.ts"/);
      assert.match(entry, /"\.\.\/\.\.\/handlers\.ts"/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
