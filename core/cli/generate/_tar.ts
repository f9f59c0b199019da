/**
 * Just enough of the tar format for image layers: a writer of reproducible archives (entries
 * sorted by path, one fixed mtime, numeric owners without names, PAX records only for names too
 * long for ustar) and a reader of what `dpkg-deb --fsys-tarfile` prints (ustar, GNU long names,
 * PAX). Used by `./oci.ts` and `./image.ts`.
 * @module
 */

import { concatBytes } from "../../util/bytes.ts";

/** One entry of an archive. Paths are relative, without `./`; directories without the `/`. */
export interface TarEntry {
  /** The path inside the archive, e.g. `usr/lib/x86_64-linux-gnu/libc.so.6`. */
  readonly path: string;
  /** What it is. */
  readonly type: "file" | "dir" | "symlink";
  /** Permission bits, e.g. `0o644`. */
  readonly mode: number;
  /** Numeric owner. @default 0 */
  readonly uid?: number;
  /** Numeric group. @default 0 */
  readonly gid?: number;
  /** A file's content. */
  readonly data?: Uint8Array;
  /** A symlink's target. */
  readonly target?: string;
}

const BLOCK = 512;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, "0") + "\0";
}

function header(
  name: string,
  type: string,
  fields: { mode: number; uid: number; gid: number; size: number; target: string },
): Uint8Array {
  const block = new Uint8Array(BLOCK);
  const put = (offset: number, width: number, text: string) => {
    block.set(encoder.encode(text).subarray(0, width), offset);
  };
  put(0, 100, name);
  put(100, 8, octal(fields.mode & 0o7777, 8));
  put(108, 8, octal(fields.uid, 8));
  put(116, 8, octal(fields.gid, 8));
  put(124, 12, octal(fields.size, 12));
  put(136, 12, octal(0, 12)); // mtime: the epoch, always
  put(148, 8, "        ");
  put(156, 1, type);
  put(157, 100, fields.target);
  put(257, 8, "ustar\u000000");
  put(329, 8, octal(0, 8));
  put(337, 8, octal(0, 8));
  const sum = block.reduce((a, b) => a + b, 0);
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  return block;
}

function padding(size: number): Uint8Array {
  return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
}

function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const size = encoder.encode(body).length;
  let length = size + String(size).length; // the length counts its own digits
  if (String(length).length !== String(size).length) length = size + String(length).length;
  return `${length}${body}`;
}

/**
 * Writes a tar archive whose bytes depend on the entries only: sorted by path, mtime 0, no user
 * or group names, ustar headers (a PAX header first where a name or target exceeds 100 bytes).
 *
 * @param entries The entries, in any order; a path given twice is an error.
 * @returns The archive.
 * @throws {Error} for a duplicate path.
 */
export function writeTar(entries: readonly TarEntry[]): Uint8Array {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const parts: Uint8Array[] = [];
  let previous = "";
  for (const entry of sorted) {
    if (entry.path === previous) throw new Error(`Duplicate path in a tar archive: ${entry.path}`);
    previous = entry.path;
    const name = entry.type === "dir" ? `${entry.path}/` : entry.path;
    const target = entry.target ?? "";
    const data = entry.type === "file" ? entry.data ?? new Uint8Array() : new Uint8Array();
    const fields = {
      mode: entry.mode,
      uid: entry.uid ?? 0,
      gid: entry.gid ?? 0,
      size: data.length,
      target,
    };
    const long = encoder.encode(name).length > 100 || encoder.encode(target).length > 100;
    if (long) {
      const pax = encoder.encode(
        paxRecord("path", name) + (target ? paxRecord("linkpath", target) : ""),
      );
      parts.push(
        header("PaxHeader", "x", { ...fields, size: pax.length, target: "" }),
        pax,
        padding(pax.length),
      );
    }
    const type = entry.type === "file" ? "0" : entry.type === "dir" ? "5" : "2";
    parts.push(header(name.slice(0, 100), type, fields), data, padding(data.length));
  }
  parts.push(new Uint8Array(BLOCK * 2));
  return concatBytes(parts);
}

/** An entry read by {@link readTar}; hard links come as `link` with the linked path. */
export interface ReadEntry {
  /** The path, without a leading `./` or `/` and without a trailing `/`. */
  readonly path: string;
  /** What it is; devices, fifos and the like are `other`. */
  readonly type: "file" | "dir" | "symlink" | "link" | "other";
  /** Permission bits. */
  readonly mode: number;
  /** A file's content (a view into the archive). */
  readonly data: Uint8Array;
  /** A symlink's or hard link's target. */
  readonly target: string;
}

function field(block: Uint8Array, offset: number, width: number): string {
  const bytes = block.subarray(offset, offset + width);
  const end = bytes.indexOf(0);
  return decoder.decode(end >= 0 ? bytes.subarray(0, end) : bytes);
}

function number(block: Uint8Array, offset: number, width: number): number {
  const text = field(block, offset, width).trim();
  return text ? parseInt(text, 8) : 0;
}

function clean(path: string): string {
  return path.replace(/^\.?\/+/, "").replace(/\/+$/, "");
}

/**
 * Reads a tar archive: ustar, GNU long names (`L`, `K`) and PAX `path`/`linkpath` records.
 *
 * @param archive The whole archive.
 * @returns Its entries, in archive order (the root `./` left out).
 */
export function readTar(archive: Uint8Array): ReadEntry[] {
  const entries: ReadEntry[] = [];
  let offset = 0;
  let longName: string | undefined;
  let longTarget: string | undefined;
  while (offset + BLOCK <= archive.length) {
    const block = archive.subarray(offset, offset + BLOCK);
    if (block.every((b) => b === 0)) break;
    const size = number(block, 124, 12);
    const type = String.fromCharCode(block[156] ?? 0);
    const data = archive.subarray(offset + BLOCK, offset + BLOCK + size);
    offset += BLOCK + size + ((BLOCK - (size % BLOCK)) % BLOCK);
    if (type === "L" || type === "K") {
      const text = field(data, 0, data.length);
      if (type === "L") longName = text;
      else longTarget = text;
      continue;
    }
    if (type === "x") {
      for (const record of decoder.decode(data).split("\n")) {
        const match = /^\d+ (path|linkpath)=(.*)$/.exec(record);
        if (match?.[1] === "path") longName = match[2];
        if (match?.[1] === "linkpath") longTarget = match[2];
      }
      continue;
    }
    if (type === "g") continue;
    const prefix = field(block, 345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(block, 0, 100)}` : field(block, 0, 100));
    const target = longTarget ?? field(block, 157, 100);
    longName = longTarget = undefined;
    const path = clean(name);
    if (!path) continue;
    const kind = type === "0" || type === "\0" || type === "7"
      ? "file"
      : type === "5"
      ? "dir"
      : type === "2"
      ? "symlink"
      : type === "1"
      ? "link"
      : "other";
    entries.push({
      path,
      type: kind,
      mode: number(block, 100, 8),
      data,
      target: kind === "link" ? clean(target) : target,
    });
  }
  return entries;
}
