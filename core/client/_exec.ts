/**
 * Private to `config.ts`: credentials whose material lives outside the kubeconfig and must be
 * fetched again when it rotates (token files and exec credential plugins), plus the
 * {@link ConfigError} and small readers they share with `config.ts` (defined here so that the
 * two modules do not import each other).
 * @module
 */

import { isAbsolute, resolve } from "node:path";
import type { Credentials } from "./connection.ts";

/** Reads a text file; must reject with `Deno.errors.NotFound` when the file does not exist. */
export type ReadFileFn = (path: string) => Promise<string>;

/**
 * The client configuration (kubeconfig, in-cluster service account, exec plugin) is missing,
 * malformed or unusable. The message is one line that names the file or plugin and says what
 * to fix; retrying without changing the configuration does not help.
 */
export class ConfigError extends Error {
  /**
   * Creates the error.
   *
   * @param message What is wrong and where; line breaks are folded into spaces.
   * @param options The underlying error, if any.
   */
  constructor(message: string, options?: ErrorOptions) {
    super(message.trim().replace(/\s*\n\s*/g, " "), options);
    this.name = "ConfigError";
  }
}

/**
 * The first non-empty line of some external text (stderr, a parser's message), shortened.
 *
 * @param text Any text.
 * @param max Longest result in characters.
 * @returns One trimmed line without a trailing period.
 */
export function firstLine(text: string, max = 300): string {
  const line = text.split("\n").map((l) => l.trim()).find((l) => l !== "") ?? "";
  const short = line.length > max ? `${line.slice(0, max - 1)}…` : line;
  return short.replace(/[.:]+$/, "");
}

/**
 * The message of any thrown value, on one line.
 *
 * @param error Anything thrown.
 * @returns A short description.
 */
export function describe(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  // Deno appends "(os error 2): readfile '/path'"; the callers name the path already.
  return firstLine(text.replace(/\s*\(os error \d+\)(: \w+ '.*')?$/m, ""));
}

/**
 * Whether a value is a plain mapping (a YAML/JSON object, not a list or null).
 *
 * @param value Anything.
 * @returns `true` for objects that are not arrays.
 */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A string field of a kubeconfig entry.
 *
 * @param body The entry.
 * @param field The key.
 * @param where Prefix for the message, e.g. `Broken kubeconfig /path: user "dev"`.
 * @returns The value, or `undefined` when absent or empty.
 * @throws {ConfigError} when the value is not a string (e.g. a password YAML read as a number).
 */
export function optionalString(
  body: Record<string, unknown>,
  field: string,
  where: string,
): string | undefined {
  const value = body[field];
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value !== "string") {
    throw new ConfigError(`${where} has ${field} that is not a string; quote it in the YAML`);
  }
  return value;
}

/**
 * Reads a file that may legitimately be missing.
 *
 * @param path The file.
 * @param readFile The reader.
 * @param context Message prefix for failures other than a missing file.
 * @returns The text, or `undefined` when the file does not exist.
 * @throws {ConfigError} when the file exists but cannot be read.
 */
export async function readOptional(
  path: string,
  readFile: ReadFileFn,
  context = `Cannot read ${path}`,
): Promise<string | undefined> {
  try {
    return await readFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw new ConfigError(`${context}: ${describe(error)}`, { cause: error });
  }
}

/**
 * Base64 of the UTF-8 bytes of a text (`btoa` alone rejects characters beyond Latin-1).
 *
 * @param text Any text.
 * @returns Its standard base64 encoding.
 */
export function base64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  return btoa(Array.from(bytes, (byte) => String.fromCharCode(byte)).join(""));
}

/**
 * Credentials with a fixed `Authorization` header: nothing to refresh, so a 401 is final.
 *
 * @param authorization The header value, e.g. `Bearer abc`.
 * @returns Credentials whose `invalidate()` resolves `false`.
 */
export function staticCredentials(authorization: string): Credentials {
  return {
    headers: () => Promise.resolve({ Authorization: authorization }),
    invalidate: () => Promise.resolve(false),
  };
}

