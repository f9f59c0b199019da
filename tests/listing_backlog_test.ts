/**
 * `settings.queueing.listingBacklog` on the real API server: a backlog's listing is read page by
 * page as its objects begin to be processed, not all at once (issue 31, item 2). The operator's
 * own request counters tell how many list pages it had asked for whenever a handler starts.
 */

import assert from "node:assert/strict";
import { on } from "../mod.ts";
import { CONFIGMAPS } from "../core/client/_test_support.ts";
import { createSettings } from "../core/settings/settings.ts";
import { startOperator } from "./_operator.ts";
import { eventually, testClient, testNamespace } from "./_support.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const OBJECTS = 60;
const PAGE = 5;
const BACKLOG = 4;

/** Runs an operator over a backlog of OBJECTS ConfigMaps; the list pages asked for per handler start. */
async function pagesPerStart(listingBacklog: number | null): Promise<number[]> {
  const ns = await testNamespace("listing");
  const client = await testClient();
  try {
    for (let i = 0; i < OBJECTS; i++) {
      await client.api.create(CONFIGMAPS, {
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: `backlog-${i}`, labels: { backlog: "yes" } },
      }, { namespace: ns });
    }
  } finally {
    client[Symbol.dispose]();
  }
  const settings = createSettings({
    watching: { chunkSize: PAGE },
    // One cycle at a time (handlers of 60 ms count): the other objects wait for their turn.
    queueing: { admissionLimit: 1, listingBacklog },
    posting: { enabled: false },
  });
  const pages: number[] = [];
  const op = await startOperator((registry) => {
    on.create("configmaps", { registry, labels: { backlog: "yes" } }, async function created() {
      pages.push(op.client.counters.count({ verb: "list", resource: "configmaps" }));
      await new Promise((resolve) => setTimeout(resolve, 60));
    });
  }, { namespaces: [ns], settings });
  try {
    await eventually(() => pages.length === OBJECTS, 60_000, "every object handled");
    return pages;
  } finally {
    await op.stop();
  }
}

Deno.test(
  "a listing is read as its objects begin to be processed (listingBacklog)",
  opts,
  async () => {
    const pages = await pagesPerStart(BACKLOG);
    // When the k-th handler starts, at most k objects began and fewer than BACKLOG more wait:
    // the pages asked for cover those, plus the one being read.
    for (const [i, asked] of pages.entries()) {
      const bound = Math.ceil((i + 1 + BACKLOG) / PAGE) + 1;
      assert.ok(asked <= bound, `handler ${i + 1} started after ${asked} list pages (≤ ${bound})`);
    }
    // Every page read in the end (one more when the last full page still carried a continue token).
    assert.ok(pages.at(-1)! >= OBJECTS / PAGE, `${pages.at(-1)} pages in the end`);
  },
);

Deno.test(
  "without it (null), the whole listing is read before the backlog is worked off",
  opts,
  async () => {
    const pages = await pagesPerStart(null);
    // The 10th handler starts ≥ 540 ms after the first; the 12 pages are read long before.
    assert.ok(pages[9]! >= OBJECTS / PAGE, `10th handler after ${pages[9]} pages`);
  },
);
