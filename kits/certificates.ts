/**
 * A tiny self-signed certificate authority for tests and webhooks: an EC P-256 CA, leaf
 * certificates for TLS servers and clients signed by it, and bare key pairs. Everything is PEM:
 * certificates as `CERTIFICATE`, private keys as PKCS#8 `PRIVATE KEY`, public keys as SPKI
 * `PUBLIC KEY` — the formats Go (kube-apiserver), rustls (`Deno.createHttpClient`,
 * `Deno.serve`) and OpenSSL all accept.
 *
 * Built on `@peculiar/x509` and WebCrypto; nothing is written to disk.
 *
 * @example
 * ```ts
 * import { createCertificateAuthority, issueCertificate } from "./certificates.ts";
 *
 * const ca = await createCertificateAuthority({ commonName: "my-webhook-ca" });
 * const server = await issueCertificate(ca, {
 *   commonName: "localhost",
 *   dnsNames: ["localhost"],
 *   ipAddresses: ["127.0.0.1"],
 *   usages: "server",
 * });
 * // Deno.serve({ hostname: "127.0.0.1", port: 0, cert: server.certPem, key: server.keyPem }, ...)
 * // and put btoa(ca.certPem) into the webhook's caBundle.
 * ```
 * @module
 */

import type * as X509 from "@peculiar/x509";
import {
  type IssuedServerCertificate,
  setDefaultCertificateIssuer,
} from "../core/engines/admission/webhooks.ts";

// Loaded on first use, so that importing this kit (the main module does, for webhook servers)
// costs nothing until a certificate is made. reflect-metadata must be loaded before
// @peculiar/x509 (its ASN.1 schemas use decorators).
let loading: Promise<typeof X509> | undefined;
function loadX509(): Promise<typeof X509> {
  return loading ??= import("reflect-metadata").then(() => import("@peculiar/x509"));
}

/**
 * How a leaf certificate may be used: `"server"` = TLS serverAuth, `"client"` = TLS clientAuth.
 *
 * @example
 * ```ts
 * import type { CertificateUsage } from "./certificates.ts";
 *
 * const both: CertificateUsage[] = ["server", "client"];
 * ```
 */
export type CertificateUsage = "server" | "client";

/**
 * A certificate authority: its self-signed certificate and its private key, both PEM.
 * Plain data, so it can be stored and passed around; {@link issueCertificate} imports the key.
 *
 * @example
 * ```ts
 * import { createCertificateAuthority } from "./certificates.ts";
 *
 * const ca = await createCertificateAuthority();
 * await Deno.writeTextFile("ca.crt", ca.certPem);
 * ```
 */
export interface CertificateAuthority {
  /** The CA certificate, PEM `CERTIFICATE`. Use it as a trust anchor (`caCerts`, `caBundle`). */
  readonly certPem: string;
  /** The CA private key (EC P-256), PEM PKCS#8 `PRIVATE KEY`. */
  readonly keyPem: string;
}

/**
 * A leaf certificate and its private key, both PEM.
 *
 * @example
 * ```ts
 * import { createCertificateAuthority, issueCertificate } from "./certificates.ts";
 *
 * const ca = await createCertificateAuthority();
 * const { certPem, keyPem } = await issueCertificate(ca, { commonName: "admin", usages: "client" });
 * ```
 */
export interface IssuedCertificate {
  /** The certificate, PEM `CERTIFICATE`. */
  readonly certPem: string;
  /** Its private key (EC P-256), PEM PKCS#8 `PRIVATE KEY`. */
  readonly keyPem: string;
}

/**
 * Options of {@link createCertificateAuthority}.
 *
 * @example
 * ```ts
 * import type { CertificateAuthorityOptions } from "./certificates.ts";
 *
 * const options: CertificateAuthorityOptions = { commonName: "test-ca", validityDays: 7 };
 * ```
 */
export interface CertificateAuthorityOptions {
  /** Subject CN of the CA. Default: `"kopf-ts-ca"`. */
  commonName?: string;
  /** Subject O of the CA, if any. */
  organization?: string;
  /** Validity from now (backdated by one hour against clock skew). Default: 365 days. */
  validityDays?: number;
}

/**
 * Options of {@link issueCertificate}.
 *
 * @example
 * ```ts
 * import type { CertificateOptions } from "./certificates.ts";
 *
 * const admin: CertificateOptions = {
 *   commonName: "admin",
 *   organization: "system:masters",
 *   usages: "client",
 * };
 * ```
 */
