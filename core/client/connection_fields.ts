/**
 * Kopf's flat `ConnectionInfo(server, ca_path, ca_data, token, …)` as a {@link ConnectionInfo}:
 * files are read and base64 data decoded here, once, and the token or username/password become
 * static credentials.
 * @module
 */

import { type ConnectionInfo, type Credentials, NO_CREDENTIALS } from "./connection.ts";

/**
 * Kopf's `ConnectionInfo` fields in camelCase, as a login handler would fill them.
 *
 * PEM data (`caData`, `certificateData`, `privateKeyData`) may be PEM text or base64-encoded
 * PEM (as in a kubeconfig's `*-data` fields), as a string or bytes. A path wins over data for
 * the client certificate and key; for the CA, both are trusted.
 */
export interface ConnectionFields {
  /** Base URL of the API server, e.g. `https://127.0.0.1:6443`. */
  readonly server: string;
  /** A PEM file with the CA bundle that signs the server's certificate. */
  readonly caPath?: string;
  /** The CA bundle: PEM, or base64 of PEM. */
  readonly caData?: string | Uint8Array;
  /** Skip verification of the server's certificate. @default false */
  readonly insecure?: boolean;
  /** User name for HTTP Basic authentication (with `password`). */
  readonly username?: string;
  /** Password for HTTP Basic authentication (with `username`). */
  readonly password?: string;
  /** The `Authorization` scheme for `token`. @default "Bearer" */
  readonly scheme?: string;
  /** The token sent as `Authorization: <scheme> <token>`. */
  readonly token?: string;
  /** A PEM file with the client certificate for mutual TLS. */
  readonly certificatePath?: string;
  /** The client certificate: PEM, or base64 of PEM. */
  readonly certificateData?: string | Uint8Array;
  /** A PEM file with the private key of the client certificate. */
  readonly privateKeyPath?: string;
  /** The private key of the client certificate: PEM, or base64 of PEM. */
  readonly privateKeyData?: string | Uint8Array;
  /** The namespace meant when none is given. */
  readonly defaultNamespace?: string;
  /** Which credentials are used first when there are several (highest first). @default 0 */
  readonly priority?: number;
  /** When the credentials stop being valid: a `Date` or ISO 8601 string (no zone = UTC). */
  readonly expiration?: Date | string;
}

const FIELDS: ReadonlySet<string> = new Set([
  "server",
  "caPath",
  "caData",
  "insecure",
  "username",
  "password",
  "scheme",
  "token",
  "certificatePath",
  "certificateData",
  "privateKeyPath",
  "privateKeyData",
  "defaultNamespace",
  "priority",
  "expiration",
]);

/**
 * Builds a {@link ConnectionInfo} from Kopf's flat fields: reads the files (a leading `~/` is
 * the home directory), decodes base64 data, and makes static credentials from `token` and
 * `scheme` (`Authorization: <scheme or Bearer> <token>`; a scheme alone is sent as is) or from
 * `username` and `password` (`Authorization: Basic …`).
 *
 * @example A login handler with a token
 * ```ts ignore
 * import { connectionInfo, on } from "./mod.ts";
 *
 * on.login(() =>
 *   connectionInfo({ server: "https://127.0.0.1:6443", caPath: "/etc/ca.crt", token: "…" })
 * );
 * ```
 *
 * @param fields Kopf's `ConnectionInfo` fields in camelCase.
 * @returns The connection info the client and the login vault use.
 * @throws {TypeError} for unknown fields, a username without a password (or the reverse), both a
 *   token and a username, or data that is neither PEM nor base64.
 * @throws {Deno.errors.NotFound} when a file does not exist.
 */
