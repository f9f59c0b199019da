import assert from "node:assert/strict";
import { expirationTime } from "./connection.ts";

Deno.test("expirationTime() reads a naive date-time as UTC, whatever the local zone (AUTH-04)", () => {
  const zone = Deno.env.get("TZ");
  Deno.env.set("TZ", "Asia/Tokyo"); // UTC+9: a local reading would be 9 hours off
  try {
    assert.notEqual(new Date(2099, 11, 31).getTimezoneOffset(), 0, "the zone took effect");
    const utc = Date.UTC(2099, 11, 31, 23, 59, 59);
    assert.equal(expirationTime("2099-12-31T23:59:59"), utc);
    assert.equal(expirationTime("2099-12-31 23:59:59"), utc);
    assert.equal(expirationTime("2099-12-31T23:59:59.250"), utc + 250);
    assert.equal(expirationTime("2099-12-31T23:59:59Z"), utc);
    assert.equal(expirationTime("2100-01-01T01:59:59+02:00"), utc);
    assert.equal(expirationTime(new Date(utc)), utc);
    assert.equal(expirationTime(undefined), undefined);
    assert.throws(() => expirationTime("tomorrow"), TypeError);
  } finally {
    if (zone === undefined) Deno.env.delete("TZ");
    else Deno.env.set("TZ", zone);
  }
});
