/**
 * Byte-array helpers shared by the layers above (the HTTP server and client, the tar writer,
 * the emulator).
 * @module
 */

/**
 * Joins byte chunks into one array (the only chunk itself when it is the whole).
 *
 * @example
 * ```ts
 * import { concatBytes } from "./bytes.ts";
 * concatBytes([new Uint8Array([1]), new Uint8Array([2, 3])]); // Uint8Array [1, 2, 3]
 * ```
 * @param chunks The chunks, in order.
 * @param total Their summed length, when the caller has counted it already.
 * @returns The joined bytes.
 */
export function concatBytes<B extends ArrayBufferLike>(
  chunks: readonly Uint8Array<B>[],
  total: number = chunks.reduce((n, c) => n + c.length, 0),
): Uint8Array<B> | Uint8Array<ArrayBuffer> {
  if (chunks.length === 1 && chunks[0]!.length === total) return chunks[0]!;
  const out = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}
