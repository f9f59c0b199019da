import assert from "node:assert/strict";
import { createCertificateAuthority, issueCertificate } from "../../kits/certificates.ts";
import { certificateNames } from "./x509_names.ts";

/** Reads a certificate with a full X.509 library, for comparison. */
async function libraryNames(pem: string): Promise<{ subject: string; issuer: string }> {
  await import("reflect-metadata");
  const x509 = await import("@peculiar/x509");
  const cert = new x509.X509Certificate(pem);
  return { subject: cert.subject, issuer: cert.issuer };
}

const format = (attributes: readonly { type: string; value: string }[]) =>
  attributes.map((a) => `${a.type}=${a.value}`).join(", ");

Deno.test("certificateNames() reads a CA's and a leaf's subject and issuer as a library does", async () => {
  const ca = await createCertificateAuthority({ commonName: "minikubeCA", organization: "acme" });
  const leaf = await issueCertificate(ca, {
    commonName: "k3s",
    organization: ["k3s", "system:masters"],
    dnsNames: ["localhost"],
    usages: "server",
  });
  const [caNames] = certificateNames(ca.certPem);
  assert.deepEqual(caNames?.subject, [
    { type: "CN", value: "minikubeCA" },
    { type: "O", value: "acme" },
  ]);
  assert.deepEqual(caNames?.issuer, caNames?.subject);
  // The leaf's names in a bundle with its CA: both certificates, in order.
  const bundle = certificateNames(`${leaf.certPem}\n${ca.certPem}`);
  assert.equal(bundle.length, 2);
  assert.deepEqual(bundle[0]?.issuer, caNames?.subject);
  assert.deepEqual(bundle[0]?.subject.map((a) => a.value), ["k3s", "k3s", "system:masters"]);
  // The same text as @peculiar/x509 gives (it writes "CN=…, O=…", and joins the attributes of
  // one multi-valued RDN with "+": the reader flattens those).
  for (const [pem, names] of [[ca.certPem, bundle[1]!], [leaf.certPem, bundle[0]!]] as const) {
    const expected = await libraryNames(pem);
    assert.equal(format(names.subject), expected.subject.replaceAll("+", ", "));
    assert.equal(format(names.issuer), expected.issuer.replaceAll("+", ", "));
  }
});

Deno.test("certificateNames() skips other PEM blocks and refuses broken certificates clearly", async () => {
  const ca = await createCertificateAuthority({ commonName: "k3s-server-ca@1700000000" });
  // A private key block beside it is not a certificate: skipped.
  const names = certificateNames(`${ca.keyPem}${ca.certPem}`);
  assert.deepEqual(names.map((n) => n.subject[0]?.value), ["k3s-server-ca@1700000000"]);
  assert.deepEqual(certificateNames("no PEM here"), []);

  const body = ca.certPem.split("\n").filter((l) => l && !l.startsWith("-----")).join("");
  const der = Uint8Array.from(atob(body), (c) => c.charCodeAt(0));
  const pemOf = (bytes: Uint8Array) =>
    `-----BEGIN CERTIFICATE-----\n${
      btoa(String.fromCharCode(...bytes))
    }\n-----END CERTIFICATE-----\n`;
  // Cut short: the outer length runs past the data.
  assert.throws(
    () => certificateNames(pemOf(der.subarray(0, der.length - 10))),
    /Certificate 1 of the PEM text is not a DER certificate: .*runs past its container/,
  );
  // Not a SEQUENCE at the top.
  const wrongTag = der.slice();
  wrongTag[0] = 0x31;
  assert.throws(() => certificateNames(pemOf(wrongTag)), /expected tag 0x30 at byte 0/);
  // A length of more than four octets.
  assert.throws(
    () => certificateNames(pemOf(new Uint8Array([0x30, 0x85, 1, 1, 1, 1, 1]))),
    /bad length/,
  );
  assert.throws(
    () => certificateNames("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----"),
    /Certificate 1 of the PEM text is not a DER certificate: expected tag 0x30/,
  );
  assert.throws(
    () => certificateNames("-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----"),
    /Certificate 1 of the PEM text is not valid base64/,
  );
});