/** Settings shared by the refreshing credentials. */
export interface RefreshOptions {
  /** Reads files. */
  readonly readFile: ReadFileFn;
  /** Clock in milliseconds since the epoch (injectable for tests). */
  readonly now: () => number;
}

/**
 * A bearer token read from a file and re-read every `refreshMs` and after a 401, because
 * projected service-account tokens (and tokens written by sidecars) rotate underneath us.
 */
export class TokenFileCredentials implements Credentials {
  readonly #path: string;
  readonly #subject: string;
  readonly #options: RefreshOptions;
  readonly #refreshMs: number;
  #token: string | undefined;
  #readAt = 0;

  /**
   * Prepares to read the file; nothing is read until the first `headers()`.
   *
   * @param path Absolute path of the token file.
   * @param subject Start of error messages, e.g. `Cannot use the service account token`.
   * @param options File reader and clock.
   * @param refreshMs How long a read token is trusted before re-reading the file.
   */
  constructor(path: string, subject: string, options: RefreshOptions, refreshMs = 60_000) {
    this.#path = path;
    this.#subject = subject;
    this.#options = options;
    this.#refreshMs = refreshMs;
  }

  /**
   * The current token, read again when older than `refreshMs`.
   *
   * @returns An `Authorization: Bearer` header with the current token.
   * @throws {ConfigError} when the file cannot be read and no earlier token is known.
   */
  async headers(): Promise<Record<string, string>> {
    if (this.#token === undefined || this.#options.now() - this.#readAt >= this.#refreshMs) {
      try {
        await this.#read();
      } catch (error) {
        // A rotation in progress can briefly remove the file: keep the last good token.
        if (this.#token === undefined) throw error;
      }
    }
    return { Authorization: `Bearer ${this.#token}` };
  }

  /**
   * Re-reads the file after a 401.
   *
   * @returns `true` when re-reading the file produced a different token.
   */
  async invalidate(): Promise<boolean> {
    const old = this.#token;
    try {
      await this.#read();
    } catch {
      return false;
    }
    return this.#token !== old;
  }

  async #read(): Promise<void> {
    const where = `${this.#subject}: ${this.#path}`;
    const text = await readOptional(this.#path, this.#options.readFile, `${where} cannot be read`);
    if (text === undefined) throw new ConfigError(`${where} does not exist`);
    if (!text.trim()) throw new ConfigError(`${where} is empty`);
    this.#token = text.trim();
    this.#readAt = this.#options.now();
  }
}

/** A validated `exec` stanza of a kubeconfig user. */
export interface ExecConfig {
  /** `client.authentication.k8s.io/v1` or `…/v1beta1`. */
  readonly apiVersion: string;
  /** Program to run: absolute, or a bare name looked up on `PATH`. */
  readonly command: string;
  /** Its arguments. */
  readonly args: readonly string[];
  /** Extra environment variables on top of our own environment. */
  readonly env: Readonly<Record<string, string>>;
  /** The plugin's advice on how to install it, shown when it fails. */
  readonly installHint?: string | undefined;
  /** `spec.cluster` of `KUBERNETES_EXEC_INFO` when `provideClusterInfo` is set. */
  readonly cluster?: Readonly<Record<string, unknown>> | undefined;
  /** Who uses the plugin, for messages, e.g. `user "dev" in /home/me/.kube/config`. */
  readonly owner: string;
}

const API_VERSIONS = ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"];

/**
 * Validates the `exec` stanza of a kubeconfig user.
 *
 * `interactiveMode` may be `Never` or `IfAvailable` (both mean non-interactive for us, as an
 * operator has no terminal) or absent; `Always` is rejected. A relative `command` containing a
 * path separator is resolved against the kubeconfig's directory, as kubectl does.
 *
 * @param raw The value of the user's `exec` key.
 * @param file The kubeconfig file that defines the user.
 * @param user The user's name.
 * @param cluster The `spec.cluster` to pass when `provideClusterInfo` is set.
 * @returns The validated settings.
 * @throws {ConfigError} when the stanza is malformed or asks for something unsupported.
 */
export function parseExecConfig(
  raw: unknown,
  file: string,
  user: string,
  cluster: Record<string, unknown>,
): ExecConfig {
  const where = `kubeconfig ${file}: user "${user}" exec`;
  const broken = (problem: string) => new ConfigError(`Broken ${where} ${problem}`);
  if (!isRecord(raw)) throw broken("is not a mapping");
  const { apiVersion, command, args, env, installHint, interactiveMode } = raw;
  if (typeof apiVersion !== "string" || !API_VERSIONS.includes(apiVersion)) {
    const got = apiVersion === undefined
      ? "no apiVersion"
      : `apiVersion ${JSON.stringify(apiVersion)}`;
    throw new ConfigError(`Unsupported ${where} has ${got}; use ${API_VERSIONS.join(" or ")}`);
  }
  if (typeof command !== "string" || command.trim() === "") throw broken("has no command");
  if (args != null && !(Array.isArray(args) && args.every((a) => typeof a === "string"))) {
    throw broken("args is not a list of strings");
  }
  const envMap: Record<string, string> = {};
  if (env != null && !Array.isArray(env)) throw broken("env is not a list");
  for (const item of env ?? []) {
    if (!isRecord(item) || typeof item.name !== "string" || typeof item.value !== "string") {
      throw broken("env has an entry that is not {name: string, value: string}");
    }
    envMap[item.name] = item.value;
  }
  if (installHint != null && typeof installHint !== "string") {
    throw broken("installHint is not a string");
  }
  if (interactiveMode === "Always") {
    throw new ConfigError(
      `Unsupported ${where} has interactiveMode Always, but an operator never runs interactively; ` +
        "log in beforehand and set interactiveMode to Never or IfAvailable",
    );
  }
  if (interactiveMode != null && interactiveMode !== "Never" && interactiveMode !== "IfAvailable") {
    throw broken(
      `interactiveMode ${JSON.stringify(interactiveMode)} is not Never, IfAvailable or Always`,
    );
  }
  // Like kubectl: "./bin/plugin" is relative to the kubeconfig, a bare "plugin" is looked up on PATH.
  const hasSeparator = command.includes("/") ||
    (Deno.build.os === "windows" && command.includes("\\"));
  const resolved = hasSeparator && !isAbsolute(command) ? resolve(file, "..", command) : command;
  return {
    apiVersion,
    command: resolved,
    args: Array.isArray(args) ? args.map(String) : [],
    env: envMap,
    installHint: typeof installHint === "string" ? installHint : undefined,
    cluster: raw.provideClusterInfo === true ? cluster : undefined,
    owner: `user "${user}" in ${file}`,
  };
}

/** Re-run the plugin this long before its token expires, so requests never carry a stale one. */
const EXPIRY_MARGIN_MS = 10_000;
/** A plugin that hangs (e.g. waiting for a browser login) must not block the operator forever. */
const EXEC_TIMEOUT_MS = 60_000;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * A bearer token from an exec credential plugin (`aws eks get-token`, `gke-gcloud-auth-plugin`,
 * `kubelogin`, …), cached until shortly before `status.expirationTimestamp` and fetched again
 * after a 401. Concurrent callers share one run of the plugin. Plugins that return a client
 * certificate (`status.clientCertificateData`) instead of a token are not supported: client
 * certificates are fixed when the TLS client is created, so they could not be rotated.
 */
export class ExecCredentials implements Credentials {
  readonly #config: ExecConfig;
  readonly #now: () => number;
  #cached: { token: string; expiresAt: number | undefined } | undefined;
  #running: Promise<string> | undefined;

