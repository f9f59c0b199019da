/**
 * The 64-bit FNV-1a hash, formatted as the Kubernetes API server formats it for server-side
 * sharded lists and watches (16 lower-case hex digits), so that a client-side filter agrees
 * with the server object by object.
 * @module
 */

const OFFSET_BASIS = 0xcbf29ce484222325n;
const PRIME = 0x100000001b3n;
const MASK = 0xffffffffffffffffn;
const encoder = new TextEncoder();

/**
 * The 64-bit FNV-1a hash of a string's UTF-8 bytes.
 *
 * @param value The string to hash.
 * @returns The hash as an unsigned 64-bit integer.
 * @example
 * ```ts
 * import { fnv1a64 } from "./fnv1a.ts";
 * fnv1a64(""); // 0xcbf29ce484222325n
 * ```
 */
export function fnv1a64(value: string): bigint {
  let hash = OFFSET_BASIS;
  for (const byte of encoder.encode(value)) {
    hash = ((hash ^ BigInt(byte)) * PRIME) & MASK;
  }
  return hash;
}

/**
 * The hash as the API server prints it: 16 lower-case hex digits, zero-padded.
 *
 * @param value The string to hash.
 * @returns E.g. `"cbf29ce484222325"` for the empty string.
 */
export function fnv1a64Hex(value: string): string {
  return fnv1a64(value).toString(16).padStart(16, "0");
}
