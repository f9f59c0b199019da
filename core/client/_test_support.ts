/**
 * Shared scaffolding of the client's tests on the in-memory emulator: a client connected to a
 * fresh emulator, the ConfigMaps resource, and a polling wait.
 * @module
 */

import assert from "node:assert/strict";
import { Emulator } from "../../kits/emulator/mod.ts";
import type { KubeObject } from "../structs/objects.ts";
import type { Resource } from "../structs/resources.ts";
import { KubeClient } from "./client.ts";
import { loadKubeconfig } from "./config.ts";

/** Core ConfigMaps. */
export const CONFIGMAPS: Resource = {
  group: "",
  version: "v1",
  plural: "configmaps",
  singular: "configmap",
  kind: "ConfigMap",
  namespaced: true,
  verbs: [],
  shortNames: [],
  categories: [],
  subresources: [],
  preferred: true,
};

/**
 * Runs a test body with a client of a fresh emulator; both are disposed after it.
 * @param fn The body.
 */
export async function withEmulator(
  fn: (client: KubeClient, emulator: Emulator) => Promise<void>,
): Promise<void> {
  await using emulator = await Emulator.start();
  using client = new KubeClient(await loadKubeconfig({ paths: [emulator.kubeconfigPath] }));
  await fn(client, emulator);
}

/**
 * A ConfigMap to create.
 * @param name Its name.
 * @param data Its data.
 * @param extra More metadata.
 * @returns The object.
 */
export function cm(
  name: string,
  data: Record<string, string> = {},
  extra: object = {},
): KubeObject {
  return { apiVersion: "v1", kind: "ConfigMap", metadata: { name, ...extra }, data };
}

/**
 * Polls until the probe holds (5 s at most), then asserts it.
 * @param probe What must hold.
 * @param what The assertion's message.
 */
export async function until(probe: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !probe(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(probe(), what);
}
