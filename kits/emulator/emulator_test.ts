/**
 * The emulator's own features (those without a real-cluster counterpart): fault injection,
 * history, applyYaml, compaction window, periodic bookmarks, plain HTTP; and unit checks of
 * selectors and patches. API fidelity is tested against both backends in
 * tests/contract_*_test.ts.
 */

import assert from "node:assert/strict";
import { Emulator } from "./mod.ts";
import { strategicMergePatch } from "./patching.ts";
import { parseLabelSelector } from "./selectors.ts";

const opts = { sanitizeOps: false, sanitizeResources: false };
const CMS = "/api/v1/namespaces/default/configmaps";

function request(
  emulator: Emulator,
  method: string,
  path: string,
  body?: unknown,
  type = "application/json",
): Promise<Response> {
  const client = Deno.createHttpClient({ caCerts: emulator.caPem ? [emulator.caPem] : [] });
  return fetch(`${emulator.server}${path}`, {
    method,
    client,
    headers: { authorization: `Bearer ${emulator.token}`, "content-type": type },
    body: body === undefined ? undefined : JSON.stringify(body),
  } as RequestInit).finally(() => client.close());
}

async function json(response: Promise<Response>): Promise<Record<string, unknown>> {
  return await (await response).json();
}

async function lines(response: Response, count: number, timeoutMs = 5000): Promise<string[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const timer = setTimeout(() => reader.cancel().catch(() => {}), timeoutMs);
  let text = "";
  try {
    while (text.split("\n").length <= count) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
  } finally {
    clearTimeout(timer);
    await reader.cancel().catch(() => {});
  }
  return text.split("\n").filter(Boolean).map((l) => JSON.parse(l).type);
}

Deno.test(
  "faults: latency, 429 with Retry-After, 5xx, drops, counted and cleared",
  opts,
  async () => {
    await using emulator = await Emulator.start();
    const slow = emulator.faults.latency(200, { match: { verb: "list", resource: "configmaps" } });
    const started = Date.now();
    assert.equal((await request(emulator, "GET", CMS)).status, 200);
    assert.ok(Date.now() - started >= 190);
    assert.equal(slow.hits, 1);
    slow.clear();

    using _throttle = emulator.faults.throttle({ retryAfterSeconds: 2, times: 1 });
    const throttled = await request(emulator, "GET", CMS);
    assert.equal(throttled.status, 429);
    assert.equal(throttled.headers.get("retry-after"), "2");
    const status = await throttled.json();
    assert.deepEqual([status.reason, status.details.retryAfterSeconds], ["TooManyRequests", 2]);
    assert.equal((await request(emulator, "GET", CMS)).status, 200, "times: 1");

    const failing = emulator.faults.fail(503, { match: { verb: "create" } });
    const refused = await request(emulator, "POST", CMS, { metadata: { name: "x" } });
    assert.equal(refused.status, 503);
    assert.equal((await refused.json()).reason, "ServiceUnavailable");
    failing.clear();

    emulator.faults.drop({ times: 1, match: { name: "x" } });
    await assert.rejects(request(emulator, "GET", `${CMS}/x`));
    assert.equal((await request(emulator, "GET", `${CMS}/x`)).status, 404);
    assert.ok(
      emulator.history.count({ name: "x", code: 0 }) === 1,
      "a drop is recorded with code 0",
    );
  },
);

Deno.test(
  "faults: a stalled watch is silent until cleared; dropped connections end streams",
  opts,
  async () => {
    await using emulator = await Emulator.start({ tls: false });
    const stall = emulator.faults.stallWatches({ match: { resource: "configmaps" } });
    const watch = await request(emulator, "GET", `${CMS}?watch=true&resourceVersion=1`);
    await request(emulator, "POST", CMS, { metadata: { name: "during-stall" } });
    const silent = await lines(watch.clone(), 1, 300);
    assert.deepEqual(silent, [], "nothing while stalled");
    stall.clear();
    assert.ok((await lines(watch, 1)).includes("ADDED"), "held events arrive after the stall");

    const open = await request(emulator, "GET", `${CMS}?watch=true`);
    const reading = open.body!.getReader().read().then(() => open.body!.getReader().read());
    emulator.faults.dropConnections();
    await reading.catch(() => {}); // either the stream ends or it errors: both are fine
  },
);

Deno.test("history: requests and object versions", opts, async () => {
  await using emulator = await Emulator.start();
  await request(emulator, "POST", CMS, { metadata: { name: "h" } });
  await request(
    emulator,
    "PATCH",
    `${CMS}/h`,
    { data: { a: "1" } },
    "application/merge-patch+json",
  );
  await request(emulator, "DELETE", `${CMS}/h`);
  await request(emulator, "GET", `${CMS}/h`);
  const verbs = emulator.history.find({ resource: "configmaps", name: "h" }).map((r) =>
    `${r.verb} ${r.code}`
  );
  assert.deepEqual(verbs, ["create 201", "patch 200", "delete 200", "get 404"]);
  const record = emulator.history.requests.at(-1)!;
  assert.equal(record.namespace, "default");
  assert.equal(record.path, `${CMS}/h`);
  const versions = emulator.history.versions("configmaps", "h", "default");
  assert.deepEqual(versions.map((v) => v.type), ["ADDED", "MODIFIED", "DELETED"]);
  assert.deepEqual(versions[1]!.object.data, { a: "1" });
  emulator.history.clear();
  assert.equal(emulator.history.requests.length, 0);
  assert.equal((await request(emulator, "GET", CMS, undefined)).status, 200);
  const other = await fetch(`${emulator.server}/api`, {
    client: Deno.createHttpClient({ caCerts: [emulator.caPem] }),
  } as RequestInit);
  assert.equal(other.status, 401, "other (here: no) tokens are rejected");
  await other.body?.cancel();
});

