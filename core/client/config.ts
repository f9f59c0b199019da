/**
 * Where the API server is and how to authenticate: kubeconfig files (merged as kubectl merges
 * them), the in-cluster service account, or whichever of the two applies ({@link autoConfigure}).
 *
 * Everything that can be wrong in the configuration surfaces as one {@link ConfigError} with a
 * single-line message naming the file and the entry, never as a `TypeError` from deep inside.
 * Not supported: `auth-provider` (removed from kubectl; use an exec plugin), exec plugins that
 * return client certificates, `tls-server-name` (ignored), and `proxy-url` (refused with a
 * {@link ConfigError} that names `HTTPS_PROXY`, which the client honours, as the alternative).
 * `insecure-skip-tls-verify: true` is obeyed with a warning (the client's own connections skip
 * the check; with a proxy in the environment it is refused: Deno's `fetch` cannot skip it).
 * @module
 */

import { getLogger } from "@logtape/logtape";
import { delimiter, dirname, join, resolve } from "node:path";
import { type ConnectionInfo, type Credentials, NO_CREDENTIALS } from "./connection.ts";
import { currentOperatorScope } from "./current.ts";
import {
  base64,
  ConfigError,
  describe,
  ExecCredentials,
  isRecord,
  optionalString,
  parseExecConfig,
  type ReadFileFn,
  readOptional,
  type RefreshOptions,
  staticCredentials,
  TokenFileCredentials,
} from "./_exec.ts";

export { ConfigError, type ReadFileFn };

/** What every loader reads from the outside world; replaceable for tests. */
export interface EnvironmentOptions {
  /** Environment variables (`KUBECONFIG`, `HOME`, `KUBERNETES_SERVICE_*`). @default Deno.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Reads the configuration and the files it references. @default Deno.readTextFile */
  readonly readFile?: ReadFileFn;
  /** Clock for token expiry and re-reads, in ms since the epoch. @default Date.now */
  readonly now?: () => number;
  /**
   * Receives warnings about the configuration (e.g. `insecure-skip-tls-verify: true`), one per
   * load. @default a warning on the `kopf.client` logger (LogTape)
   */
  readonly warn?: (message: string) => void;
}

/** Options of {@link loadKubeconfig}. */
export interface KubeconfigOptions extends EnvironmentOptions {
  /** Kubeconfig files to merge, instead of `KUBECONFIG` or `~/.kube/config`. */
  readonly paths?: readonly string[];
  /** Context to use instead of the files' `current-context`. */
  readonly context?: string;
}

/** Options of {@link loadInCluster}. */
export interface InClusterOptions extends EnvironmentOptions {
  /** Prefix of `/var/run/secrets/kubernetes.io/serviceaccount` (for tests). @default "" */
  readonly root?: string;
}

/** Options of {@link autoConfigure}: those of both sources. */
export type AutoConfigureOptions = KubeconfigOptions & InClusterOptions;

/** Environment variables by name. */
type Env = Readonly<Record<string, string | undefined>>;

/** Where the server is and how to trust it. */
type Tls = Pick<ConnectionInfo, "server" | "caPem" | "insecureSkipTlsVerify">;

/** A named entry of `clusters`, `contexts` or `users`, with the file that defined it. */
interface Entry {
  readonly name: string;
  readonly body: Record<string, unknown>;
  readonly file: string;
}

/** Several kubeconfig files merged: the first file to define a name wins. */
interface Merged {
  readonly files: string[];
  currentContext?: string | undefined;
  readonly clusters: Map<string, Entry>;
  readonly contexts: Map<string, Entry>;
  readonly users: Map<string, Entry>;
}

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** The environment variables that make the HTTP client go through a proxy (and `fetch`). */
const PROXY_VARIABLES = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"];

/** The host of a server URL, for a command-line hint. */
function hostOf(server: string): string {
  try {
    return new URL(server).hostname;
  } catch {
    return server;
  }
}

/**
 * Whether this Deno process runs with `--unsafely-ignore-certificate-errors` (then `fetch`
 * skips the verification too). Read from `/proc/self/cmdline`; `false` where it cannot be read.
 */
function ignoresCertificateErrors(): boolean {
  try {
    const flag = "--unsafely-ignore-certificate-errors";
    return Deno.readTextFileSync("/proc/self/cmdline").split("\0")
      .some((arg) => arg === flag || arg.startsWith(`${flag}=`));
  } catch {
    return false;
  }
}

