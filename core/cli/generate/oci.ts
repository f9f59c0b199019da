/**
 * An OCI image archive written without a container engine: layers as reproducible tar files
 * (`./_tar.ts`), gzip-compressed, a config without timestamps, a manifest, and the OCI image
 * layout (`oci-layout`, `index.json`, `blobs/sha256/…`) in one tar file — with Docker's
 * `manifest.json` beside it, so that `docker load`, `podman load` and
 * `ctr images import` all read it. The same layers and config give the same bytes, so the same
 * digest. Used by `kopf build --image` (`./image.ts`) and the test node's pause image.
 * @module
 */

import { type TarEntry, writeTar } from "./_tar.ts";

/** The runtime settings of an image (the `config` of the OCI image configuration). */
export interface ImageRuntimeConfig {
  /** `uid:gid` (numeric, so that the kubelet can check `runAsNonRoot`). */
  readonly user?: string;
  /** `NAME=value` pairs. */
  readonly env?: readonly string[];
  /** The executable and its first arguments. */
  readonly entrypoint: readonly string[];
  /** Default arguments after the entrypoint. */
  readonly cmd?: readonly string[];
  /** The working directory. */
  readonly workingDir?: string;
  /** Labels (`org.opencontainers.image.*` and the like). */
  readonly labels?: Readonly<Record<string, string>>;
}

/** What {@link writeImageArchive} writes. */
export interface ImageArchiveSpec {
  /** The image's name with its tag, e.g. `my-operator:1.0` or `registry.k8s.io/pause:3.6`. */
  readonly name: string;
  /** The layers, lowest first, as uncompressed tar archives (or their entries). */
  readonly layers: ReadonlyArray<Uint8Array | readonly TarEntry[]>;
  /** How the image runs. */
  readonly config: ImageRuntimeConfig;
  /** `amd64`, `arm64`. @default the running machine's */
  readonly architecture?: string;
}

/** What an archive holds, for reports and tests. */
export interface ImageArchive {
  /** The archive's bytes. */
  readonly bytes: Uint8Array;
  /** The manifest's digest (`sha256:…`): the image's identity. */
  readonly digest: string;
  /** The config's digest (what `docker images` and `crictl images` call the image ID). */
  readonly configDigest: string;
  /** The fully qualified name (`docker.io/library/…` for a short one). */
  readonly name: string;
  /** Each layer's compressed size in bytes, lowest first. */
  readonly layerSizes: readonly number[];
  /** Each layer's uncompressed size in bytes, lowest first. */
  readonly layerUncompressedSizes: readonly number[];
}

const MEDIA = {
  index: "application/vnd.oci.image.index.v1+json",
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar+gzip",
} as const;

/**
 * The running machine's architecture as OCI names it.
 *
 * @returns `amd64`, `arm64`, or Deno's own name for others.
 */
export function ociArchitecture(): string {
  return ({ x86_64: "amd64", aarch64: "arm64" } as Record<string, string>)[Deno.build.arch] ??
    Deno.build.arch;
}

/**
 * A short image name as container runtimes resolve it: `name:tag` → `docker.io/library/name:tag`,
 * `user/name:tag` → `docker.io/user/name:tag`; names with a registry stay as they are. A name
 * without a tag gets `:latest`.
 *
 * @param name The name.
 * @returns The fully qualified name.
 */
export function qualifiedImageName(name: string): string {
  const slash = name.indexOf("/");
  const first = slash >= 0 ? name.slice(0, slash) : "";
  const hasRegistry = slash >= 0 && (first.includes(".") || first.includes(":") ||
    first === "localhost");
  let qualified = hasRegistry ? name : `docker.io/${slash >= 0 ? "" : "library/"}${name}`;
  const lastPart = qualified.slice(qualified.lastIndexOf("/") + 1);
  if (!lastPart.includes(":") && !lastPart.includes("@")) qualified += ":latest";
  return qualified;
}

async function sha256(data: Uint8Array): Promise<string> {
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", data as Uint8Array<ArrayBuffer>),
  );
  return Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function gzip(data: Uint8Array): Promise<Uint8Array> {
  const stream = new Blob([data as Uint8Array<ArrayBuffer>]).stream().pipeThrough(
    new CompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

const json = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

/**
 * Writes an image into one OCI archive (OCI image layout plus Docker's `manifest.json`).
 * Nothing in it depends on the time or the machine beyond the inputs: same input, same digest.
 *
 * @param spec The name, the layers, how it runs.
 * @returns The archive's bytes and digests.
 */
export async function writeImageArchive(spec: ImageArchiveSpec): Promise<ImageArchive> {
  const name = qualifiedImageName(spec.name);
  const blobs: TarEntry[] = [];
  const blob = async (data: Uint8Array): Promise<string> => {
    const hex = await sha256(data);
    if (!blobs.some((b) => b.path === `blobs/sha256/${hex}`)) {
      blobs.push({ path: `blobs/sha256/${hex}`, type: "file", mode: 0o644, data });
    }
    return `sha256:${hex}`;
  };
  const layers: { digest: string; size: number; diffId: string; raw: number }[] = [];
  for (const layer of spec.layers) {
    const tar = layer instanceof Uint8Array ? layer : writeTar(layer);
    const compressed = await gzip(tar);
    layers.push({
      digest: await blob(compressed),
      size: compressed.length,
      diffId: `sha256:${await sha256(tar)}`,
      raw: tar.length,
    });
  }
  const c = spec.config;
  const config = json({
    architecture: spec.architecture ?? ociArchitecture(),
    os: "linux",
    config: {
      ...(c.user ? { User: c.user } : {}),
      ...(c.env ? { Env: c.env } : {}),
      Entrypoint: c.entrypoint,
      ...(c.cmd ? { Cmd: c.cmd } : {}),
      ...(c.workingDir ? { WorkingDir: c.workingDir } : {}),
      ...(c.labels ? { Labels: c.labels } : {}),
    },
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.diffId) },
  });
  const configDigest = await blob(config);
  const manifest = json({
    schemaVersion: 2,
    mediaType: MEDIA.manifest,
    config: { mediaType: MEDIA.config, digest: configDigest, size: config.length },
    layers: layers.map((l) => ({ mediaType: MEDIA.layer, digest: l.digest, size: l.size })),
  });
  const digest = await blob(manifest);
  const tag = name.slice(name.lastIndexOf(":") + 1);
  const index = json({
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: [{
      mediaType: MEDIA.manifest,
      digest,
      size: manifest.length,
      annotations: {
        "io.containerd.image.name": name,
        "org.opencontainers.image.ref.name": tag,
      },
    }],
  });
  const docker = json([{
    Config: `blobs/sha256/${configDigest.slice(7)}`,
    RepoTags: [name.replace(/^docker\.io\/(library\/)?/, "")],
    Layers: layers.map((l) => `blobs/sha256/${l.digest.slice(7)}`),
  }]);
  const bytes = writeTar([
    { path: "blobs", type: "dir", mode: 0o755 },
    { path: "blobs/sha256", type: "dir", mode: 0o755 },
    ...blobs,
    { path: "oci-layout", type: "file", mode: 0o644, data: json({ imageLayoutVersion: "1.0.0" }) },
    { path: "index.json", type: "file", mode: 0o644, data: index },
    { path: "manifest.json", type: "file", mode: 0o644, data: docker },
  ]);
  return {
    bytes,
    digest,
    configDigest,
    name,
    layerSizes: layers.map((l) => l.size),
    layerUncompressedSizes: layers.map((l) => l.raw),
  };
}