Deno.test(
  "applyYaml: CRDs, then their objects, in one text; re-applying merges",
  opts,
  async () => {
    await using emulator = await Emulator.start({ tls: false });
    const crds = await Deno.readTextFile(new URL("../../crds/example.yaml", import.meta.url));
    const object = "---\napiVersion: kopf.dev/v1\nkind: KopfExample\nmetadata:\n  name: ex\n" +
      "spec:\n  duration: 1m\n";
    const applied = await emulator.applyYaml(crds + object);
    assert.deepEqual(applied.map((o) => o.kind), ["CustomResourceDefinition", "KopfExample"]);
    assert.equal(applied[1]!.metadata?.namespace, "default");
    const again = await emulator.applyYaml(object.replace("1m", "2m"));
    assert.deepEqual(again[0]!.spec, { duration: "2m" });
    assert.equal(again[0]!.metadata?.generation, 2);
    const kubeconfig = await Deno.readTextFile(emulator.kubeconfigPath);
    assert.match(kubeconfig, new RegExp(`server: ${emulator.server}`));
    assert.ok(emulator.server.startsWith("http://") && emulator.caPem === "");
  },
);

Deno.test("a small compaction window turns old resourceVersions into 410 Gone", opts, async () => {
  await using emulator = await Emulator.start({ tls: false, compactionWindow: 3 });
  const first = await json(request(emulator, "POST", CMS, { metadata: { name: "c0" } }));
  for (let i = 1; i <= 4; i++) {
    await request(emulator, "POST", CMS, { metadata: { name: `c${i}` } });
  }
  const rv = (first.metadata as { resourceVersion: string }).resourceVersion;
  const watch = await request(emulator, "GET", `${CMS}?watch=true&resourceVersion=${rv}`);
  const event = JSON.parse((await watch.text()).trim());
  assert.deepEqual([event.type, event.object.code, event.object.reason], ["ERROR", 410, "Expired"]);
});

