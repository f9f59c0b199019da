/**
 * The credentials vault: every credential the login handlers returned, used by priority, with
 * the rejected and expired ones dropped and a re-login when none is left (Kopf's `Vault`).
 *
 * Expected flow: each request asks for headers; the vault picks the highest-priority credential
 * (at random among equals), skipping expired ones. After a 401, the request reports the headers
 * it sent: the credential may refresh itself (a token file re-read, an exec plugin re-run);
 * otherwise it is dropped and remembered as invalid, and the request retries with the next one.
 * When none is left, one re-login runs for all waiting requests; credentials that produce headers
 * already known to be invalid are ignored, so a handler that keeps returning the same bad token
 * cannot loop forever: the vault then fails with a {@link LoginError}.
 *
 * Caveat: the server and TLS settings are those of the connection the client was created with;
 * the credentials in the vault differ in their authentication headers only.
 * @module
 */

import { type ConnectionInfo, type Credentials, expirationTime } from "./connection.ts";

/** The operator cannot log in: no login handler gave usable credentials. */
export class LoginError extends Error {
  /**
   * Creates the error.
   * @param message What happened and what to check.
   * @param options The cause.
   */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
    this.name = "LoginError";
  }
}

/** One credential: where it came from and what it is. */
export interface VaultItem {
  /** A stable key, e.g. the login handler's id. */
  readonly key: string;
  /** The credential. */
  readonly info: ConnectionInfo;
}

/** What a {@link Vault} needs. */
export interface VaultOptions {
  /** Runs the login handlers again; resolves to their credentials (maybe none). */
  readonly relogin: (signal?: AbortSignal) => Promise<readonly VaultItem[]>;
  /** Randomness for choosing among equal priorities. @default Math.random */
  readonly random?: () => number;
  /** The current time in milliseconds since the epoch. @default Date.now */
  readonly now?: () => number;
  /** Called when the vault gives up (no usable credentials after a re-login). */
  readonly onFailure?: (error: LoginError) => void;
}

interface Entry extends VaultItem {
  readonly priority: number;
  readonly expires: number | undefined;
}

/** A set of credentials behind the {@link Credentials} interface the HTTP client uses. */
export class Vault implements Credentials {
  #entries: Entry[] = [];
  /** Headers known to be rejected (401), as canonical JSON: never used again. */
  #rejected = new Set<string>();
  /** Which entry produced the headers a request got, to invalidate exactly that one. */
  #issued = new WeakMap<Readonly<Record<string, string>>, Entry>();
  #relogging: Promise<void> | undefined;
  #options: VaultOptions;

  /**
   * Creates a vault with the initial credentials.
   * @param items The login handlers' first credentials.
   * @param options How to log in again, randomness and time.
   */
  constructor(items: readonly VaultItem[], options: VaultOptions) {
    this.#options = options;
    this.#populate(items);
  }

  /** How many credentials are in the vault now (expired ones included until next use). */
  get size(): number {
    return this.#entries.length;
  }

  /**
   * The headers of the best valid credential; logs in again first if there is none.
   * @param signal Stops waiting.
   * @returns The headers.
   * @throws {LoginError} when there are no usable credentials even after a re-login.
   */
  async headers(signal?: AbortSignal): Promise<Record<string, string>> {
    let relogged = false;
    for (;;) {
      if (this.#relogging) {
        await this.#relogging; // all requests wait for a re-login in progress
        relogged = true;
      }
      const entry = this.#select();
      if (!entry) {
        if (relogged) throw this.#fail();
        await this.#relogin(signal);
        relogged = true;
        continue;
      }
      const headers = await entry.info.credentials.headers(signal);
      if (this.#rejected.has(canonical(headers))) {
        this.#drop(entry);
        continue;
      }
      this.#issued.set(headers, entry);
      return headers;
    }
  }

  /**
   * Reports a 401 for the given headers: the credential refreshes itself if it can; else it is
   * dropped and its headers are never used again.
   * @param rejected The headers of the rejected request.
   * @returns `true`: retrying may succeed (with this credential refreshed, or another one).
   */
  async invalidate(rejected?: Readonly<Record<string, string>>): Promise<boolean> {
    const entry = rejected ? this.#issued.get(rejected) : undefined;
    if (rejected) this.#rejected.add(canonical(rejected));
    if (entry && this.#entries.includes(entry)) {
      if (await entry.info.credentials.invalidate(rejected)) return true;
      this.#drop(entry);
    }
    return true;
  }

  #select(): Entry | undefined {
    const now = (this.#options.now ?? Date.now)();
    this.#entries = this.#entries.filter((e) => e.expires === undefined || e.expires > now);
    if (this.#entries.length === 0) return undefined;
    const top = Math.max(...this.#entries.map((e) => e.priority));
    const best = this.#entries.filter((e) => e.priority === top);
    const random = (this.#options.random ?? Math.random)();
    return best[Math.min(best.length - 1, Math.floor(random * best.length))];
  }

  #drop(entry: Entry): void {
    this.#entries = this.#entries.filter((e) => e !== entry);
  }

  #relogin(signal?: AbortSignal): Promise<void> {
    return this.#relogging ??= this.#options.relogin(signal)
      .then((items) => this.#populate(items))
      .finally(() => (this.#relogging = undefined));
  }

  #populate(items: readonly VaultItem[]): void {
    this.#entries = items.map((item) => ({
      ...item,
      priority: item.info.priority ?? 0,
      expires: expirationTime(item.info.expiration),
    }));
  }

  #fail(): LoginError {
    const error = new LoginError(
      "No valid credentials: every login handler's credentials are expired or were rejected " +
        "(401), and logging in again gave no new ones; check the login handlers",
    );
    this.#options.onFailure?.(error);
    return error;
  }
}

/** The headers as a string that is equal for equal headers, whatever their key order. */
function canonical(headers: Readonly<Record<string, string>>): string {
  return JSON.stringify(Object.entries(headers).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0));
}
