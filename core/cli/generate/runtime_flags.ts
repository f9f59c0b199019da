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
 * - `--no-maglev`, `--no-turbofan`: no optimising compiler at all; V8 runs its bytecode
 *   interpreter (Ignition) and its baseline compiler (Sparkplug) only. An operator's code is short
 *   handlers between network waits, and the optimising compilers' work costs memory that stays:
 *   their compile zones in the C heap, deoptimisation data, optimised code, more old generation.
 *   A 5,000-object backlog peaked at 129 instead of 161 MiB (1,000: 95 instead of 106) for the
 *   same CPU (round 8, issue 31; docs/performance.md). TurboFan was off since round 7
 *   (`--maglev-as-top-tier`), for the same reason. WebAssembly has compilers of its own and is
 *   not affected.
 *
 * V8 reads them only at start, so they cannot be set from inside; with `deno run`, pass
 * `--v8-flags=--max-semi-space-size=8,--no-maglev,--no-turbofan` (or set `DENO_V8_FLAGS`);
 * `tools/kopf` (the `kopf` command of a checkout) does.
 */
export const RUNTIME_V8_FLAGS: readonly string[] = Object.freeze([
  "--max-semi-space-size=8",
  "--no-maglev",
  "--no-turbofan",
]);

/**
 * The Deno flags an operator runs with (`deno run`, `deno compile`): `--no-code-cache`. V8's code
 * cache saves compiling at start (tens of milliseconds for the framework); a long-running
 * process does not need it, and the cache's database stays mapped and resident (2-3 MiB at idle,
 * round 7).
 */
export const RUNTIME_DENO_FLAGS: readonly string[] = Object.freeze(["--no-code-cache"]);