/**
 * Loads a kubeconfig like kubectl: the `paths` given, else every file in `KUBECONFIG` (merged;
 * the first file to define a cluster, user or context name wins, `current-context` comes from
 * the first file that sets it, missing files are skipped), else `~/.kube/config`.
 *
 * @param options Files, context, environment and file reader to use instead of the defaults.
 * @returns The server, TLS material, default namespace and credentials of the chosen context.
 * @throws {ConfigError} when no file exists or the chosen context cannot be used.
 */
export async function loadKubeconfig(options: KubeconfigOptions = {}): Promise<ConnectionInfo> {
  const { env, refresh } = defaults(options);
  const merged = await readKubeconfigs(kubeconfigPaths(options, env), env, refresh.readFile);
  const files = merged.files.join(delimiter);
  const contextName = options.context || merged.currentContext;
  if (!contextName) {
    throw new ConfigError(
      `No context selected in kubeconfig ${files}: current-context is not set; ` +
        `pass a context or run "kubectl config use-context NAME"`,
    );
  }
  const context = merged.contexts.get(contextName);
  if (!context) {
    const known = [...merged.contexts.keys()].map((name) => `"${name}"`).join(", ") || "none";
    throw new ConfigError(
      `Unknown context "${contextName}" in kubeconfig ${files}; defined contexts: ${known}`,
    );
  }
  const where = `Broken kubeconfig ${context.file}: context "${contextName}"`;
  const cluster = lookUp(merged.clusters, context, "cluster", where);
  if (!cluster) throw new ConfigError(`${where} names no cluster`);
  const user = lookUp(merged.users, context, "user", where);
  const namespace = context.body.namespace;
  const tls = await readCluster(cluster, refresh.readFile);
  if (tls.insecureSkipTlsVerify) {
    const about =
      `Kubeconfig ${cluster.file}: cluster "${cluster.name}" sets insecure-skip-tls-verify`;
    // Only the client's own connections can skip the check (node:tls, see _sockets.ts); with a
    // proxy, requests go through Deno's fetch, which cannot, short of the process-wide flag.
    const proxy = PROXY_VARIABLES.find((name) => env[name]);
    if (proxy && !ignoresCertificateErrors()) {
      throw new ConfigError(
        `${about}, which cannot be honoured through the proxy in ${proxy}; provide the ` +
          `server's CA with certificate-authority(-data) instead, or run Deno with ` +
          `--unsafely-ignore-certificate-errors=${hostOf(tls.server)}`,
      );
    }
    const warn = options.warn ?? ((message: string) => getLogger(["kopf", "client"]).warn(message));
    warn(
      `${about}: the API server's certificate is not verified, so anyone on the network path ` +
        `can impersonate it and take the credentials; set certificate-authority(-data) instead`,
    );
  }
  const auth = await readUser(user, tls, cluster, refresh);
  return {
    ...tls,
    ...auth,
    namespace: typeof namespace === "string" && namespace ? namespace : "default",
    source: `kubeconfig ${files}, context "${contextName}"`,
  };
}

/**
 * Loads the pod's service account: the API server from `KUBERNETES_SERVICE_HOST` and
 * `KUBERNETES_SERVICE_PORT`, the CA, token and namespace from the mounted secret directory.
 * The token is re-read every minute and after a 401, as the kubelet rotates projected tokens.
 *
 * @param options A root directory, environment and file reader to use instead of the real ones.
 * @returns The in-cluster connection; namespace `default` if the namespace file is missing.
 * @throws {ConfigError} when not inside a cluster or the CA or token cannot be read.
 */
export async function loadInCluster(options: InClusterOptions = {}): Promise<ConnectionInfo> {
  const { env, refresh } = defaults(options);
  const host = env.KUBERNETES_SERVICE_HOST?.trim();
  const port = env.KUBERNETES_SERVICE_PORT?.trim();
  if (!host || !port) {
    throw new ConfigError(
      "Not running inside a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set",
    );
  }
  if (!/^\d{1,5}$/.test(port)) {
    throw new ConfigError(
      `Broken in-cluster environment: KUBERNETES_SERVICE_PORT "${port}" is not a port`,
    );
  }
  // An IPv6 address needs brackets in a URL, else its colons read as the port separator.
  const bracketed = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
  const server = `https://${bracketed}:${port}`;
  const dir = join(options.root ?? "", SERVICE_ACCOUNT_DIR);
  const subject = "Cannot use the in-cluster service account";
  const credentials = new TokenFileCredentials(join(dir, "token"), `${subject} token`, refresh);
  await credentials.headers(); // Fails now, with a clear message, if there is no token.
  const ca = join(dir, "ca.crt");
  const caPem = await readOptional(ca, refresh.readFile, `${subject} CA: ${ca} cannot be read`);
  if (caPem === undefined) throw new ConfigError(`${subject} CA: ${ca} does not exist`);
  const namespace = (await readOptional(join(dir, "namespace"), refresh.readFile))?.trim();
  return {
    server,
    caPem,
    credentials,
    namespace: namespace || "default",
    source: `in-cluster service account ${dir} (API server ${server})`,
  };
}

