/**
 * BLAKE2b (RFC 7693), unkeyed, with a configurable digest size.
 *
 * Kopf shortens over-long annotation keys with a 4-byte BLAKE2b digest, and WebCrypto has no
 * BLAKE2, so this small implementation exists only to produce identical key suffixes
 * (see `conventions.ts`). It favours clarity over speed: 64-bit words are `BigInt`s wrapped by
 * a `BigUint64Array`; inputs are short handler ids, hashed rarely.
 * @module
 */

const IV = new BigUint64Array([
  0x6a09e667f3bcc908n,
  0xbb67ae8584caa73bn,
  0x3c6ef372fe94f82bn,
  0xa54ff53a5f1d36f1n,
  0x510e527fade682d1n,
  0x9b05688c2b3e6c1fn,
  0x1f83d9abfb41bd6bn,
  0x5be0cd19137e2179n,
]);

const SIGMA: readonly (readonly number[])[] = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];

/** The (a, b, c, d) word indices of the 8 mixing steps of one round. */
const STEPS: readonly (readonly [number, number, number, number])[] = [
  [0, 4, 8, 12],
  [1, 5, 9, 13],
  [2, 6, 10, 14],
  [3, 7, 11, 15],
  [0, 5, 10, 15],
  [1, 6, 11, 12],
  [2, 7, 8, 13],
  [3, 4, 9, 14],
];

const BLOCK = 128;

function rotr(x: bigint, n: bigint): bigint {
  return (x >> n) | (x << (64n - n));
}

function compress(h: BigUint64Array, block: Uint8Array, counter: bigint, last: boolean): void {
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength);
  const m = BigUint64Array.from({ length: 16 }, (_, i) => view.getBigUint64(i * 8, true));
  const v = new BigUint64Array(16);
  v.set(h, 0);
  v.set(IV, 8);
  v[12] = v[12]! ^ counter;
  v[13] = v[13]! ^ (counter >> 64n);
  if (last) v[14] = ~v[14]!;
  for (let round = 0; round < 12; round++) {
    const s = SIGMA[round % 10]!;
    STEPS.forEach(([a, b, c, d], step) => {
      const x = m[s[2 * step]!]!;
      const y = m[s[2 * step + 1]!]!;
      v[a] = v[a]! + v[b]! + x;
      v[d] = rotr(v[d]! ^ v[a]!, 32n);
      v[c] = v[c]! + v[d]!;
      v[b] = rotr(v[b]! ^ v[c]!, 24n);
      v[a] = v[a]! + v[b]! + y;
      v[d] = rotr(v[d]! ^ v[a]!, 16n);
      v[c] = v[c]! + v[d]!;
      v[b] = rotr(v[b]! ^ v[c]!, 63n);
    });
  }
  for (let i = 0; i < 8; i++) h[i] = h[i]! ^ v[i]! ^ v[i + 8]!;
}

/**
 * Hash bytes with unkeyed BLAKE2b.
 * @param data The input.
 * @param size The digest size in bytes, 1 to 64.
 * @returns The digest.
 */
export function blake2b(data: Uint8Array, size: number): Uint8Array {
  if (!Number.isInteger(size) || size < 1 || size > 64) {
    throw new RangeError(`The digest size must be 1..64 bytes, got ${size}`);
  }
  const h = new BigUint64Array(IV);
  h[0] = h[0]! ^ 0x01010000n ^ BigInt(size);
  const blocks = Math.max(1, Math.ceil(data.length / BLOCK));
  for (let i = 0; i < blocks; i++) {
    const chunk = data.subarray(i * BLOCK, (i + 1) * BLOCK);
    const block = new Uint8Array(BLOCK);
    block.set(chunk);
    const last = i === blocks - 1;
    compress(h, block, BigInt(i * BLOCK + chunk.length), last);
  }
  const out = new DataView(new ArrayBuffer(64));
  h.forEach((word, i) => out.setBigUint64(i * 8, word, true));
  return new Uint8Array(out.buffer, 0, size);
}
