import assert from "node:assert/strict";
import { isLiteralNamespace, matchAnyNamespace, matchNamespace } from "./namespaces.ts";

Deno.test("matchNamespace() matches a plain name exactly (SCP-01)", () => {
  assert.equal(matchNamespace("default", "default"), true);
  assert.equal(matchNamespace("default", "default2"), false);
  assert.equal(matchNamespace("default", "xdefault"), false);
});

Deno.test("matchNamespace() supports * and ? globs (SCP-02)", () => {
  assert.equal(matchNamespace("*-pr-123-*", "app-pr-123-x"), true);
  assert.equal(matchNamespace("*-pr-123-*", "app-pr-124-x"), false);
  assert.equal(matchNamespace("*", "anything"), true);
  assert.equal(matchNamespace("ns?", "ns1"), true);
  assert.equal(matchNamespace("ns?", "ns12"), false);
  assert.equal(matchNamespace("ns?", "ns"), false);
  assert.equal(matchNamespace("ns-*", "ns-"), true);
});

Deno.test("matchNamespace() treats other characters literally (SCP-02)", () => {
  assert.equal(matchNamespace("a.b", "a.b"), true);
  assert.equal(matchNamespace("a.b", "axb"), false);
  assert.equal(matchNamespace("a+", "aa"), false);
  assert.equal(matchNamespace("a+", "a+"), true);
  assert.equal(matchNamespace("(x)|y", "y"), false);
});

Deno.test("matchNamespace() negation implies an initial * (SCP-03, SCP-04)", () => {
  assert.equal(matchNamespace("!*-pr-123-*", "app-pr-123-x"), false);
  assert.equal(matchNamespace("!*-pr-123-*", "default"), true);
  assert.equal(matchNamespace("!kube-*,!default", "kube-system"), false);
  assert.equal(matchNamespace("!kube-*,!default", "default"), false);
  assert.equal(matchNamespace("!kube-*,!default", "team-a"), true);
});

Deno.test("matchNamespace() follows the documented multi-glob example (SCP-04, SUB-62)", () => {
  const pattern = "myapp-*,!*-pr-*,*-pr-123";
  assert.equal(matchNamespace(pattern, "myapp-live"), true);
  assert.equal(matchNamespace(pattern, "myapp-pr-456"), false);
  assert.equal(matchNamespace(pattern, "myapp-pr-123"), true);
  assert.equal(matchNamespace(pattern, "otherapp-live"), false);
  assert.equal(matchNamespace(pattern, "otherapp-pr-123"), false);
});

Deno.test("matchNamespace() lets the rightmost matching glob win (SCP-04)", () => {
  const pattern = "a*,!ab*,abc*,!abcd";
  assert.equal(matchNamespace(pattern, "ax"), true);
  assert.equal(matchNamespace(pattern, "abx"), false);
  assert.equal(matchNamespace(pattern, "abce"), true);
  assert.equal(matchNamespace(pattern, "abcd"), false);
  assert.equal(matchNamespace(pattern, "b"), false);
  assert.equal(matchNamespace("!a*,ab*", "ab1"), true);
  assert.equal(matchNamespace("!a*,ab*", "a1"), false);
  assert.equal(matchNamespace("!a*,ab*", "zz"), true);
});

Deno.test("matchNamespace() adds nothing back when the first glob does not match (SCP-04)", () => {
  assert.equal(matchNamespace("team-*,other", "other"), false);
  assert.equal(matchNamespace("team-*,other", "team-x"), true);
});

Deno.test("matchNamespace() trims spaces around commas and ignores empty parts (SCP-04)", () => {
  assert.equal(matchNamespace("myapp-* , !*-pr-*", "myapp-live"), true);
  assert.equal(matchNamespace("myapp-* , !*-pr-*", "myapp-pr-1"), false);
  assert.equal(matchNamespace("a*,,!ab", "ab"), false);
  assert.equal(matchNamespace("", "default"), false);
  assert.equal(matchNamespace(" , ", "default"), false);
});

Deno.test("matchAnyNamespace() matches if any of several patterns matches (SCP-01)", () => {
  const patterns = ["default", "team-*"];
  assert.equal(matchAnyNamespace(patterns, "default"), true);
  assert.equal(matchAnyNamespace(patterns, "team-a"), true);
  assert.equal(matchAnyNamespace(patterns, "kube-system"), false);
  assert.equal(matchAnyNamespace([], "default"), false);
});

Deno.test("isLiteralNamespace() is false for names with ,*?! (SCP-06)", () => {
  assert.equal(isLiteralNamespace("default"), true);
  assert.equal(isLiteralNamespace("my-ns.1"), true);
  for (const pattern of ["a,b", "a*", "a?", "!a"]) {
    assert.equal(isLiteralNamespace(pattern), false, pattern);
  }
});

Deno.test("matchNamespace() takes regular expressions as whole-name matches (SCP-11)", () => {
  assert.equal(matchNamespace(/team-\d+/, "team-12"), true);
  assert.equal(matchNamespace(/team-\d+/, "team-12x"), false, "anchored at the end");
  assert.equal(matchNamespace(/team-\d+/, "xteam-12"), false, "anchored at the start");
  assert.equal(matchNamespace(/a|ab/, "ab"), true, "alternatives are tried as a whole");
  assert.equal(matchNamespace(/TEAM-.*/i, "team-x"), true, "flags are kept");
  const sticky = /ns-\d/g;
  assert.equal(matchNamespace(sticky, "ns-1"), true);
  assert.equal(matchNamespace(sticky, "ns-1"), true, "no lastIndex state between calls");
  assert.equal(matchNamespace(/!default/, "!default"), true, "no glob parsing in expressions");
  assert.equal(matchAnyNamespace(["default", /team-.*/], "team-a"), true);
  assert.equal(matchAnyNamespace(["default", /team-.*/], "other"), false);
  assert.equal(isLiteralNamespace(/default/), false, "an expression is never a literal name");
});