export interface CertificateOptions {
  /** Subject CN. For client certificates, Kubernetes takes it as the user name. */
  commonName: string;
  /** Subject O (one or several). For client certificates, Kubernetes takes them as groups. */
  organization?: string | readonly string[];
  /** DNS subjectAltNames. TLS clients (Go, rustls) match only SANs, never the CN. */
  dnsNames?: readonly string[];
  /** IP subjectAltNames (IPv4 or IPv6 literals), e.g. `["127.0.0.1"]`. */
  ipAddresses?: readonly string[];
  /** Extended key usage(s): `"server"` (serverAuth), `"client"` (clientAuth) or both. */
  usages: CertificateUsage | readonly CertificateUsage[];
  /** Validity from now (backdated by one hour against clock skew). Default: 365 days. */
  validityDays?: number;
}

/**
 * A bare key pair, both halves PEM.
 *
 * @example
 * ```ts
 * import { generateKeyPair } from "./certificates.ts";
 *
 * const { privateKeyPem, publicKeyPem } = await generateKeyPair("rsa-2048");
 * ```
 */
export interface KeyPairPem {
  /** PEM PKCS#8 `PRIVATE KEY`. */
  readonly privateKeyPem: string;
  /** PEM SPKI `PUBLIC KEY`. */
  readonly publicKeyPem: string;
}

/**
 * Key algorithms for {@link generateKeyPair}: ECDSA on P-256, or RSA 2048 (RSASSA-PKCS1-v1_5).
 *
 * @example
 * ```ts
 * import { generateKeyPair, type KeyAlgorithm } from "./certificates.ts";
 *
 * const algorithm: KeyAlgorithm = "rsa-2048";
 * const keys = await generateKeyPair(algorithm);
 * ```
 */
export type KeyAlgorithm = "ec-p256" | "rsa-2048";

const EC_P256: EcKeyImportParams & EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const ECDSA_SHA256: EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
const RSA_2048: RsaHashedKeyGenParams = {
  name: "RSASSA-PKCS1-v1_5",
  modulusLength: 2048,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: "SHA-256",
};
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * Creates a new self-signed certificate authority with an EC P-256 key
 * (basicConstraints CA:TRUE, keyUsage keyCertSign + cRLSign + digitalSignature).
 *
 * @example
 * ```ts
 * import { createCertificateAuthority } from "./certificates.ts";
 *
 * const ca = await createCertificateAuthority({ commonName: "kopf-ts-test-ca" });
 * console.log(ca.certPem.startsWith("-----BEGIN CERTIFICATE-----")); // true
 * ```
 */
export async function createCertificateAuthority(
  options: CertificateAuthorityOptions = {},
): Promise<CertificateAuthority> {
  const x509 = await loadX509();
  const keys = await crypto.subtle.generateKey(EC_P256, true, ["sign", "verify"]);
  const name = subjectName(options.commonName ?? "kopf-ts-ca", options.organization);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialNumber(),
    name,
    ...validity(options.validityDays),
    keys,
    signingAlgorithm: ECDSA_SHA256,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign |
          x509.KeyUsageFlags.digitalSignature,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
    ],
  }, crypto);
  return { certPem: cert.toString("pem"), keyPem: await exportPrivateKey(keys.privateKey) };
}

/**
 * Issues a leaf certificate with a fresh EC P-256 key, signed by `ca`.
 * Servers need their host names/IPs in `dnsNames`/`ipAddresses`; Kubernetes client
 * certificates carry the user in `commonName` and the groups in `organization`.
 *
 * @example
 * ```ts
 * import { createCertificateAuthority, issueCertificate } from "./certificates.ts";
 *
 * const ca = await createCertificateAuthority();
 * const serving = await issueCertificate(ca, {
 *   commonName: "localhost",
 *   dnsNames: ["localhost"],
 *   ipAddresses: ["127.0.0.1", "::1"],
 *   usages: "server",
 * });
 * const admin = await issueCertificate(ca, {
 *   commonName: "admin",
 *   organization: "system:masters",
 *   usages: "client",
 * });
 * ```
 */
