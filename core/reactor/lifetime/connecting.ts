/**
 * Connecting the operator to the cluster: the HTTP client's options from the settings, the
 * credentials of the login handlers (kept in a vault that logs in again when they expire) or of
 * the kubeconfig / in-cluster account, and the check that the cluster accepts them.
 * @module
 */

import type { Logger } from "../../actions/loggers.ts";
import { KubeClient } from "../../client/client.ts";
import { autoConfigure } from "../../client/config.ts";
import type { ConnectionInfo, Credentials } from "../../client/connection.ts";
import {
  type ConnectionFields,
  connectionInfo,
  isConnectionFields,
} from "../../client/connection_fields.ts";
import { ApiError, TransportError } from "../../client/errors.ts";
import type { HttpClientOptions } from "../../client/http.ts";
import { LoginError, Vault, type VaultItem } from "../../client/vault.ts";
import { runActivity } from "../../engines/runners/activities.ts";
import type { IndexView, Memo } from "../../intents/contexts.ts";
import type { OperatorRegistry } from "../../intents/registries.ts";
import type { OperatorSettings } from "../../settings/settings.ts";
import { firstLine, OperatorStartError } from "./errors.ts";

/** Where the kubeconfig is, when no login handler gives the credentials. */
export interface KubeconfigOptions {
  /** Kubeconfig file(s). @default the environment's (`KUBECONFIG`, `~/.kube/config`, in-cluster) */
  readonly kubeconfig?: string | readonly string[];
  /** Kubeconfig context. @default the current context */
  readonly context?: string;
}

/**
 * The HTTP client's options from the operator's settings: timeouts, the retry schedule of
 * `settings.networking.errorBackoffs` (its length is the number of retries), the rate limit, and
 * API traffic logged at debug level (shown with `--debug` only).
 * @param settings The operator's settings.
 * @param traffic Where each answer is logged at debug level.
 * @returns Options for `KubeClient`/`HttpClient`.
 */
export function httpOptions(settings: OperatorSettings, traffic: Logger): HttpClientOptions {
  return {
    timeoutMs: settings.networking.requestTimeout * 1000,
    // Watches fall back from their own connect timeout to this one, then to timeoutMs.
    ...(settings.networking.connectTimeout === null
      ? {}
      : { connectTimeoutMs: settings.networking.connectTimeout * 1000 }),
    retries: settings.networking.errorBackoffs.length,
    backoff: { delaysMs: settings.networking.errorBackoffs.map((s) => s * 1000), jitter: 0.2 },
    qps: settings.networking.qps,
    burst: settings.networking.burst,
    maxConnections: settings.networking.maxConnections,
    // The line is built only when it is shown (this runs for every request).
    onResponse: (r) => {
      if (traffic.isEnabledFor("debug")) {
        traffic.debug(`${r.method} ${r.path} → ${r.code || "no answer"} in ${r.ms} ms`);
      }
    },
  };
}

/**
 * Connects with the login handlers' credentials, or the kubeconfig / in-cluster account.
 * @param options The kubeconfig, used when there are no login handlers.
 * @param settings The operator's settings (the HTTP client's options).
 * @param registry The login handlers.
 * @param memo Operator memo, for the login handlers.
 * @param logger Operator logger (authentication lines; API traffic on its `kopf.client` child).
 * @param signal Stops the login handlers.
 * @param onLoginFailure Called when a later login gives no usable credentials.
 * @param indices The indices, for the login handlers.
 * @returns A client; its credentials are renewed by logging in again when rejected.
 * @throws {LoginError} when the login handlers give no usable credentials.
 * @throws {ConfigError} when no usable cluster configuration is found.
 */
