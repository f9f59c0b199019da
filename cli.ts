#!/usr/bin/env -S deno run -A
/**
 * The `kopf` command: `deno run -A cli.ts run handlers.ts`, or the binary made by
 * `deno task compile`. Handler files are loaded by dynamic import.
 * @module
 */

import { main } from "./core/api/cli.ts";

if (import.meta.main) Deno.exit(await main(Deno.args));