export async function issueCertificate(
  ca: CertificateAuthority,
  options: CertificateOptions,
): Promise<IssuedCertificate> {
  const x509 = await loadX509();
  const caCert = new x509.X509Certificate(ca.certPem);
  const caKey = await crypto.subtle.importKey(
    "pkcs8",
    x509.PemConverter.decodeFirst(ca.keyPem),
    EC_P256,
    false,
    ["sign"],
  );
  const keys = await crypto.subtle.generateKey(EC_P256, true, ["sign", "verify"]);
  const usages = typeof options.usages === "string" ? [options.usages] : options.usages;
  if (usages.length === 0) throw new TypeError("issueCertificate: `usages` must not be empty");
  const extensions: X509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension(
      usages.map((usage) =>
        usage === "server" ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth
      ),
      false,
    ),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, crypto),
    await x509.AuthorityKeyIdentifierExtension.create(caCert, false, crypto),
  ];
  const altNames: X509.JsonGeneralName[] = [
    ...(options.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  if (altNames.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension(altNames, false));
  }
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialNumber(),
    subject: subjectName(options.commonName, options.organization),
    issuer: caCert.subjectName,
    ...validity(options.validityDays),
    publicKey: keys.publicKey,
    signingKey: caKey,
    signingAlgorithm: ECDSA_SHA256,
    extensions,
  }, crypto);
  return { certPem: cert.toString("pem"), keyPem: await exportPrivateKey(keys.privateKey) };
}

/**
 * Generates a bare signing key pair and exports both halves as PEM. RSA 2048 keys suit
 * kube-apiserver's `--service-account-signing-key-file`/`--service-account-key-file`.
 *
 * @example
 * ```ts
 * import { generateKeyPair } from "./certificates.ts";
 *
 * const sa = await generateKeyPair("rsa-2048");
 * await Deno.writeTextFile("sa.key", sa.privateKeyPem);
 * await Deno.writeTextFile("sa.pub", sa.publicKeyPem);
 * ```
 */
export async function generateKeyPair(algorithm: KeyAlgorithm = "ec-p256"): Promise<KeyPairPem> {
  const x509 = await loadX509();
  const keys = await crypto.subtle.generateKey(
    algorithm === "rsa-2048" ? RSA_2048 : EC_P256,
    true,
    ["sign", "verify"],
  );
  const spki = await crypto.subtle.exportKey("spki", keys.publicKey);
  return {
    privateKeyPem: await exportPrivateKey(keys.privateKey),
    publicKeyPem: x509.PemConverter.encode(spki, "PUBLIC KEY"),
  };
}

async function exportPrivateKey(key: CryptoKey): Promise<string> {
  const x509 = await loadX509();
  return x509.PemConverter.encode(await crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

function subjectName(
  commonName: string,
  organization: string | readonly string[] | undefined,
): X509.JsonName {
  const name: X509.JsonName = [{ CN: [commonName] }];
  const orgs = organization === undefined
    ? []
    : typeof organization === "string"
    ? [organization]
    : [...organization];
  if (orgs.length > 0) name.push({ O: orgs });
  return name;
}

function validity(days: number | undefined): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return {
    notBefore: new Date(now - HOUR_MS),
    notAfter: new Date(now + (days ?? 365) * DAY_MS),
  };
}

/** 16 random bytes, first bit cleared so that the DER INTEGER stays positive. */
function randomSerialNumber(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f | 0x01;
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Issues a self-signed webhook server certificate: a fresh CA, and a server certificate for
 * the given host names and IP addresses (the first non-IP name, else the first IP, is the
 * common name). Webhook servers use it when they are given no certificate files; it is
 * installed as their default when this kit is loaded.
 *
 * @param hostnames DNS names and IP addresses for the subjectAltNames.
 * @returns The server certificate, its key, and the CA for `caBundle`.
 * @example
 * ```ts
 * import { selfSignedServerCertificate } from "./certificates.ts";
 *
 * const { certPem, keyPem, caPem } = await selfSignedServerCertificate(["localhost", "127.0.0.1"]);
 * ```
 */
export async function selfSignedServerCertificate(
  hostnames: readonly string[],
): Promise<IssuedServerCertificate> {
  const ips = hostnames.filter(isIpAddress).map((ip) => ip.replace(/^\[|\]$/g, ""));
  const dnsNames = hostnames.filter((name) => !isIpAddress(name));
  const commonName = dnsNames[0] ?? ips[0] ?? "localhost";
  const ca = await createCertificateAuthority({ commonName: `${commonName} (kopf webhook CA)` });
  const server = await issueCertificate(ca, {
    commonName,
    dnsNames,
    ipAddresses: ips,
    usages: "server",
  });
  return { certPem: server.certPem, keyPem: server.keyPem, caPem: ca.certPem };
}

function isIpAddress(name: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(name) || name.includes(":");
}

setDefaultCertificateIssuer(selfSignedServerCertificate);