/**
 * Picks the configuration as an operator should: an explicitly requested kubeconfig file or
 * context; else, inside a running operator, that operator's connection (its `--embedded`,
 * `--kubeconfig`, `--context` or login; the rule is in `current.ts`); else the in-cluster service
 * account when `KUBERNETES_SERVICE_HOST` is set (falling back to the kubeconfig if it turns out
 * unusable); else the kubeconfig.
 *
 * @param options Options of both {@link loadKubeconfig} and {@link loadInCluster}.
 * @returns The first configuration that loads.
 * @throws {ConfigError} naming why each attempted source failed.
 */
export async function autoConfigure(options: AutoConfigureOptions = {}): Promise<ConnectionInfo> {
  if (options.paths?.length || options.context) return await loadKubeconfig(options);
  // Inside a running operator, its own cluster (see current.ts for the rule).
  const scope = options.env || options.readFile ? undefined : currentOperatorScope();
  if (scope?.connection) return scope.connection;
  if (scope?.paths.length || scope?.context) {
    return await loadKubeconfig({
      ...options,
      ...(scope.paths.length ? { paths: [...scope.paths] } : {}),
      ...(scope.context ? { context: scope.context } : {}),
    });
  }
  const { env } = defaults(options);
  let inCluster = "KUBERNETES_SERVICE_HOST is unset";
  if (env.KUBERNETES_SERVICE_HOST) {
    try {
      return await loadInCluster(options);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      inCluster = error.message;
    }
  }
  try {
    return await loadKubeconfig(options);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(
      `No usable Kubernetes configuration: in-cluster: ${inCluster}; kubeconfig: ${error.message}`,
      { cause: error },
    );
  }
}

/** The options' environment, file reader and clock, or the real ones. */
function defaults(options: EnvironmentOptions): { env: Env; refresh: RefreshOptions } {
  const readFile = options.readFile ?? Deno.readTextFile;
  return {
    env: options.env ?? Deno.env.toObject(),
    refresh: { readFile, now: options.now ?? Date.now },
  };
}

/** The kubeconfig files to merge, in order of precedence. */
function kubeconfigPaths(
  options: KubeconfigOptions,
  env: Env,
): { paths: string[]; origin: string } {
  if (options.paths?.length) return { paths: [...options.paths], origin: "the given paths" };
  const fromEnv = (env.KUBECONFIG ?? "").split(delimiter).filter((path) => path.trim() !== "");
  if (fromEnv.length) return { paths: [...new Set(fromEnv)], origin: "KUBECONFIG" };
  const home = env.HOME || env.USERPROFILE;
  if (!home) {
    throw new ConfigError(
      "No kubeconfig found: KUBECONFIG and HOME are unset; set KUBECONFIG or run inside a cluster",
    );
  }
  return { paths: [join(home, ".kube", "config")], origin: "default" };
}

/** Reads, parses and merges the files that exist. */
async function readKubeconfigs(
  { paths, origin }: { paths: string[]; origin: string },
  env: Env,
  readFile: ReadFileFn,
): Promise<Merged> {
  const merged: Merged = { files: [], clusters: new Map(), contexts: new Map(), users: new Map() };
  for (const path of paths.map((p) => resolve(p))) {
    const text = await readOptional(path, readFile, `Cannot read kubeconfig ${path}`);
    if (text === undefined) continue;
    merged.files.push(path);
    // Loaded on first use: an operator in a cluster (service account) never needs YAML. js-yaml
    // as an ES module costs the process about 3 MiB; the \`yaml\` package used elsewhere (for its
    // documents with comments) is CommonJS under Deno, whose loader brings about 10 MiB along.
    // The core schema: timestamps (an auth provider's \`expiry\`) stay strings, as in \`yaml\`.
    const { CORE_SCHEMA, load } = await import("js-yaml");
    mergeInto(merged, path, parseKubeconfig(path, text, (t) => load(t, { schema: CORE_SCHEMA })));
  }
  if (merged.files.length) return merged;
  if (origin === "default") {
    throw new ConfigError(
      `No kubeconfig found: KUBECONFIG is unset and ${paths[0]} does not exist; ` +
        "set KUBECONFIG or run inside a cluster",
    );
  }
  const which = origin === "KUBECONFIG" ? `KUBECONFIG=${env.KUBECONFIG}` : paths.join(", ");
  throw new ConfigError(`No kubeconfig found: none of the files exist (${which})`);
}

