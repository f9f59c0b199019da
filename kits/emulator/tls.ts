/**
 * A throwaway certificate authority and a serving certificate for 127.0.0.1/localhost, made
 * with `@peculiar/x509` and WebCrypto (EC P-256), in PEM — accepted by rustls (`fetch` with
 * `Deno.createHttpClient`) and Go (kubectl).
 * @module
 */

// reflect-metadata must be loaded before @peculiar/x509 (its ASN.1 schemas use decorators).
import "reflect-metadata";
import * as x509 from "@peculiar/x509";

/** The serving material. */
export interface ServingCertificate {
  /** The CA certificate to trust (PEM). */
  readonly caPem: string;
  /** The server certificate (PEM). */
  readonly certPem: string;
  /** The server's private key (PEM PKCS#8). */
  readonly keyPem: string;
}

const EC: EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING: EcdsaParams = { name: "ECDSA", hash: "SHA-256" };

function serial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0]! & 0x7f) | 0x01;
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function pkcs8(key: CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

/** Creates a CA and a server certificate for `127.0.0.1`, `::1` and `localhost`. */
export async function createServingCertificate(): Promise<ServingCertificate> {
  const notBefore = new Date(Date.now() - 3_600_000);
  const notAfter = new Date(Date.now() + 365 * 86_400_000);
  const caKeys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: [{ CN: ["kopf-emulator-ca"] }],
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: SIGNING,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign |
          x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey, false, crypto),
    ],
  }, crypto);
  const keys = await crypto.subtle.generateKey(EC, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: [{ CN: ["kopf-emulator"] }],
    issuer: ca.subjectName,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: SIGNING,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
      await x509.AuthorityKeyIdentifierExtension.create(ca, false, crypto),
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "localhost" },
        { type: "ip", value: "127.0.0.1" },
        { type: "ip", value: "::1" },
      ], false),
    ],
  }, crypto);
  return {
    caPem: ca.toString("pem"),
    certPem: cert.toString("pem"),
    keyPem: await pkcs8(keys.privateKey),
  };
}
