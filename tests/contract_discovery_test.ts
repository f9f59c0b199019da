/**
 * Contract tests of what a client finds, on the emulator and the real API server alike (the
 * runner: tests/_contract.ts): discovery following a CRD created and deleted at runtime, `/version`
 * (with a trailing slash too), 401 for other tokens, and kubectl's get, apply and create.
 */

import assert from "node:assert/strict";
import { CRD_RESOURCE } from "../core/client/discovery.ts";
import {
  contract,
  crd,
  GROUP,
  kubectl,
  kubectlCommand,
  stopEmulatorLast,
  WIDGETS,
} from "./_contract.ts";
import { applyCrdObjects, eventually, sleep } from "./_support.ts";

contract("discovery follows a CRD created at runtime", async ({ client, namespace }) => {
  const plural = `g${
    Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => "abcdefghij"[b % 10]).join("")
  }s`;
  const definition = crd(plural, "Gadget", true);
  await applyCrdObjects(client, [definition]);
  const live = await client.api.get(CRD_RESOURCE, `${plural}.${GROUP}`);
  const status = live.status as {
    conditions: Array<{ type: string; status: string }>;
    acceptedNames: { kind: string };
  };
  assert.ok(status.conditions.some((c) => c.type === "NamesAccepted" && c.status === "True"));
  assert.equal(status.acceptedNames.kind, "Gadget");
  const list = await client.http.json<
    {
      resources: Array<
        {
          name: string;
          verbs: string[];
          shortNames?: string[];
          categories?: string[];
          namespaced: boolean;
        }
      >;
    }
  >({ path: `/apis/${GROUP}/v1` });
  const entry = list.resources.find((r) => r.name === plural);
  assert.ok(entry && entry.verbs.includes("watch") && entry.namespaced);
  assert.deepEqual([entry.shortNames, entry.categories], [[`${plural}x`], ["contract"]]);
  assert.ok(list.resources.some((r) => r.name === `${plural}/status`));
  const [found] = await client.discovery.find((r) => r.plural === plural);
  assert.deepEqual(found?.subresources, ["status"]);
  const core = await client.http.json<
    { resources: Array<{ name: string; shortNames?: string[]; namespaced: boolean }> }
  >({ path: "/api/v1" });
  assert.deepEqual(core.resources.find((r) => r.name === "configmaps")?.shortNames, ["cm"]);
  assert.equal(core.resources.find((r) => r.name === "namespaces")?.namespaced, false);
  const groups = await client.http.json<{ groups: Array<{ name: string }> }>({ path: "/apis" });
  assert.ok(groups.groups.some((g) => g.name === GROUP));
  assert.match(
    (await client.http.json<{ gitVersion: string }>({ path: "/version" })).gitVersion,
    /^v1\./,
  );

  const gadget = { ...WIDGETS, plural, kind: "Gadget" };
  await client.api.create(gadget, {
    apiVersion: `${GROUP}/v1`,
    kind: "Gadget",
    metadata: { name: "g" },
  }, { namespace });
  await client.api.delete(CRD_RESOURCE, `${plural}.${GROUP}`);
  await eventually(
    async () =>
      await client.api.get(CRD_RESOURCE, `${plural}.${GROUP}`).then(() => false, () => true),
    60_000,
    "CRD gone",
  );
  await eventually(
    async () => {
      const again = await client.http.json<{ resources: Array<{ name: string }> }>({
        path: `/apis/${GROUP}/v1`,
      }).catch(() => ({ resources: [] }));
      return !again.resources.some((r) => r.name === plural);
    },
    30_000,
    "gone from discovery",
  );
});

contract(
  "/version/ with a trailing slash answers as /version (kr8s asks that)",
  async ({ client }) => {
    const plain = await client.http.json<{ gitVersion: string }>({ path: "/version" });
    const slashed = await client.http.json<{ gitVersion: string }>({ path: "/version/" });
    assert.match(slashed.gitVersion, /^v1\./);
    assert.deepEqual(slashed, plain);
  },
);

contract("authentication: other tokens get 401", async ({ client }) => {
  const response = await fetch(`${client.http.connection.server}/api/v1/namespaces`, {
    headers: { authorization: "Bearer wrong" },
    client: Deno.createHttpClient({
      caCerts: client.http.connection.caPem ? [client.http.connection.caPem] : [],
    }),
  } as RequestInit);
  assert.equal(response.status, 401);
  assert.equal((await response.json()).reason, "Unauthorized");
});

contract("kubectl: get, apply, create", async ({ namespace, kubeconfigPath }) => {
  if (!kubectl) return;
  const { ok: run } = kubectlCommand(kubeconfigPath);
  assert.match(await run("get", "ns"), /default\s+Active/);
  assert.match(
    await run("apply", "-f", "crds/example.yaml"),
    /kopfexamples.kopf.dev (created|unchanged|configured)/,
  );
  await sleep(1000); // kubectl's discovery cache may predate the CRD
  assert.match(await run("get", "kopfexamples", "-n", namespace), /No resources found/);
  const object =
    `{"apiVersion":"kopf.dev/v1","kind":"KopfExample","metadata":{"name":"kx","namespace":"${namespace}"},"spec":{"duration":"1m"}}`;
  const file = await Deno.makeTempFile({ suffix: ".json" });
  await Deno.writeTextFile(file, object);
  assert.match(await run("apply", "-f", file), /kopfexample.kopf.dev\/kx created/);
  assert.match(await run("get", "kex", "-n", namespace), /kx\s+1m/);
  assert.match(
    await run("create", "configmap", "made-by-kubectl", "-n", namespace, "--from-literal=a=b"),
    /created/,
  );
  assert.match(
    await run("get", "cm", "made-by-kubectl", "-n", namespace, "-o", "jsonpath={.data.a}"),
    /^b$/,
  );
  assert.match(await run("delete", "kex", "kx", "-n", namespace), /deleted/);
  await Deno.remove(file);
});

stopEmulatorLast();