/** The error for a malformed kubeconfig file. */
function broken(file: string, problem: string): ConfigError {
  return new ConfigError(`Broken kubeconfig ${file}: ${problem}`);
}

/** Parses one file into its top-level mapping (an empty file is an empty kubeconfig). */
function parseKubeconfig(
  path: string,
  text: string,
  parse: (text: string) => unknown,
): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (error) {
    // js-yaml names the place as "(line:column)" after its reason, and snippets the text after:
    // say it in words, without the snippet (it could show a token).
    const mark = (error as { mark?: { line?: number; column?: number } })?.mark;
    const reason = (error as { reason?: string })?.reason;
    const where = mark?.line !== undefined
      ? `${reason ?? "cannot parse"} at line ${mark.line + 1}, column ${(mark.column ?? 0) + 1}`
      : describe(error);
    throw new ConfigError(`Broken kubeconfig ${path}: invalid YAML: ${where}`, {
      cause: error,
    });
  }
  if (doc === null || doc === undefined) return {};
  if (!isRecord(doc)) throw broken(path, `the top level is not a mapping`);
  return doc;
}

/** Adds one file's entries to `merged` unless an earlier file defined the same name. */
function mergeInto(merged: Merged, path: string, doc: Record<string, unknown>): void {
  const current = doc["current-context"];
  if (current !== undefined && current !== null && typeof current !== "string") {
    throw broken(path, `current-context is not a string`);
  }
  merged.currentContext ||= current || undefined;
  const lists = [["clusters", "cluster"], ["contexts", "context"], ["users", "user"]] as const;
  for (const [key, field] of lists) {
    const list = doc[key];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) throw broken(path, `${key} is not a list`);
    list.forEach((item: unknown, index) => {
      if (!isRecord(item)) throw broken(path, `${key}[${index}] is not a mapping`);
      const { name } = item;
      if (typeof name !== "string" || !name) throw broken(path, `${key}[${index}] has no name`);
      const body = item[field] ?? {};
      if (!isRecord(body)) throw broken(path, `${field} "${name}" is not a mapping`);
      if (!merged[key].has(name)) merged[key].set(name, { name, body, file: path });
    });
  }
}

/** Finds the cluster or user that a context names (`undefined` if it names none). */
function lookUp(
  entries: Map<string, Entry>,
  context: Entry,
  field: "cluster" | "user",
  where: string,
): Entry | undefined {
  const name = context.body[field];
  if (name === undefined || name === null || name === "") return undefined;
  if (typeof name !== "string") throw new ConfigError(`${where}: ${field} is not a string`);
  const entry = entries.get(name);
  if (!entry) {
    throw new ConfigError(`${where} names ${field} "${name}" which is not defined`);
  }
  return entry;
}

