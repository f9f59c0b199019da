/**
 * Shared scaffolding of the client configuration's unit tests (`config*_test.ts`): PEM material,
 * kubeconfigs written as YAML into a temporary directory, and the check that a loading fails
 * with one single-line `ConfigError`. Not part of the public API.
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { stringify } from "yaml";
import { ConfigError } from "./config.ts";

/** A CA certificate (PEM; not a real one: the tests only read it). */
export const CA = "-----BEGIN CERTIFICATE-----\nMIIBca\n-----END CERTIFICATE-----\n";
/** A client certificate (PEM; not a real one). */
export const CERT = "-----BEGIN CERTIFICATE-----\nMIIBclient\n-----END CERTIFICATE-----\n";
/** A client key (PEM; not a real one). */
export const KEY = "-----BEGIN PRIVATE KEY-----\nMIIEkey\n-----END PRIVATE KEY-----\n";
/** The apiVersion of exec credential plugins v1. */
export const V1 = "client.authentication.k8s.io/v1";

/** A YAML mapping, as written into a kubeconfig. */
export type Json = Record<string, unknown>;

/**
 * Runs a test body with a fresh temporary directory, removed afterwards.
 * @param body The body, given the directory.
 */
export async function withTempDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "kopf-config-test-" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/**
 * Writes a text (or an object as YAML) under `dir`, creating directories; returns the path.
 * @param dir The directory.
 * @param name The file's path relative to it.
 * @param content The text, or an object to write as YAML.
 */
export async function write(dir: string, name: string, content: string | Json): Promise<string> {
  const path = join(dir, name);
  await Deno.mkdir(dirname(path), { recursive: true });
  await Deno.writeTextFile(path, typeof content === "string" ? content : stringify(content));
  return path;
}

/**
 * A kubeconfig with one context "main" joining `cluster` and (if given) `user`.
 * @param cluster The cluster "c".
 * @param user The user "u", if any.
 * @param context More fields of the context "main" (e.g. its namespace).
 */
export function kubeconfig(cluster: Json, user?: Json, context: Json = {}): Json {
  return {
    apiVersion: "v1",
    kind: "Config",
    "current-context": "main",
    clusters: [{ name: "c", cluster }],
    users: user ? [{ name: "u", user }] : [],
    contexts: [{
      name: "main",
      context: { cluster: "c", ...(user ? { user: "u" } : {}), ...context },
    }],
  };
}

/**
 * Asserts that `promise` rejects with one ConfigError whose single-line message has `parts`.
 * @param promise The loading.
 * @param parts Texts the message must contain.
 */
export async function assertConfigError(
  promise: Promise<unknown>,
  ...parts: string[]
): Promise<void> {
  const error = await promise.then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${error}`);
  assert.equal(error.name, "ConfigError");
  assert.doesNotMatch(error.message, /\n/, "the message must be one line");
  assert.match(error.message, /^[A-Z]/, "the message must start with a capital letter");
  assert.doesNotMatch(error.message, /\.$/, "the message must not end with a period");
  for (const part of parts) {
    assert.ok(error.message.includes(part), `"${error.message}" lacks "${part}"`);
  }
}
