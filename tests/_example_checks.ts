/**
 * What the end-to-end tests of the handler examples (tests/examples_handlers_test.ts,
 * tests/examples_kinds_test.ts) look at besides the operator's log: an object's Events, every
 * version of it a watch sees, its progress annotations and stored essence, and error stacks in
 * the log.
 * @module
 */

import assert from "node:assert/strict";
import type { KubeClient, KubeObject } from "../mod.ts";
import { watcher } from "../client.ts";
import type { ResourceRef } from "../core/client/api.ts";
import type { SpawnedOperator } from "./_operator.ts";
import {
  type EventSummary,
  getObject,
  LAST_HANDLED,
  lineIndex,
  listEvents,
  NAME,
} from "./_examples.ts";
import { eventually } from "./_support.ts";

/**
 * Log messages become Events only with settings.posting.loggers (off by default, as in Kopf
 * 1.44+); the tests of those Events add this handlers file, which turns it on at startup.
 */
export const POST_LOG_MESSAGES = { args: ["tests/fixtures/post_log_messages.ts"] };

/** The core v1 Events about an object (as `kubectl describe` shows them). */
export async function eventsAbout(
  client: KubeClient,
  namespace: string,
  uid: string,
): Promise<EventSummary[]> {
  return await listEvents(client, namespace, { uid });
}

/** The total count of Events about an object matching type, reason and message. */
export function countEvents(
  events: EventSummary[],
  type: string,
  reason: string,
  message: string | RegExp,
): number {
  return events
    .filter((e) => e.type === type && e.reason === reason)
    .filter((e) => typeof message === "string" ? e.message === message : message.test(e.message))
    .reduce((sum, e) => sum + (e.count ?? 1), 0);
}

/** Every version of the objects of a resource in a namespace, as a watch sees them. */
export async function observe(client: KubeClient, resource: ResourceRef, namespace: string) {
  const controller = new AbortController();
  const versions: KubeObject[] = [];
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const done = (async () => {
    for await (const e of watcher(client.api, resource, { namespace, signal: controller.signal })) {
      if (e.type === "initDone") markReady();
      if (e.type === "apply" || e.type === "initApply") versions.push(e.object);
    }
  })().catch(() => {});
  await ready;
  return {
    versions,
    /** Parsed progress records (`kopf.zalando.org/<id>` annotations) of each observed version. */
    progress(name = NAME): Array<Record<string, Record<string, unknown>>> {
      return versions.filter((v) => v.metadata?.name === name).map((v) =>
        Object.fromEntries(
          Object.entries(v.metadata?.annotations ?? {})
            .filter(([key]) => key.startsWith("kopf.zalando.org/") && key !== LAST_HANDLED)
            .map(([key, value]) => [key.slice("kopf.zalando.org/".length), JSON.parse(value)]),
        )
      );
    },
    async [Symbol.asyncDispose]() {
      controller.abort();
      await done;
    },
  };
}

/** Progress annotations (`kopf.zalando.org/…` except the diff-base) of an object. */
export function progressKeys(body: KubeObject): string[] {
  return Object.keys(body.metadata?.annotations ?? {})
    .filter((k) => k.startsWith("kopf.zalando.org/") && k !== LAST_HANDLED);
}

/**
 * Waits until the operator has finished with the object: its essence stored and no progress
 * annotations left (the last write of a cycle is done). Changing the object before that may
 * hit the framework bug described at "a change made while a handler runs is not lost".
 */
export async function waitIdle(
  client: KubeClient,
  namespace: string,
  name = NAME,
): Promise<KubeObject> {
  return await eventually(
    async () => {
      const b = await getObject(client, namespace, name);
      return lastHandled(b) && progressKeys(b).length === 0 ? b : undefined;
    },
    10_000,
    `${name} to be handled completely`,
  );
}

/** The last handled essence stored on an object. */
export function lastHandled(body: KubeObject): { spec?: Record<string, unknown> } | undefined {
  const raw = body.metadata?.annotations?.[LAST_HANDLED];
  return raw === undefined ? undefined : JSON.parse(raw);
}

/** Asserts that the line after the first one containing `text` is (or is not) an error stack. */
export function assertStack(op: SpawnedOperator, text: string, header: string | undefined): void {
  const i = lineIndex(op, text);
  assert.ok(i >= 0, `no line with ${text}:\n${op.lines.join("\n")}`);
  const next = op.lines[i + 1] ?? "";
  if (header === undefined) {
    assert.ok(
      !/^\s+at /.test(next) && !/^\w*(Error|Exception)\b/.test(next),
      `stack after ${text}`,
    );
  } else {
    assert.equal(next, header);
    assert.match(op.lines[i + 2] ?? "", /^\s+at /);
  }
}
