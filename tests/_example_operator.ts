/**
 * What the end-to-end tests of the operator examples (tests/examples_operator_test.ts,
 * tests/examples_background_test.ts) use besides tests/_examples.ts: the times of log lines,
 * the liveness endpoint's answer, Pods that never run (there is no kubelet) and the
 * ServiceAccount they wait for, and a text escaped for a regular expression.
 * @module
 */

import type { KubeClient, KubeObject } from "../mod.ts";
import { linesWith, PODS } from "./_examples.ts";
import { eventually, SERVICEACCOUNTS } from "./_support.ts";

/** The time (ms since the epoch) of a log line in the `full` format: `[2024-01-31 12:34:56,789] …`. */
export function timeOf(line: string): number {
  const m = line.match(/^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\]/);
  if (!m) throw new Error(`No timestamp in: ${line}`);
  const [y, mo, d, h, mi, s, ms] = m.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return new Date(y, mo - 1, d, h, mi, s, ms).getTime();
}

/** The times of the lines containing `text`. */
export function timesOf(lines: readonly string[], text: string): number[] {
  return linesWith(lines, text).map(timeOf);
}

/** GETs the liveness endpoint: the status and the JSON body. */
export async function probe(url: string): Promise<{ status: number; body: unknown }> {
  const response = await fetch(url);
  return { status: response.status, body: await response.json() };
}

/** Waits until the namespace's default ServiceAccount exists (Pods need it). */
export async function waitForServiceAccount(client: KubeClient, namespace: string): Promise<void> {
  await eventually(
    () => client.api.get(SERVICEACCOUNTS, "default", { namespace }),
    15_000,
    "the default ServiceAccount",
  );
}

/** A Pod that will never run (there is no kubelet). */
export async function createPod(
  client: KubeClient,
  namespace: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<KubeObject> {
  const body: KubeObject = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels },
    spec: {
      containers: [{ name: "the-only-one", image: "busybox", command: ["sleep", "1000"] }],
    },
  };
  await waitForServiceAccount(client, namespace);
  return await client.api.create(PODS, body, { namespace });
}

// ---------------------------------------------------------------------------------------------
// 02-children
// ---------------------------------------------------------------------------------------------

/** Escapes a text for a regular expression. */
export function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