Deno.test("periodic bookmarks report progress", opts, async () => {
  await using emulator = await Emulator.start({ tls: false, bookmarkIntervalMs: 100 });
  // The namespace controller adds kube-system's kube-root-ca.crt soon after the start: watch
  // from after it, or its ADDED comes before the first bookmark.
  const systemCms = "/api/v1/namespaces/kube-system/configmaps";
  let rv = "";
  for (let i = 0; i < 200 && !rv; i++) {
    const { metadata, items } = await json(request(emulator, "GET", systemCms));
    const names = (items as { metadata: { name: string } }[]).map((o) => o.metadata.name);
    if (names.includes("kube-root-ca.crt")) {
      rv = (metadata as { resourceVersion: string }).resourceVersion;
    } else await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(rv, "kube-system never got its kube-root-ca.crt");
  const watch = await request(
    emulator,
    "GET",
    `/api/v1/namespaces/kube-system/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`,
  );
  await request(emulator, "POST", CMS, { metadata: { name: "elsewhere" } });
  assert.deepEqual(await lines(watch, 1), ["BOOKMARK"]);
});

Deno.test("label selectors parse and match like the API server's", () => {
  const labels = (l: Record<string, string>) => ({ metadata: { labels: l } });
  const cases: Array<[string, Record<string, string>, boolean]> = [
    ["a=b", { a: "b" }, true],
    ["a==b,c", { a: "b" }, false],
    ["a!=b", {}, true],
    ["a in (b, c),!d", { a: "c" }, true],
    ["a notin (b)", { a: "b" }, false],
    ["n>3", { n: "4" }, true],
  ];
  for (const [selector, given, expected] of cases) {
    assert.equal(parseLabelSelector(selector)(labels(given)), expected, selector);
  }
  for (const bad of ["a in (b", "a,", "=b", "a in b"]) {
    assert.throws(() => parseLabelSelector(bad), /parse|expected/, bad);
  }
});

Deno.test("strategic merge patch: keyed lists merge, sets union, directives apply", () => {
  const target = {
    metadata: { finalizers: ["a"] },
    spec: { containers: [{ name: "c", image: "x" }, { name: "d", image: "y" }], args: ["1"] },
  };
  const patched = strategicMergePatch(target, {
    metadata: { finalizers: ["b"] },
    spec: {
      containers: [{ name: "c", image: "z" }, { name: "d", $patch: "delete" }],
      args: ["2"],
      "$setElementOrder/containers": [{ name: "c" }],
    },
  });
  assert.deepEqual(patched, {
    metadata: { finalizers: ["b", "a"] },
    spec: { containers: [{ name: "c", image: "z" }], args: ["2"] },
  });
});

Deno.test("label selectors read empty places in a value set as the empty value, as the API server", () => {
  const labels = (l: Record<string, string>) => ({ metadata: { labels: l } });
  const cases: Array<[string, Record<string, string>, boolean]> = [
    ["a notin ()", {}, true],
    ["a notin ()", { a: "x" }, true],
    ["a notin ()", { a: "" }, false],
    ["a in ()", { a: "" }, true],
    ["a in ()", { a: "x" }, false],
    ["a in ( )", { a: "" }, true],
    ["a in (x,)", { a: "" }, true],
    ["a in (,x)", { a: "" }, true],
    ["a in (x,,y)", { a: "" }, true],
    ["a in (x,y)", { a: "" }, false],
    ["a in (x,y)", { a: "y" }, true],
  ];
  for (const [selector, given, expected] of cases) {
    assert.equal(parseLabelSelector(selector)(labels(given)), expected, `${selector} ${given.a}`);
  }
  for (const bad of ["a in (=)", "a in (x y)", "a in (x", "a notin"]) {
    assert.throws(() => parseLabelSelector(bad), /parse|expected/, bad);
  }
});

Deno.test(
  "request bodies over 3 MiB are refused with 413 RequestEntityTooLarge and not stored",
  opts,
  async () => {
    await using emulator = await Emulator.start();
    const big = { metadata: { name: "big" }, data: { x: "a".repeat(3 * 1024 * 1024) } };
    const response = await request(emulator, "POST", CMS, big);
    assert.equal(response.status, 413);
    assert.deepEqual(await response.json(), {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: "Request entity too large: limit is 3145728",
      reason: "RequestEntityTooLarge",
      code: 413,
    });
    // Without a Content-Length (chunked): refused once the limit is passed.
    const client = Deno.createHttpClient({ caCerts: emulator.caPem ? [emulator.caPem] : [] });
    const chunk = new TextEncoder().encode("a".repeat(1024 * 1024));
    let n = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (n++ < 8) c.enqueue(chunk);
        else c.close();
      },
    });
    const chunked = await fetch(`${emulator.server}${CMS}/big`, {
      method: "PATCH",
      client,
      headers: {
        authorization: `Bearer ${emulator.token}`,
        "content-type": "application/merge-patch+json",
      },
      body: stream,
    }).finally(() => client.close());
    assert.equal(chunked.status, 413);
    assert.equal((await chunked.json()).reason, "RequestEntityTooLarge");
    assert.equal((await request(emulator, "GET", `${CMS}/big`)).status, 404);
    // Just under the limit is read (and judged on its merits).
    const small = { metadata: { name: "small" }, data: { x: "a".repeat(1000) } };
    assert.equal((await request(emulator, "POST", CMS, small)).status, 201);
  },
);

Deno.test(
  "the bearer token must match exactly: no prefix, no extension, no other scheme",
  opts,
  async () => {
    await using emulator = await Emulator.start({ token: "s3cret-token" });
    const status = async (authorization: string | undefined) => {
      const client = Deno.createHttpClient({ caCerts: emulator.caPem ? [emulator.caPem] : [] });
      const response = await fetch(`${emulator.server}${CMS}`, {
        client,
        headers: authorization === undefined ? {} : { authorization },
      }).finally(() => client.close());
      await response.body?.cancel();
      return response.status;
    };
    assert.equal(await status("Bearer s3cret-token"), 200);
    for (
      const wrong of [
        undefined,
        "",
        "Bearer s3cret",
        "Bearer s3cret-token2",
        "Basic s3cret-token",
        "s3cret-token",
      ]
    ) {
      assert.equal(await status(wrong), 401, String(wrong));
    }
  },
);

Deno.test(
  "stop() removes the emulator's directory (its kubeconfig holds the token), even with a watch open",
  opts,
  async () => {
    const emulator = await Emulator.start();
    const dir = emulator.kubeconfigPath.replace(/\/kubeconfig$/, "");
    assert.ok((await Deno.stat(emulator.kubeconfigPath)).isFile);
    const client = Deno.createHttpClient({ caCerts: [emulator.caPem] });
    try {
      const watch = await fetch(`${emulator.server}${CMS}?watch=true`, {
        client,
        headers: { authorization: `Bearer ${emulator.token}` },
      } as RequestInit);
      assert.equal(watch.status, 200);
      // Not read, not cancelled: a client that still holds its watch when the emulator stops.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const stopped = await Promise.race([
        emulator.stop().then(() => true),
        new Promise<false>((r) => timer = setTimeout(() => r(false), 15_000)),
      ]);
      clearTimeout(timer);
      assert.ok(stopped, "stop() did not finish with a watch open");
      await assert.rejects(Deno.stat(dir), Deno.errors.NotFound, `${dir} is left behind`);
      await emulator.stop(); // twice is fine
      await watch.body?.cancel().catch(() => {});
    } finally {
      client.close();
      await emulator.stop();
    }
  },
);