  /**
   * Prepares to run the plugin; nothing runs until the first `headers()`.
   *
   * @param config The validated `exec` stanza.
   * @param now Clock in milliseconds since the epoch.
   */
  constructor(config: ExecConfig, now: () => number) {
    this.#config = config;
    this.#now = now;
  }

  /**
   * The cached token, or a fresh one from running the plugin.
   *
   * @param signal Stops waiting for the plugin (the shared run itself continues).
   * @returns An `Authorization: Bearer` header.
   * @throws {ConfigError} when the plugin cannot be run, fails, or prints no usable token.
   */
  async headers(signal?: AbortSignal): Promise<Record<string, string>> {
    const cached = this.#cached;
    if (
      cached &&
      (cached.expiresAt === undefined || this.#now() < cached.expiresAt - EXPIRY_MARGIN_MS)
    ) {
      return { Authorization: `Bearer ${cached.token}` };
    }
    this.#running ??= this.#run().finally(() => this.#running = undefined);
    return { Authorization: `Bearer ${await abortable(this.#running, signal)}` };
  }

  /**
   * Drops the cached token after a 401.
   *
   * @returns Always `true`: running the plugin again may yield a fresh token.
   */
  invalidate(): Promise<boolean> {
    this.#cached = undefined;
    return Promise.resolve(true);
  }

  async #run(): Promise<string> {
    const { apiVersion, command, args, cluster } = this.#config;
    const spec = { interactive: false, ...(cluster ? { cluster } : {}) };
    const info = JSON.stringify({ apiVersion, kind: "ExecCredential", spec });
    let output: Deno.CommandOutput;
    try {
      output = await new Deno.Command(command, {
        args: [...args],
        env: { ...this.#config.env, KUBERNETES_EXEC_INFO: info },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(EXEC_TIMEOUT_MS),
      }).output();
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) this.#fail("was not found", error);
      this.#fail(`could not be run: ${describe(error)}`, error);
    }
    const stderr = firstLine(new TextDecoder().decode(output.stderr));
    if (!output.success) {
      const how = output.signal
        ? `was killed by ${output.signal}`
        : `exited with code ${output.code}`;
      this.#fail(`${how} (run non-interactively)${stderr ? `: ${stderr}` : ""}`);
    }
    const { token, expiresAt } = this.#parse(new TextDecoder().decode(output.stdout));
    this.#cached = { token, expiresAt };
    return token;
  }

