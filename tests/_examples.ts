/**
 * Shared helpers of the example end-to-end tests: a fixture (client, CRD, namespace), running an
 * example with the real CLI, waiting for output lines, stopping cleanly, and small lookups.
 * @module
 */

import assert from "node:assert/strict";
import { parse as parseYaml } from "yaml";
import { ApiError, type KubeClient, type KubeObject } from "../mod.ts";
import type { ResourceRef } from "../core/client/api.ts";
import { deleteNamespace, sharedControlPlane } from "../testing/control_plane.ts";
import { type SpawnedOperator, spawnOperator } from "./_operator.ts";
import { applyCrds, KOPFEXAMPLES, testClient, testNamespace } from "./_support.ts";

export const opts = { sanitizeOps: false, sanitizeResources: false };
export const EVENTS: ResourceRef = { group: "", version: "v1", plural: "events", namespaced: true };
export const PODS: ResourceRef = { group: "", version: "v1", plural: "pods", namespaced: true };
export { FINALIZER, LAST_HANDLED } from "./_support.ts";
export const NAME = "kopf-example-1";

/** The fields of a core v1 Event the tests read. */
export interface EventSummary {
  type: string;
  reason: string;
  message: string;
  count: number;
  involvedObject: Record<string, unknown>;
  source: Record<string, unknown>;
}

/**
 * The core v1 Events about an object (as `kubectl describe` shows them), told by its uid (one
 * incarnation) or its name (any object of that name in the namespace).
 */
export async function listEvents(
  client: KubeClient,
  namespace: string,
  about: { readonly uid: string } | { readonly name: string },
): Promise<EventSummary[]> {
  const fieldSelector = "uid" in about
    ? `involvedObject.uid=${about.uid}`
    : `involvedObject.name=${about.name}`;
  const { items } = await client.api.list(EVENTS, { namespace, fieldSelector });
  return items.map((e) => e as unknown as EventSummary);
}

/** A client, the example CRD, and a fresh namespace (deleted afterwards). */
export async function fixture(prefix: string) {
  const client = await testClient();
  await applyCrds(client, "crds/example.yaml");
  const namespace = await testNamespace(prefix);
  return {
    client,
    namespace,
    async [Symbol.asyncDispose]() {
      await deleteNamespace(await sharedControlPlane(), namespace).catch(() => {});
      client[Symbol.dispose]();
    },
  };
}

/** Runs an example with the CLI, serving one namespace, and waits until it watches `plural`. */
export async function runExample(
  example: string,
  namespace: string,
  options: string | { plural?: string; env?: Record<string, string>; args?: string[] } = {},
  env: Record<string, string> = {},
): Promise<SpawnedOperator> {
  const o = typeof options === "string" ? { plural: options, env } : options;
  const op = await spawnOperator(
    [`examples/${example}/example.ts`, "--verbose", "-n", namespace, ...(o.args ?? [])],
    o.env ?? {},
  );
  const plural = o.plural ?? "kopfexamples";
  await waitFor(op, new RegExp(`Watching ${plural}\\b.* in ${namespace}$`), 20_000);
  return op;
}

/** Waits for an output line; on timeout, fails with the whole output so far. */
export async function waitFor(
  op: SpawnedOperator,
  pattern: RegExp,
  timeoutMs = 15_000,
): Promise<string> {
  try {
    return await op.waitForLine(pattern, timeoutMs);
  } catch {
    throw new Error(`Timed out waiting for ${pattern}; output:\n${op.lines.join("\n")}`);
  }
}

/** Fails if the output shows an unhandled error or a crashed task. */
export function assertNoCrashes(lines: readonly string[]): void {
  assert.ok(
    !lines.some((l) => /Unhandled|Uncaught|crashed unexpectedly/.test(l)),
    lines.join("\n"),
  );
}

/** Stops the operator and checks that it exited cleanly; returns how long the exit took (ms). */
export async function stopCleanly(op: SpawnedOperator): Promise<number> {
  const began = Date.now();
  const code = await op.stop();
  const took = Date.now() - began;
  if (Deno.env.get("DUMP_LINES")) console.log(op.lines.join("\n"));
  assert.equal(code, 0, `exit code ${code}; output:\n${op.lines.join("\n")}`);
  assertNoCrashes(op.lines);
  return took;
}

/** Creates `examples/obj.yaml` (what `kubectl apply -f examples/obj.yaml` does). */
export async function createExampleObject(
  client: KubeClient,
  namespace: string,
  name = NAME,
): Promise<KubeObject> {
  const body = parseYaml(await Deno.readTextFile("examples/obj.yaml")) as KubeObject;
  body.metadata = { ...body.metadata, name, namespace };
  return await client.api.create(KOPFEXAMPLES, body, { namespace });
}

/** Reads the example object. */
export async function getObject(
  client: KubeClient,
  namespace: string,
  name = NAME,
): Promise<KubeObject> {
  return await client.api.get(KOPFEXAMPLES, name, { namespace });
}

/** Whether an object is gone (404). */
export async function isGone(
  client: KubeClient,
  resource: ResourceRef,
  namespace: string,
  name: string,
) {
  try {
    await client.api.get(resource, name, { namespace });
    return false;
  } catch (error) {
    if (error instanceof ApiError && error.code === 404) return true;
    throw error;
  }
}

function linesOf(source: SpawnedOperator | readonly string[]): readonly string[] {
  return Array.isArray(source) ? source : (source as SpawnedOperator).lines;
}

/** Lines containing `text` (a substring). */
export function linesWith(source: SpawnedOperator | readonly string[], text: string): string[] {
  return linesOf(source).filter((l) => l.includes(text));
}

/** The index of the first line containing `text`, or -1. */
export function lineIndex(source: SpawnedOperator | readonly string[], text: string): number {
  return linesOf(source).findIndex((l) => l.includes(text));
}

/** The object's log prefix in the operator's output. */
export function ref(namespace: string, name = NAME): string {
  return `[${namespace}/${name}]`;
}
