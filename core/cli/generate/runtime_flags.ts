/**
 * The flags a built or scaffolded operator runs with: `kopf build` and `kopf build --image` bake
 * them in, `kopf init`'s tasks pass them, the benchmark measures with them. A module of their own
 * so that the builders share them without importing each other.
 * @module
 */

/**
 * The V8 flags an operator runs best with, baked into the binary by `kopf build` (and used by the
 * scaffold's tasks and the benchmark):
 * - `--max-semi-space-size=8`: young-generation semi-spaces of at most 8 MiB instead of V8's 16.
 *   During a burst V8 grows them to the maximum at once; capped at 4, a 2,000-object backlog
 *   peaked at 121 instead of 143 MiB for the same CPU (round 3); once a cycle allocated less
 *   (round 4), 8 cost ~11% less CPU than 4 for the same peak (docs/performance.md, round 5).
 * - `--maglev-as-top-tier`: V8's mid-tier compiler (Maglev) is the last one; TurboFan never
 *   runs. An operator's code is short handlers between network waits: less compiling, and the
 *   optimising compiler's machine code is never paged in (round 7). No optimising compiler at
 *   all (`--no-maglev,--no-turbofan`) lowers a burst's peak further (1,000 objects: −8 to −11
 *   MiB; a 5,000-object backlog: 129 instead of 161 MiB) but costs CPU where handlers run all the
 *   time (steady creation +37–46%, a create burst +15–32%, side by side on a quiet machine;
 *   round 8, docs/performance.md): an option for a deployment short of memory, not the default.
 * - `--expose-gc`: the operator's own full collections (one every `process.burstGcCycles` cycles
 *   of a burst, one after it) as plain mark-compacts; without it, the collection the operator
 *   fetches at run time acts as a low-memory notification that also drops compiled code — a
 *   quarter of a restart's CPU (core/util/memory.ts; round 8, docs/performance.md).
 * - `--heap-growing-percent=40`: after each of its own full collections V8 lets the old
 *   generation grow by 40% of what survived (at least a few MiB) before the next, instead of up to
 *   4× when collections look cheap. A long burst's garbage then no longer piles up to three times
 *   the live heap: a 5,000-object backlog peaked at 113–115 instead of 140 MiB (status CRD) and
 *   121–123 instead of 133 (plain); a restart over 16,000 handled objects costs 13–26% more CPU
 *   (more full collections while it relists), other CPU figures moved within the noise of the
 *   runs (round 12, docs/performance.md). Small bursts are unchanged: their heap never reaches
 *   the first limit.
 *
 * V8 reads them only at start, so they cannot be set from inside; with `deno run`, pass
 * `--v8-flags=--max-semi-space-size=8,--maglev-as-top-tier,--expose-gc,--heap-growing-percent=40` (or set `DENO_V8_FLAGS`);
 * `tools/kopf` (the `kopf` command of a checkout) does.
 */
export const RUNTIME_V8_FLAGS: readonly string[] = Object.freeze([
  "--max-semi-space-size=8",
  "--maglev-as-top-tier",
  "--expose-gc",
  "--heap-growing-percent=40",
]);

/**
 * The Deno flags an operator runs with (`deno run`, `deno compile`): `--no-code-cache`. V8's code
 * cache saves compiling at start (tens of milliseconds for the framework); a long-running
 * process does not need it, and the cache's database stays mapped and resident (2-3 MiB at idle,
 * round 7).
 */
export const RUNTIME_DENO_FLAGS: readonly string[] = Object.freeze(["--no-code-cache"]);
