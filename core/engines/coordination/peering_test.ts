import assert from "node:assert/strict";
import { createSettings } from "../../settings/settings.ts";
import { detectIdentity, OperatorPause, parsePeers, pausable } from "./peering.ts";

Deno.test("parsePeers() reads Kopf's entries, Python timestamps included", () => {
  const now = Date.parse("2024-05-01T12:00:00Z");
  const peers = parsePeers({
    py: { priority: 100, lifetime: 60, lastseen: "2024-05-01T11:59:30.123456+00:00" },
    js: { priority: "5", lifetime: 10, lastseen: "2024-05-01T11:00:00.000Z", extra: true },
    bare: {},
    broken: "not an entry",
  }, now);
  assert.deepEqual(peers.map((p) => [p.identity, p.priority, p.lifetime]), [
    ["py", 100, 60],
    ["js", 5, 10],
    ["bare", 0, 60],
  ]);
  const [py, js, bare] = peers;
  assert.equal(py!.deadline, Date.parse("2024-05-01T12:00:30.123Z"));
  assert.ok(js!.deadline <= now, "past lastseen + lifetime: dead");
  assert.equal(bare!.lastseen, now, "no lastseen: seen now");
  assert.deepEqual(parsePeers(undefined), []);
});

Deno.test("detectIdentity() prefers POD_ID, else user@host with a time and a suffix", () => {
  const saved = Deno.env.get("POD_ID");
  const user = Deno.env.get("USER");
  try {
    Deno.env.set("POD_ID", "my-pod-1");
    assert.equal(detectIdentity(), "my-pod-1");
    Deno.env.delete("POD_ID");
    Deno.env.set("USER", "alice");
    assert.match(detectIdentity(), /^[^@]+@[^/]+\/\d{14}\/[a-z0-9]{3}$/);
    assert.match(detectIdentity({ manual: true }), /^[^@/]+@[^/]+$/);
  } finally {
    if (saved === undefined) Deno.env.delete("POD_ID");
    else Deno.env.set("POD_ID", saved);
    if (user === undefined) Deno.env.delete("USER");
    else Deno.env.set("USER", user);
  }
});

Deno.test("detectIdentity() without a user (as in containers) names the pod or the host, not unknown@host", () => {
  const names = ["POD_ID", "USER", "USERNAME", "LOGNAME", "POD_NAME", "HOSTNAME"];
  const saved = new Map(names.map((name) => [name, Deno.env.get(name)]));
  try {
    for (const name of names) Deno.env.delete(name);
    Deno.env.set("POD_NAME", "my-operator-5d8f7-x2x9q");
    Deno.env.set("HOSTNAME", "some-host");
    assert.equal(detectIdentity({ manual: true }), "my-operator-5d8f7-x2x9q");
    assert.match(detectIdentity(), /^my-operator-5d8f7-x2x9q\/\d{14}\/[a-z0-9]{3}$/);
    Deno.env.delete("POD_NAME");
    assert.equal(detectIdentity({ manual: true }), "some-host");
    Deno.env.delete("HOSTNAME");
    assert.equal(detectIdentity({ manual: true }), Deno.hostname());
    Deno.env.set("USER", "alice");
    assert.equal(detectIdentity({ manual: true }), `alice@${Deno.hostname()}`);
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) Deno.env.delete(name);
      else Deno.env.set(name, value);
    }
  }
});

Deno.test("OperatorPause is paused while any reason is set", async () => {
  const pause = new OperatorPause();
  const first = pause.running();
  assert.equal(pause.paused, false);
  pause.set("a", true);
  pause.set("b", true);
  assert.ok(pause.paused && first.aborted);
  let resumed = false;
  const waiting = pause.resumed(new AbortController().signal).then(() => (resumed = true));
  pause.set("a", false);
  await Promise.resolve();
  assert.equal(resumed, false);
  pause.set("b", false);
  await waiting;
  assert.ok(!pause.paused && !pause.running().aborted);
});

Deno.test("pausable() closes the stream on a pause and reopens it on the resume, telling it so", async () => {
  const pause = new OperatorPause();
  const stop = new AbortController();
  const opened: number[] = [];
  const resumes: boolean[] = [];
  const hooks: string[] = [];
  async function* open(signal: AbortSignal, resumed: boolean) {
    resumes.push(resumed);
    const n = opened.push(opened.length + 1);
    yield n;
    await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
  }
  const stream = pausable(pause, stop.signal, open, {
    onPause: () => hooks.push("pause"),
    onResume: () => hooks.push("resume"),
  })[Symbol.asyncIterator]();
  assert.deepEqual(await stream.next(), { value: 1, done: false });
  const next = stream.next();
  pause.set("x", true);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(hooks, ["pause"]);
  pause.set("x", false);
  assert.deepEqual(await next, { value: 2, done: false });
  assert.deepEqual(hooks, ["pause", "resume"]);
  const end = stream.next();
  stop.abort();
  assert.deepEqual(await end, { value: undefined, done: true });
  assert.deepEqual(resumes, [false, true], "the first period starts, the second resumes");
});

Deno.test("createSettings() has Kopf's peering defaults; namespaced is clusterwide's inverse", () => {
  const settings = createSettings();
  const { name, priority, mandatory, standalone, stealth, lifetime, clusterwide } =
    settings.peering;
  assert.deepEqual(
    { name, priority, mandatory, standalone, stealth, lifetime, clusterwide },
    {
      name: "default",
      priority: 0,
      mandatory: false,
      standalone: false,
      stealth: false,
      lifetime: 60,
      clusterwide: false,
    },
  );
  assert.equal(settings.peering.namespaced, true);
  settings.peering.namespaced = false;
  assert.equal(settings.peering.clusterwide, true);
  assert.equal(createSettings({ peering: { namespaced: false } }).peering.clusterwide, true);
});
