/**
 * The base layer of `kopf build --image`: a distroless-like root file system made from Debian's
 * packages — the C library and the GCC runtime library (what the `deno` executable links),
 * the Mozilla CA bundle, the time-zone data — plus `/etc/passwd` and `/etc/group` with the
 * `nonroot` user 65532, a home for it and a `/tmp`. No shell, no package manager, no documentation.
 * The packages are fetched once with `apt-get download` into a cache and unpacked with
 * `dpkg-deb`; the same `.deb` files give the same layer.
 * @module
 */

import { readTar, type TarEntry } from "./_tar.ts";
import { UsageError } from "./_io.ts";

/** The Debian packages the base is made of. */
export const BASE_PACKAGES: readonly string[] = ["libc6", "libgcc-s1", "ca-certificates", "tzdata"];

/** The nonroot user's and group's number (distroless's `nonroot`). */
export const NONROOT = 65532;

/** A base layer and where it came from. */
export interface BaseLayer {
  /** The layer's entries. */
  readonly entries: TarEntry[];
  /** `name=version` of each package, for the image's labels. */
  readonly packages: readonly string[];
}

const text = (s: string): Uint8Array => new TextEncoder().encode(s);

async function run(command: string, args: string[], cwd?: string): Promise<Uint8Array> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(command, {
      args,
      ...(cwd ? { cwd } : {}),
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (error) {
    throw new UsageError(
      `kopf build --image makes its base from Debian packages and needs ${command} ` +
        `(${error instanceof Error ? error.message : error}); on other systems, give ` +
        `--base-debs DIR with the .deb files of ${BASE_PACKAGES.join(", ")}`,
    );
  }
  if (!output.success) {
    const error = new TextDecoder().decode(output.stderr).trim().split("\n")
      .filter((l) => !l.startsWith("W:")).pop() ?? "";
    throw new UsageError(`${command} ${args.join(" ")} failed: ${error}`);
  }
  return output.stdout;
}

/**
 * The `.deb` file of each base package in `dir`, downloaded with `apt-get download` when missing
 * (a package present once is reused, so later builds are the same).
 *
 * @param dir The cache directory.
 * @param download Whether a missing package may be downloaded.
 * @returns The paths, in {@link BASE_PACKAGES} order.
 * @throws {UsageError} when a package is missing and cannot be downloaded.
 */
export async function baseDebs(dir: string, download: boolean): Promise<string[]> {
  await Deno.mkdir(dir, { recursive: true });
  const find = async (name: string): Promise<string | undefined> => {
    const found: string[] = [];
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isFile && entry.name.startsWith(`${name}_`) && entry.name.endsWith(".deb")) {
        found.push(`${dir}/${entry.name}`);
      }
    }
    return found.sort().pop();
  };
  const paths: string[] = [];
  for (const name of BASE_PACKAGES) {
    let path = await find(name);
    if (!path && download) {
      await run("apt-get", ["download", "-q", name], dir);
      path = await find(name);
    }
    if (!path) throw new UsageError(`No ${name}_*.deb in ${dir}`);
    paths.push(path);
  }
  return paths;
}

function parents(path: string): string[] {
  const parts = path.split("/");
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join("/"));
}

/** Which files of each package the base keeps. */
function keep(pkg: string, path: string, triplet: string): boolean {
  switch (pkg) {
    case "libc6":
      return path === `lib64/ld-linux-x86-64.so.2` || path.startsWith("lib64/ld-linux") ||
        new RegExp(`^(usr/)?lib/${triplet}/[^/]+\\.so[.0-9]*$`).test(path) ||
        new RegExp(`^lib/ld-linux[^/]*$`).test(path);
    case "libgcc-s1":
      return new RegExp(`^(usr/)?lib/${triplet}/libgcc_s\\.so\\.1$`).test(path);
    case "tzdata":
      return path.startsWith("usr/share/zoneinfo/") && !path.startsWith("usr/share/zoneinfo/right");
    default:
      return false;
  }
}

/**
 * Makes the base layer from the packages' `.deb` files.
 *
 * @param debs The `.deb` files of {@link BASE_PACKAGES}.
 * @param triplet The multiarch directory, e.g. `x86_64-linux-gnu`.
 * @returns The layer's entries and the packages' versions.
 */
export async function baseLayer(debs: readonly string[], triplet: string): Promise<BaseLayer> {
  const files = new Map<string, TarEntry>();
  const packages: string[] = [];
  const certificates: [string, Uint8Array][] = [];
  for (const deb of debs) {
    const fields = new TextDecoder().decode(
      await run("dpkg-deb", ["--field", deb, "Package", "Version", "Architecture"]),
    );
    const field = (name: string) => new RegExp(`^${name}: (.*)$`, "m").exec(fields)?.[1] ?? "";
    const pkg = field("Package");
    packages.push(`${pkg}=${field("Version")}`);
    files.set(`var/lib/dpkg/status.d/${pkg}`, {
      path: `var/lib/dpkg/status.d/${pkg}`,
      type: "file",
      mode: 0o644,
      data: text(`${fields.trim()}\n`),
    });
    const entries = readTar(await run("dpkg-deb", ["--fsys-tarfile", deb]));
    const byPath = new Map(entries.map((e) => [e.path, e]));
    for (const entry of entries) {
      if (pkg === "ca-certificates") {
        if (/^usr\/share\/ca-certificates\/mozilla\/[^/]+\.crt$/.test(entry.path)) {
          certificates.push([entry.path, entry.data]);
        }
        continue;
      }
      if (!keep(pkg, entry.path, triplet)) continue;
      if (entry.type === "file") {
        const mode = entry.mode & 0o111 ? 0o755 : 0o644;
        files.set(entry.path, { path: entry.path, type: "file", mode, data: entry.data });
      } else if (entry.type === "symlink") {
        files.set(entry.path, {
          path: entry.path,
          type: "symlink",
          mode: 0o777,
          target: entry.target,
        });
      } else if (entry.type === "link") {
        const data = byPath.get(entry.target)?.data ?? new Uint8Array();
        files.set(entry.path, { path: entry.path, type: "file", mode: 0o644, data });
      }
    }
  }
  // What update-ca-certificates would write: every certificate, in the order of their names.
  certificates.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const bundle = certificates.map(([, pem]) => new TextDecoder().decode(pem).trimEnd() + "\n");
  const generated: TarEntry[] = [
    {
      path: "etc/ssl/certs/ca-certificates.crt",
      type: "file",
      mode: 0o644,
      data: text(bundle.join("")),
    },
    {
      path: "etc/passwd",
      type: "file",
      mode: 0o644,
      data: text(
        "root:x:0:0:root:/root:/sbin/nologin\n" +
          "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
          `nonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n`,
      ),
    },
    {
      path: "etc/group",
      type: "file",
      mode: 0o644,
      data: text(`root:x:0:\nnobody:x:65534:\nnonroot:x:${NONROOT}:\n`),
    },
    { path: "etc/nsswitch.conf", type: "file", mode: 0o644, data: text("hosts: files dns\n") },
    { path: "tmp", type: "dir", mode: 0o1777 },
    { path: "home/nonroot", type: "dir", mode: 0o700, uid: NONROOT, gid: NONROOT },
    { path: "root", type: "dir", mode: 0o700 },
  ];
  for (const entry of generated) files.set(entry.path, entry);
  for (const path of [...files.keys()]) {
    for (const dir of parents(path)) {
      if (!files.has(dir)) files.set(dir, { path: dir, type: "dir", mode: 0o755 });
    }
  }
  return { entries: [...files.values()], packages };
}
