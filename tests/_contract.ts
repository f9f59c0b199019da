/**
 * The contract suite's runner and tools (`tests/contract_*_test.ts`): {@link contract} registers
 * one case on every selected backend, the in-memory emulator (`kits/emulator/`) and the real
 * control plane (`sharedControlPlane()`), through the testing fixture `testing/backend.ts`, so
 * that the emulator's fidelity is proved rather than assumed; {@link stopEmulatorLast} ends each
 * file. Differences that remain are listed in docs/emulator.md. `KOPF_TS_TEST_BACKEND=emulator`
 * (or `plane`) runs one backend only; `KOPF_TS_CONTRACT_BACKENDS` (`emulator`, `real`) still
 * works.
 * @module
 */

import assert from "node:assert/strict";
import { KubeClient } from "../core/client/client.ts";
import { loadKubeconfig } from "../core/client/config.ts";
import { ApiError } from "../core/client/errors.ts";
import type { KubeObject } from "../core/structs/objects.ts";
import type { Resource } from "../core/structs/resources.ts";
import {
  selectedBackends,
  stopBackends,
  type TestBackend,
  withBackend,
} from "../testing/backend.ts";
import { KOPFEXAMPLES } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };

/** The API group of the suite's own custom resources ({@link crd}, {@link WIDGETS}). */
export const GROUP = "contract.kopf.dev";

/** The backends: `$KOPF_TS_TEST_BACKEND`, or this suite's older `$KOPF_TS_CONTRACT_BACKENDS`. */
const BACKENDS = selectedBackends(
  Deno.env.get("KOPF_TS_CONTRACT_BACKENDS")?.replaceAll("real", "plane") ||
    Deno.env.get("KOPF_TS_TEST_BACKEND"),
);

/** What a contract case gets: its backend, a client of it, and a fresh namespace there. */
export interface Ctx {
  /** The backend the case runs on this time. */
  readonly backend: TestBackend;
  /** A client of the backend, closed after the case. */
  readonly client: KubeClient;
  /** A namespace made for this case (`contract-…`). */
  readonly namespace: string;
  /** The backend's administrator kubeconfig (for kubectl, or a client of other options). */
  readonly kubeconfigPath: string;
}

/**
 * Registers one contract case on every selected backend, as `[emulator] NAME` and
 * `[plane] NAME`, each run with a client and a namespace of its own.
 * @param name The case's name, after the backend's.
 * @param fn The case's body, the same for every backend.
 */
export function contract(name: string, fn: (ctx: Ctx) => Promise<void>): void {
  for (const backendName of BACKENDS) {
    Deno.test(`[${backendName}] ${name}`, opts, () =>
      withBackend(backendName, async (backend) => {
        const { kubeconfigPath } = backend;
        using client = new KubeClient(await loadKubeconfig({ paths: [kubeconfigPath] }));
        const namespace = await backend.createNamespace("contract");
        await fn({ backend, client, namespace, kubeconfigPath });
      }));
  }
}

/**
 * Registers a contract file's last test, which stops the emulator that file's cases started
 * (each test file runs in a module of its own, with its own emulator). Call it at the end.
 */
export function stopEmulatorLast(): void {
  Deno.test("stop the emulator", opts, stopBackends);
}

/**
 * Awaits a request that must fail with an API error of this code (and reason, when given).
 * @param promise The request.
 * @param code The expected HTTP status code.
 * @param reason The expected `reason` of the Status, if checked.
 * @returns The error, for further assertions.
 */
export async function failure(
  promise: Promise<unknown>,
  code: number,
  reason?: string,
): Promise<ApiError> {
  const error = await promise.then(() => undefined, (e) => e);
  assert.ok(error instanceof ApiError, `expected an ApiError ${code}, got ${error}`);
  assert.equal(error.code, code, error.message);
  if (reason) assert.equal(error.reason, reason, error.message);
  return error;
}

/** A watch event as the server streams it (an `ERROR` event's object is a Status). */
export interface RawEvent {
  /** `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`. */
  type: string;
  /** The object, or the Status of an `ERROR`. */
  object: KubeObject & { code?: number; reason?: string };
}

/**
 * Reads watch events until `enough` says so, the stream ends, or the time is up.
 * @param response The watch's streaming response.
 * @param enough Whether the events so far are enough.
 * @param timeoutMs When to stop reading anyway.
 * @returns The events, without those of the real controller manager's `kube-root-ca.crt`.
 */
export async function collect(
  response: Response,
  enough: (events: RawEvent[]) => boolean,
  timeoutMs = 15_000,
): Promise<RawEvent[]> {
  const events: RawEvent[] = [];
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => reader.cancel().catch(() => {}), timeoutMs);
  let buffer = "";
  try {
    while (!enough(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split("\n");
      buffer = lines.pop()!;
      for (const line of lines.filter((l) => l.trim())) {
        const event = JSON.parse(line) as RawEvent;
        // The real controller manager adds this to every namespace at its own pace.
        if (event.object.metadata?.name !== "kube-root-ca.crt") events.push(event);
      }
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return events;
}

/**
 * Watch events in short: `TYPE name` (or `TYPE resourceVersion` for a bookmark).
 * @param events The events.
 * @returns One line an event.
 */
export const summary = (events: RawEvent[]): string[] =>
  events.map((e) => `${e.type} ${e.object.metadata?.name ?? e.object.metadata?.resourceVersion}`);

/**
 * A namespaced CRD of {@link GROUP}, version v1, with a short name (`<plural>x`), the category
 * `contract`, and spec and status that keep unknown fields.
 * @param plural The plural name (the singular drops its last letter).
 * @param kind The kind.
 * @param status Whether it has the status subresource.
 * @returns The CustomResourceDefinition.
 */
export function crd(plural: string, kind: string, status: boolean): KubeObject {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: {
        plural,
        singular: plural.slice(0, -1),
        kind,
        shortNames: [`${plural}x`],
        categories: ["contract"],
      },
      versions: [{
        name: "v1",
        served: true,
        storage: true,
        ...(status ? { subresources: { status: {} } } : {}),
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: {
              spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
              status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
            },
          },
        },
      }],
    },
  };
}

/** The resource of `crd("cwidgets", "CWidget", true)`: with the status subresource. */
export const WIDGETS: Resource = {
  ...KOPFEXAMPLES,
  group: GROUP,
  plural: "cwidgets",
  singular: "cwidget",
  kind: "CWidget",
  subresources: ["status"],
};

/** `/usr/bin/kubectl` if this machine has it (the kubectl cases pass without it). */
export const kubectl = await Deno.stat("/usr/bin/kubectl").then(
  () => "/usr/bin/kubectl",
  () => undefined,
);

/**
 * Runs {@link kubectl} against a backend.
 * @param kubeconfigPath The backend's kubeconfig.
 * @param leading Arguments before each command's own (e.g. `-n`, a namespace).
 * @returns `run`: the exit code and the output (stdout, then stderr); `ok`: the output of a
 * command that must exit 0.
 */
export function kubectlCommand(kubeconfigPath: string, ...leading: string[]): {
  run(...args: string[]): Promise<{ code: number; text: string }>;
  ok(...args: string[]): Promise<string>;
} {
  const run = async (...args: string[]) => {
    const out = await new Deno.Command(kubectl!, {
      args: ["--kubeconfig", kubeconfigPath, ...leading, ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
    return { code: out.code, text };
  };
  const ok = async (...args: string[]) => {
    const { code, text } = await run(...args);
    assert.equal(code, 0, `kubectl ${args.join(" ")}: ${text}`);
    return text;
  };
  return { run, ok };
}
