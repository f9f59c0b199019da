/**
 * Running the real Python Kopf against the shared control plane, for state-compatibility tests.
 *
 * The virtualenv comes from `tools/python-kopf.sh` (a pinned `kopf` from PyPI, cached outside
 * the repo). {@link PYTHON_KOPF} is resolved once, when this module loads, so that tests can
 * compute `ignore` from it; {@link runPythonKopf} starts `kopf run --standalone -n <namespace>`
 * with a handlers file from `tests/compat/python/` and captures its output.
 * @module
 */

import { sharedControlPlane } from "../testing/control_plane.ts";
import { captureLines, eventually, terminate } from "./_support.ts";

/** The Python Kopf installation, or why there is none. */
export type PythonKopfAvailability =
  | { readonly available: true; readonly venv: string; readonly version: string }
  | { readonly available: false; readonly reason: string };

function localPath(relative: string): string {
  return decodeURIComponent(new URL(relative, import.meta.url).pathname);
}

/** The handlers file used by the compatibility tests. */
export const COMPAT_HANDLERS: string = localPath("./compat/python/handlers.py");

/** A field handler with an explicit id (`field_fn` on `spec.field`), for the handler-id tests. */
export const COMPAT_FIELD_HANDLERS: string = localPath("./compat/python/field_handlers.py");

/** The Python half of the twin test (tests/twin_test.ts) on Kopf's status-subresource CRD. */
export const TWIN_HANDLERS: string = localPath("./compat/python/twin_handlers.py");

async function locate(): Promise<PythonKopfAvailability> {
  if (Deno.env.get("KOPF_TS_SKIP_PYTHON_KOPF")) {
    return { available: false, reason: "KOPF_TS_SKIP_PYTHON_KOPF is set" };
  }
  try {
    const output = await new Deno.Command("bash", {
      args: [localPath("../tools/python-kopf.sh")],
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
    }).output();
    const stderr = new TextDecoder().decode(output.stderr).trim();
    if (!output.success) {
      return {
        available: false,
        reason: `tools/python-kopf.sh failed (exit ${output.code}): ${stderr.split("\n").pop()}`,
      };
    }
    const venv = new TextDecoder().decode(output.stdout).trim().split("\n").pop()!;
    const version = await new Deno.Command(`${venv}/bin/kopf`, {
      args: ["--version"],
      stdout: "piped",
      stderr: "null",
    }).output();
    if (!version.success) {
      return { available: false, reason: `${venv}/bin/kopf --version failed` };
    }
    const text = new TextDecoder().decode(version.stdout).trim();
    return { available: true, venv, version: text.replace(/^kopf, version /, "") };
  } catch (error) {
    return { available: false, reason: `cannot run tools/python-kopf.sh: ${error}` };
  }
}

/** Whether Python Kopf can be run here (resolved once, at module load). */
export const PYTHON_KOPF: PythonKopfAvailability = await locate();

if (!PYTHON_KOPF.available) {
  console.warn(
    `Python Kopf is unavailable, its compatibility tests are skipped: ${PYTHON_KOPF.reason}`,
  );
}

/** A Python Kopf operator running as a subprocess. */
export interface PythonKopf extends AsyncDisposable {
  /** Output lines (stdout and stderr, interleaved as they come) so far. */
  readonly lines: string[];
  /** Waits until an output line matches; fails with the whole output otherwise. */
  waitForLine(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Lines matching a pattern so far. */
  matching(pattern: RegExp): string[];
  /** Sends SIGTERM (SIGKILL after 15 s) and waits for the exit code. */
  stop(): Promise<number>;
  /** Resolves with the exit code when the process exits. */
  readonly exited: Promise<number>;
}

/**
 * Starts `kopf run --standalone -n NAMESPACE HANDLERS` with the shared plane's kubeconfig.
 * @param namespace The namespace to serve.
 * @param options The handlers file (default {@link COMPAT_HANDLERS}), extra environment, and
 *   `verbose` for Kopf's debug logs.
 */
export async function runPythonKopf(
  namespace: string,
  options: { handlers?: string; env?: Record<string, string>; verbose?: boolean } = {},
): Promise<PythonKopf> {
  if (!PYTHON_KOPF.available) throw new Error(`Python Kopf is unavailable: ${PYTHON_KOPF.reason}`);
  const plane = await sharedControlPlane();
  const args = ["run", "--standalone", "-n", namespace];
  if (options.verbose) args.push("--verbose");
  args.push(options.handlers ?? COMPAT_HANDLERS);
  const child = new Deno.Command(`${PYTHON_KOPF.venv}/bin/kopf`, {
    args,
    env: {
      KUBECONFIG: plane.kubeconfigPath,
      PYTHONUNBUFFERED: "1",
      NO_COLOR: "1",
      ...options.env,
    },
    stdout: "piped",
    stderr: "piped",
    stdin: "null",
  }).spawn();
  const { lines, exited } = captureLines(child);
  let stopping: Promise<number> | undefined;
  const stop = () => stopping ??= terminate(child, exited);
  return {
    lines,
    exited,
    matching: (pattern) => lines.filter((l) => pattern.test(l)),
    waitForLine: (pattern, timeoutMs = 30_000) =>
      eventually(
        () => lines.find((l) => pattern.test(l)),
        timeoutMs,
        `Python Kopf output ${pattern}; got:\n${lines.join("\n")}`,
      ),
    stop,
    [Symbol.asyncDispose]: async () => {
      await stop();
    },
  };
}
