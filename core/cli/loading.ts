/**
 * Module loading for the command line: `kopf run FILES -m MODULES` and `kopf generate rbac`
 * import the handler files and modules with {@link loadModule}; the registrations happen as a
 * side effect of the import. A module that fails to load becomes one error that starts at the
 * place of the mistake (`file:line:col: …`), followed by Deno's code frame for a syntax error.
 * @module
 */

let imports = 0;

/**
 * Imports a handler file or module. Registrations happen as a side effect of the import.
 * @param target A path (relative to the working directory) or a module specifier.
 * @param isModule Whether it was given with `-m` (a specifier rather than a file).
 * @param fresh Import it anew even if this process imported it before (a new module instance).
 */
export async function loadModule(target: string, isModule: boolean, fresh = false): Promise<void> {
  const looksLikePath = !/^[a-z][a-z0-9+.-]*:/i.test(target);
  let url: string;
  if (looksLikePath) {
    const path = target.startsWith("/") ? target : `${Deno.cwd()}/${target}`;
    if (!isModule || target.startsWith(".") || target.startsWith("/")) {
      try {
        Deno.statSync(path);
      } catch {
        throw new Error(`No such file: ${target}`);
      }
    }
    url = new URL(`file://${path}`).href;
    // A query string makes a new module instance, so its registrations run again.
    if (fresh) url += `?kopf-import=${++imports}`;
  } else url = target;
  try {
    await import(url);
  } catch (error) {
    throw new Error(importFailure(error), { cause: error });
  }
}

/** The library's own code: registration mistakes are raised here but made elsewhere. */
const LIBRARY = new URL("../", import.meta.url).href;
/** A source location: in a stack frame, or after Deno's code frame of a syntax error. */
const LOCATION = /^\s*at (?:async )?(?:.*\()?((?:file|https?):\/\/[^\s()]+?):(\d+):(\d+)\)?$/;

/**
 * Why a handler module failed to load, in one line starting with the place of the mistake
 * (`file:line:col: …`), no stack: a syntax error or unresolvable import keeps Deno's location
 * and code frame (on the lines after); an error raised in the library by a registration (e.g.
 * an unknown option of `on.create`) names the user's line that called it.
 */
function importFailure(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  const lines = text.split("\n");
  const head = lines[0]!.trim();
  // Deno's module errors: the message, its code frame, then `at file:///…:line:col`.
  const at = lines.findLastIndex((line) => LOCATION.test(line));
  if (at > 0) {
    const [, url, line, col] = LOCATION.exec(lines[at]!)!;
    const frame = lines.slice(1, at).filter((l) => l.trim());
    return [`${displayPath(url!)}:${line}:${col}: ${head}`, ...frame].join("\n");
  }
  const frames = (error instanceof Error ? error.stack ?? "" : "").split("\n")
    .map((line) => LOCATION.exec(line)).filter((m) => m !== null);
  // Raised in the library, called from the user's module (above this file's import call).
  const importing = frames.findIndex((m) => m[1] === import.meta.url);
  const above = importing < 0 ? frames : frames.slice(0, importing);
  if (above[0]?.[1]?.startsWith(LIBRARY)) {
    const caller = above.find((m) => !m[1]!.startsWith(LIBRARY));
    if (caller) return `${displayPath(caller[1]!)}:${caller[2]}:${caller[3]}: ${head}`;
  }
  return head || "unknown error";
}

/** A module URL as the user would write it: a path relative to the working directory. */
function displayPath(url: string): string {
  if (!url.startsWith("file://")) return url;
  const path = decodeURIComponent(new URL(url).pathname);
  const cwd = `${Deno.cwd()}/`;
  return path.startsWith(cwd) ? path.slice(cwd.length) : path;
}
