import assert from "node:assert/strict";
import type { ConnectionInfo } from "./connection.ts";
import { LoginError, Vault, type VaultItem } from "./vault.ts";

function item(key: string, token: string, extra: Partial<ConnectionInfo> = {}): VaultItem {
  return {
    key,
    info: {
      server: "https://127.0.0.1:6443",
      source: key,
      credentials: {
        headers: () => Promise.resolve({ Authorization: `Bearer ${token}` }),
        invalidate: () => Promise.resolve(false),
      },
      ...extra,
    },
  };
}

Deno.test("Vault uses the highest priority first, at random among equals (AUTH-06)", async () => {
  const items = [item("low", "l", { priority: -1 }), item("a", "a"), item("b", "b")];
  const first = new Vault(items, { relogin: () => Promise.resolve([]), random: () => 0 });
  const last = new Vault(items, { relogin: () => Promise.resolve([]), random: () => 0.99 });
  assert.deepEqual(await first.headers(), { Authorization: "Bearer a" });
  assert.deepEqual(await last.headers(), { Authorization: "Bearer b" });
  const high = new Vault([...items, item("high", "h", { priority: 5 })], {
    relogin: () => Promise.resolve([]),
  });
  assert.deepEqual(await high.headers(), { Authorization: "Bearer h" });
});

Deno.test("Vault drops a rejected credential, then re-logs in once, ignoring known-bad ones (AUTH-10, SUB-71)", async () => {
  let logins = 0;
  const relogin = () => {
    logins++;
    return Promise.resolve(logins === 1 ? [item("again", "bad"), item("new", "good")] : []);
  };
  const vault = new Vault([item("one", "bad", { priority: 1 }), item("two", "worse")], {
    relogin,
  });
  const bad = await vault.headers();
  assert.deepEqual(bad, { Authorization: "Bearer bad" });
  assert.equal(await vault.invalidate(bad), true);
  const worse = await vault.headers();
  assert.deepEqual(worse, { Authorization: "Bearer worse" });
  await vault.invalidate(worse);
  assert.equal(logins, 0, "no re-login while credentials are left");
  // Empty: one re-login; its copy of the known-bad token is skipped.
  const good = await vault.headers();
  assert.deepEqual(good, { Authorization: "Bearer good" });
  assert.equal(logins, 1);
  await vault.invalidate(good);
  // Nothing new from the next re-login: the vault fails and says so.
  let failed: LoginError | undefined;
  const exhausted = new Vault([], { relogin, onFailure: (e) => (failed = e) });
  await assert.rejects(() => exhausted.headers(), LoginError);
  await assert.rejects(() => vault.headers(), LoginError);
  assert.ok(failed instanceof LoginError);
});

Deno.test("Vault skips expired credentials; a naive expiration is UTC (AUTH-03)", async () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0);
  const vault = new Vault([
    item("expired", "old", { priority: 10, expiration: "2030-01-01T11:59:59" }),
    item("valid", "new", { expiration: new Date(now + 60_000) }),
  ], { relogin: () => Promise.resolve([]), now: () => now });
  assert.deepEqual(await vault.headers(), { Authorization: "Bearer new" });
  assert.equal(vault.size, 1, "the expired one is removed");
});

Deno.test("Vault lets a credential refresh itself before dropping it", async () => {
  let refreshed = false;
  const vault = new Vault([{
    key: "exec",
    info: {
      server: "https://127.0.0.1:6443",
      source: "exec",
      credentials: {
        headers: () => Promise.resolve({ Authorization: refreshed ? "Bearer 2" : "Bearer 1" }),
        invalidate: () => Promise.resolve(refreshed = true),
      },
    },
  }], { relogin: () => Promise.resolve([]) });
  await vault.invalidate(await vault.headers());
  assert.deepEqual(await vault.headers(), { Authorization: "Bearer 2" });
});