  #parse(stdout: string): { token: string; expiresAt: number | undefined } {
    let credential: unknown;
    try {
      credential = JSON.parse(stdout);
    } catch (error) {
      this.#fail(`printed no JSON but ${JSON.stringify(firstLine(stdout, 80))}`, error);
    }
    if (!isRecord(credential) || credential.kind !== "ExecCredential") {
      this.#fail("printed something other than an ExecCredential object");
    }
    if (credential.apiVersion !== this.#config.apiVersion) {
      const printed = JSON.stringify(credential.apiVersion ?? null);
      this.#fail(`printed apiVersion ${printed}, expected "${this.#config.apiVersion}"`);
    }
    const status = isRecord(credential.status) ? credential.status : {};
    const { token, expirationTimestamp: expiry } = status;
    if (typeof token !== "string" || token === "") {
      if (status.clientCertificateData !== undefined) {
        this.#fail("returned a client certificate, which is not supported; use a token plugin");
      }
      this.#fail("printed an ExecCredential without status.token");
    }
    if (expiry === undefined || expiry === null) return { token, expiresAt: undefined };
    const expiresAt = typeof expiry === "string" && RFC3339.test(expiry) ? Date.parse(expiry) : NaN;
    if (Number.isNaN(expiresAt)) {
      this.#fail(`printed status.expirationTimestamp ${JSON.stringify(expiry)}, not RFC 3339`);
    }
    return { token, expiresAt };
  }

  #fail(problem: string, cause?: unknown): never {
    const { command, owner, installHint } = this.#config;
    const hint = installHint ? `; ${installHint}` : "";
    throw new ConfigError(`Exec plugin ${command} for ${owner} ${problem}${hint}`, { cause });
  }
}

/** Waits for a shared promise, but lets one caller give up early without cancelling it. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
