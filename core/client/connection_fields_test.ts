import assert from "node:assert/strict";
import { connectionInfo, isConnectionFields } from "./connection_fields.ts";
import type { ConnectionInfo } from "./connection.ts";

const CA = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
const CERT = "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n";
const KEY = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";

function authorization(info: ConnectionInfo): Promise<string | undefined> {
  return info.credentials.headers().then((headers) => headers.Authorization);
}

Deno.test("connectionInfo() reads the CA, certificate and key from files (AUTH-03)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/ca.crt`, CA);
    await Deno.writeTextFile(`${dir}/client.crt`, CERT);
    await Deno.writeTextFile(`${dir}/client.key`, KEY);
    const info = connectionInfo({
      server: "https://example.test:6443/",
      caPath: `${dir}/ca.crt`,
      certificatePath: `${dir}/client.crt`,
      privateKeyPath: `${dir}/client.key`,
      certificateData: "ignored: the path wins",
      defaultNamespace: "team",
      insecure: true,
      priority: 5,
      expiration: "2099-12-31T23:59:59",
    });
    assert.equal(info.server, "https://example.test:6443");
    assert.equal(info.caPem, CA);
    assert.equal(info.clientCertPem, CERT);
    assert.equal(info.clientKeyPem, KEY);
    assert.equal(info.namespace, "team");
    assert.equal(info.insecureSkipTlsVerify, true);
    assert.equal(info.priority, 5);
    assert.equal(info.expiration, "2099-12-31T23:59:59");
    assert.equal(await authorization(info), undefined, "no token, no header");
    assert.throws(() => connectionInfo({ server: "https://x", caPath: `${dir}/missing` }));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("connectionInfo() takes PEM or base64 of PEM, as text or bytes (AUTH-03)", () => {
  const bytes = new TextEncoder().encode(btoa(KEY));
  const info = connectionInfo({
    server: "https://x",
    caData: btoa(CA),
    certificateData: CERT,
    privateKeyData: bytes,
  });
  assert.equal(info.caPem, CA);
  assert.equal(info.clientCertPem, CERT);
  assert.equal(info.clientKeyPem, KEY);
  assert.throws(
    () => connectionInfo({ server: "https://x", caData: "not a certificate" }),
    /caData is neither PEM nor base64/,
  );
  assert.throws(
    () => connectionInfo({ server: "https://x", caData: btoa("plain text") }),
    /caData is neither PEM nor base64/,
  );
});

Deno.test("connectionInfo() trusts both caPath and caData when both are given (AUTH-03)", async () => {
  const path = await Deno.makeTempFile();
  try {
    await Deno.writeTextFile(path, CA);
    const info = connectionInfo({ server: "https://x", caPath: path, caData: CERT });
    assert.equal(info.caPem, `${CA}\n${CERT}`);
  } finally {
    await Deno.remove(path);
  }
});

Deno.test("connectionInfo() sends the token with Bearer or the given scheme (AUTH-03)", async () => {
  assert.equal(
    await authorization(connectionInfo({ server: "https://x", token: "abc" })),
    "Bearer abc",
  );
  assert.equal(
    await authorization(connectionInfo({ server: "https://x", token: "abc", scheme: "Digest" })),
    "Digest abc",
  );
  assert.equal(
    await authorization(connectionInfo({ server: "https://x", scheme: "Negotiate xyz" })),
    "Negotiate xyz",
  );
  const info = connectionInfo({ server: "https://x", token: "abc" });
  assert.equal(await info.credentials.invalidate(), false, "static: nothing to refresh");
});

Deno.test("connectionInfo() sends username and password as Basic auth (AUTH-03)", async () => {
  const info = connectionInfo({ server: "https://x", username: "ussser", password: "passsw" });
  assert.equal(await authorization(info), "Basic dXNzc2VyOnBhc3Nzdw==");
  const unicode = connectionInfo({ server: "https://x", username: "jö", password: "ü" });
  assert.equal(await authorization(unicode), `Basic ${btoa("j\xc3\xb6:\xc3\xbc")}`);
  assert.throws(() => connectionInfo({ server: "https://x", username: "u" }), /both a username/);
  assert.throws(
    () => connectionInfo({ server: "https://x", username: "u", password: "p", token: "t" }),
    /not both/,
  );
});

Deno.test("connectionInfo() rejects unknown fields and a missing server (AUTH-03)", () => {
  const mixed = { server: "https://x", caPem: CA } as unknown as { server: string };
  assert.throws(() => connectionInfo(mixed), /Unknown ConnectionInfo fields: caPem/);
  assert.throws(() => connectionInfo({ server: "" }), /needs a server/);
});

Deno.test("isConnectionFields() tells the flat form from a ConnectionInfo (AUTH-03)", () => {
  assert.ok(isConnectionFields({ server: "https://x", token: "t" }));
  assert.ok(!isConnectionFields(connectionInfo({ server: "https://x" })));
  assert.ok(!isConnectionFields(null));
  assert.ok(!isConnectionFields({ token: "t" }));
});

Deno.test("connectionInfo() expands a leading ~/ in paths to the home directory (AUTH-03)", async () => {
  const home = await Deno.makeTempDir();
  const previous = Deno.env.get("HOME");
  try {
    await Deno.writeTextFile(`${home}/ca.crt`, CA);
    Deno.env.set("HOME", home);
    assert.equal(connectionInfo({ server: "https://x", caPath: "~/ca.crt" }).caPem, CA);
  } finally {
    if (previous === undefined) Deno.env.delete("HOME");
    else Deno.env.set("HOME", previous);
    await Deno.remove(home, { recursive: true });
  }
});