export function connectionInfo(fields: ConnectionFields): ConnectionInfo {
  const unknown = Object.keys(fields).filter((key) => !FIELDS.has(key));
  if (unknown.length) {
    throw new TypeError(`Unknown ConnectionInfo fields: ${unknown.join(", ")}`);
  }
  if (typeof fields.server !== "string" || !fields.server) {
    throw new TypeError("ConnectionInfo needs a server URL");
  }
  const ca = [
    fields.caPath === undefined ? undefined : readPem(fields.caPath),
    fields.caData === undefined ? undefined : decodePem(fields.caData, "caData"),
  ].filter((pem) => pem !== undefined);
  const cert = fields.certificatePath !== undefined
    ? readPem(fields.certificatePath)
    : fields.certificateData !== undefined
    ? decodePem(fields.certificateData, "certificateData")
    : undefined;
  const key = fields.privateKeyPath !== undefined
    ? readPem(fields.privateKeyPath)
    : fields.privateKeyData !== undefined
    ? decodePem(fields.privateKeyData, "privateKeyData")
    : undefined;
  return {
    server: fields.server.replace(/\/+$/, ""),
    ...(ca.length ? { caPem: ca.join("\n") } : {}),
    ...(fields.insecure ? { insecureSkipTlsVerify: true } : {}),
    ...(cert !== undefined ? { clientCertPem: cert } : {}),
    ...(key !== undefined ? { clientKeyPem: key } : {}),
    ...(fields.defaultNamespace ? { namespace: fields.defaultNamespace } : {}),
    ...(fields.priority !== undefined ? { priority: fields.priority } : {}),
    ...(fields.expiration !== undefined ? { expiration: fields.expiration } : {}),
    credentials: staticCredentials(authorization(fields)),
    source: `connection info for ${fields.server}`,
  };
}

/**
 * Whether a login handler's result is Kopf's flat form: it names a server, but has no
 * `credentials` object (which our own {@link ConnectionInfo} always has).
 *
 * @param value A login handler's result.
 * @returns `true` for the flat form.
 */
export function isConnectionFields(value: unknown): value is ConnectionFields {
  return Boolean(
    value && typeof value === "object" && "server" in value && !("credentials" in value),
  );
}

/** The `Authorization` header value, if any. */
function authorization(fields: ConnectionFields): string | undefined {
  const { username, password, scheme, token } = fields;
  const basic = username !== undefined || password !== undefined;
  if (basic && (username === undefined || password === undefined)) {
    throw new TypeError("ConnectionInfo needs both a username and a password for Basic auth");
  }
  if (basic && (scheme !== undefined || token !== undefined)) {
    throw new TypeError("ConnectionInfo takes a token or a username and password, not both");
  }
  if (basic) return `Basic ${base64(new TextEncoder().encode(`${username}:${password}`))}`;
  if (scheme !== undefined && token !== undefined) return `${scheme} ${token}`;
  if (scheme !== undefined) return scheme;
  if (token !== undefined) return `Bearer ${token}`;
  return undefined;
}

function staticCredentials(header: string | undefined): Credentials {
  if (header === undefined) return NO_CREDENTIALS;
  // Nothing to refresh: after a 401, the login vault drops these and logs in again.
  return {
    headers: () => Promise.resolve({ Authorization: header }),
    invalidate: () => Promise.resolve(false),
  };
}

function readPem(path: string): string {
  const home = Deno.env.get("HOME");
  const expanded = path.startsWith("~/") && home ? `${home}${path.slice(1)}` : path;
  return Deno.readTextFileSync(expanded);
}

/** PEM text as it is; anything else is base64 of PEM (Kopf accepts both). */
function decodePem(data: string | Uint8Array, field: string): string {
  const text = typeof data === "string" ? data : new TextDecoder().decode(data);
  if (text.trimStart().startsWith("-----BEGIN ")) return text;
  try {
    const decoded = new TextDecoder().decode(
      Uint8Array.from(atob(text.replace(/\s+/g, "")), (c) => c.charCodeAt(0)),
    );
    if (decoded.trimStart().startsWith("-----BEGIN ")) return decoded;
  } catch {
    // Not base64: reported below with the field's name.
  }
  throw new TypeError(`ConnectionInfo ${field} is neither PEM nor base64 of PEM`);
}

function base64(bytes: Uint8Array): string {
  return btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));
}