/** The server URL and TLS settings of a cluster entry. */
async function readCluster(
  cluster: Entry,
  readFile: ReadFileFn,
): Promise<Tls> {
  const where = `Broken kubeconfig ${cluster.file}: cluster "${cluster.name}"`;
  const raw = cluster.body.server;
  if (typeof raw !== "string" || raw.trim() === "") throw new ConfigError(`${where} has no server`);
  // kubectl accepts "host:6443" without a scheme and means https.
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw.trim()) ? raw.trim() : `https://${raw.trim()}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ConfigError(`${where} has an invalid server URL "${raw}"`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new ConfigError(`${where} has a server URL "${raw}" that is not http(s)`);
  }
  // Connecting directly when the configuration names a proxy would fail or, worse, bypass it.
  const proxy = cluster.body["proxy-url"];
  if (proxy !== undefined && proxy !== null && proxy !== "") {
    throw new ConfigError(
      `${where} sets proxy-url, which is not supported; remove it and set the environment ` +
        `variable HTTPS_PROXY=${typeof proxy === "string" ? proxy : "<the proxy's URL>"} ` +
        `instead (also HTTP_PROXY and NO_PROXY are honoured)`,
    );
  }
  const insecure = cluster.body["insecure-skip-tls-verify"];
  if (insecure !== undefined && insecure !== null && typeof insecure !== "boolean") {
    throw new ConfigError(`${where} has insecure-skip-tls-verify that is not true or false`);
  }
  const caPem = await readPem(cluster, "certificate-authority", where, readFile);
  return {
    server: `${url.origin}${url.pathname.replace(/\/+$/, "")}`,
    ...(caPem !== undefined ? { caPem } : {}),
    ...(insecure ? { insecureSkipTlsVerify: true } : {}),
  };
}

/** The client certificate and credentials of a user entry (anonymous without one). */
async function readUser(
  user: Entry | undefined,
  tls: Tls,
  cluster: Entry,
  refresh: RefreshOptions,
): Promise<{ clientCertPem?: string; clientKeyPem?: string; credentials: Credentials }> {
  if (!user) return { credentials: NO_CREDENTIALS };
  const where = `Broken kubeconfig ${user.file}: user "${user.name}"`;
  const provider = user.body["auth-provider"];
  if (provider !== undefined && provider !== null) {
    const name = isRecord(provider) && typeof provider.name === "string"
      ? ` "${provider.name}"`
      : "";
    throw new ConfigError(
      `Unsupported kubeconfig ${user.file}: user "${user.name}" uses auth-provider${name}, ` +
        "which kubectl no longer supports; use an exec credential plugin instead",
    );
  }
  const cert = await readPem(user, "client-certificate", where, refresh.readFile);
  const key = await readPem(user, "client-key", where, refresh.readFile);
  if ((cert === undefined) !== (key === undefined)) {
    throw new ConfigError(`${where} needs both client-certificate and client-key, or neither`);
  }
  const pems = cert !== undefined && key !== undefined
    ? { clientCertPem: cert, clientKeyPem: key }
    : {};
  const [token, tokenFile, username, password] = ["token", "tokenFile", "username", "password"]
    .map((field) => optionalString(user.body, field, where));
  if ((token || tokenFile) && (username || password)) {
    throw new ConfigError(`${where} has both a token and a username/password; keep only one`);
  }
  let credentials: Credentials = NO_CREDENTIALS;
  if (tokenFile) {
    // Like client-go: the file wins over an inline token, and is re-read as it rotates.
    const path = resolve(dirname(user.file), tokenFile);
    const subject = `Cannot use the tokenFile of user "${user.name}" in ${user.file}`;
    const tokens = new TokenFileCredentials(path, subject, refresh);
    await tokens.headers(); // Fails now, with a clear message, if the file is missing.
    credentials = tokens;
  } else if (token) {
    credentials = staticCredentials(`Bearer ${token}`);
  } else if (username || password) {
    credentials = staticCredentials(`Basic ${base64(`${username ?? ""}:${password ?? ""}`)}`);
  } else if (user.body.exec !== undefined && user.body.exec !== null && cert === undefined) {
    // Like client-go, a client certificate makes the exec plugin unnecessary.
    const info = execClusterInfo(tls, cluster);
    const config = parseExecConfig(user.body.exec, user.file, user.name, info);
    credentials = new ExecCredentials(config, refresh.now);
  }
  return { ...pems, credentials };
}

/** `spec.cluster` for exec plugins with `provideClusterInfo: true`. */
function execClusterInfo(
  tls: Tls,
  cluster: Entry,
): Record<string, unknown> {
  const extensions = Array.isArray(cluster.body.extensions) ? cluster.body.extensions : [];
  const own = extensions.find((e) => isRecord(e) && e.name === "client.authentication.k8s.io/exec");
  return {
    server: tls.server,
    ...(tls.caPem ? { "certificate-authority-data": base64(tls.caPem) } : {}),
    ...(tls.insecureSkipTlsVerify ? { "insecure-skip-tls-verify": true } : {}),
    ...(isRecord(own) && own.extension !== undefined ? { config: own.extension } : {}),
  };
}

/** A PEM from `<field>-data` (base64, preferred as in kubectl) or the file `<field>`. */
async function readPem(
  entry: Entry,
  field: string,
  where: string,
  readFile: ReadFileFn,
): Promise<string | undefined> {
  const data = optionalString(entry.body, `${field}-data`, where);
  const file = optionalString(entry.body, field, where);
  let pem: string;
  if (data) {
    try {
      const binary = atob(data.replace(/\s+/g, ""));
      pem = new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
    } catch {
      throw new ConfigError(`${where} has ${field}-data that is not valid base64`);
    }
  } else if (file) {
    const path = resolve(dirname(entry.file), file);
    const about = `${where} has ${field} ${path}`;
    const text = await readOptional(path, readFile, `${about} that cannot be read`);
    if (text === undefined) throw new ConfigError(`${about} that does not exist`);
    pem = text;
  } else {
    return undefined;
  }
  if (!pem.includes("-----BEGIN ")) {
    throw new ConfigError(`${where} has ${data ? `${field}-data` : field} that is not PEM`);
  }
  return pem;
}