export async function connect(
  options: KubeconfigOptions,
  settings: OperatorSettings,
  registry: OperatorRegistry,
  memo: Memo,
  logger: Logger,
  signal: AbortSignal,
  onLoginFailure: (error: LoginError) => void,
  indices?: Readonly<Record<string, IndexView>>,
): Promise<KubeClient> {
  const http = httpOptions(settings, logger.child(["kopf", "client"]));
  const handlers = registry.activities("login");
  if (handlers.length === 0) {
    // Kopf logs in with the kubeconfig / in-cluster account through a built-in login handler,
    // and logs the same lines around it.
    logger.info("Initial authentication has been initiated.");
    const paths = options.kubeconfig === undefined
      ? []
      : ([] as string[]).concat(options.kubeconfig);
    const connection = await autoConfigure({
      ...(paths.length ? { paths } : {}),
      ...(options.context ? { context: options.context } : {}),
      warn: (message) => logger.warning(message), // once per run: configured once per run
    });
    logger.info("Initial authentication has finished.");
    const credentials: Credentials = {
      headers: (s) => connection.credentials.headers(s),
      invalidate: async () => {
        logger.info("Re-authentication has been initiated.");
        const renewed = await connection.credentials.invalidate();
        if (renewed) logger.info("Re-authentication has finished.");
        else {
          logger.warning(
            `Re-authentication has failed: the credentials from ${connection.source} cannot be renewed.`,
          );
        }
        return renewed;
      },
    };
    return new KubeClient({ ...connection, credentials }, http);
  }
  const login = async (initial: boolean): Promise<VaultItem[]> => {
    const what = initial ? "Initial authentication" : "Re-authentication";
    logger.info(`${what} has been initiated.`);
    const results = await runActivity({
      handlers,
      activity: "login",
      memo,
      settings,
      logger,
      signal,
      indices,
    });
    // Every handler's credentials go to the vault (a handler may also return a list of them).
    const items: VaultItem[] = [];
    for (const [id, result] of results) {
      const infos = Array.isArray(result) ? result : [result];
      infos.forEach((info: unknown, i) => {
        const key = infos.length > 1 ? `${id}#${i}` : id;
        if (isConnectionInfo(info)) items.push({ key, info });
        else if (isConnectionFields(info)) items.push({ key, info: fromFields(info, key) });
      });
    }
    if (items.length) logger.info(`${what} has finished.`);
    else logger.warning(`${what} has failed: no login handler returned credentials.`);
    return items;
  };
  const initial = await login(true);
  const first = initial.toSorted((a, b) => (b.info.priority ?? 0) - (a.info.priority ?? 0))[0]
    ?.info;
  if (!first) {
    throw new LoginError("No login handler returned connection info (a ConnectionInfo object)");
  }
  const vault = new Vault(initial, {
    relogin: () => login(false),
    onFailure: onLoginFailure,
  });
  // The server and TLS are those of the first login; the vault varies the credentials.
  return new KubeClient({ ...first, credentials: vault }, http);
}

/** Kopf's flat fields (`{ server, token, caData, … }`) as connection info. */
function fromFields(fields: ConnectionFields, key: string): ConnectionInfo {
  try {
    return { ...connectionInfo(fields), source: `login handler '${key}'` };
  } catch (error) {
    throw new LoginError(
      `Login handler '${key}' returned unusable connection info: ${firstLine(error)}`,
      {
        cause: error,
      },
    );
  }
}

function isConnectionInfo(value: unknown): value is ConnectionInfo {
  return Boolean(
    value && typeof value === "object" && "server" in value && "credentials" in value,
  );
}

/**
 * Checks that the cluster answers and accepts the credentials, before anything starts.
 * @param client The connected client.
 * @param signal Stops the check.
 * @throws {OperatorStartError} when the cluster is unreachable or rejects the credentials.
 */
export async function checkConnection(client: KubeClient, signal: AbortSignal): Promise<void> {
  try {
    // One cheap authorised call answers both questions (not `/version`: it is open to anonymous
    // users, so it would prove the server reachable but not the credentials accepted).
    await client.http.json({ path: "/api", signal, retries: 2 });
  } catch (error) {
    if (signal.aborted) throw error;
    if (error instanceof TransportError) {
      throw new OperatorStartError(error.message, { cause: error });
    }
    if (error instanceof ApiError && (error.code === 401 || error.code === 403)) {
      throw new OperatorStartError(
        `The API server at ${client.http.connection.server} rejected the credentials from ${client.http.connection.source}: ${error.message}`,
        { cause: error },
      );
    }
    throw error;
  }
}
