/**
 * The subject and issuer names of X.509 certificates in PEM text, read straight from their DER
 * encoding: enough to tell whose CA signs a server (a Minikube or K3s cluster's CA names itself
 * so), without loading a certificate library. Only the names are read; nothing is verified.
 * @module
 */

/** One attribute of a distinguished name, e.g. `{ type: "CN", value: "minikubeCA" }`. */
export interface NameAttribute {
  /** `CN`, `O`, `OU`, `C`, `L`, `ST`, or the dotted OID for any other type. */
  readonly type: string;
  /** The attribute's text (string types only; other values are left out). */
  readonly value: string;
}

/**
 * The names of one certificate, each as its attributes in order (the attributes of a
 * multi-valued RDN one after another).
 */
export interface CertificateNames {
  /** Who the certificate is for. */
  readonly subject: readonly NameAttribute[];
  /** Who signed it (the same as the subject for a self-signed CA). */
  readonly issuer: readonly NameAttribute[];
}

const SHORT_NAMES: Readonly<Record<string, string>> = {
  "2.5.4.3": "CN",
  "2.5.4.6": "C",
  "2.5.4.7": "L",
  "2.5.4.8": "ST",
  "2.5.4.10": "O",
  "2.5.4.11": "OU",
};

/** DER tags this reader needs. */
const SEQUENCE = 0x30, SET = 0x31, OID = 0x06, INTEGER = 0x02, VERSION = 0xa0;

/** A DER element: its tag and where its content lies in the buffer. */
interface Element {
  readonly tag: number;
  readonly start: number;
  readonly end: number;
}

/**
 * Reads the names of every certificate in a PEM bundle (`-----BEGIN CERTIFICATE-----` blocks;
 * other blocks are skipped).
 * @param pem PEM text.
 * @returns The names, in the bundle's order; empty when it holds no certificate.
 * @throws {RangeError} when a certificate block is not a well-formed DER certificate.
 * @example A CA's common name
 * ```ts
 * import { certificateNames } from "./x509_names.ts";
 * declare const caPem: string;
 * const [ca] = certificateNames(caPem);
 * ca?.subject.find((a) => a.type === "CN")?.value; // e.g. "minikubeCA"
 * ```
 */
export function certificateNames(pem: string): CertificateNames[] {
  const blocks = pem.matchAll(
    /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]*?)-----END CERTIFICATE-----/g,
  );
  return [...blocks].map((match, index) => {
    let der: Uint8Array;
    try {
      der = Uint8Array.from(atob(match[1]!.replace(/\s+/g, "")), (c) => c.charCodeAt(0));
    } catch {
      throw new RangeError(`Certificate ${index + 1} of the PEM text is not valid base64`);
    }
    try {
      return namesOf(der);
    } catch (error) {
      throw new RangeError(
        `Certificate ${index + 1} of the PEM text is not a DER certificate: ${
          error instanceof Error ? error.message : error
        }`,
      );
    }
  });
}

function namesOf(der: Uint8Array): CertificateNames {
  const certificate = element(der, 0, der.length, SEQUENCE);
  const tbs = element(der, certificate.start, certificate.end, SEQUENCE);
  let at = tbs.start;
  const next = (tag: number): Element => {
    const e = element(der, at, tbs.end, tag);
    at = e.end;
    return e;
  };
  if (at < tbs.end && der[at] === VERSION) next(VERSION);
  next(INTEGER); // serialNumber
  next(SEQUENCE); // signature algorithm
  const issuer = nameOf(der, next(SEQUENCE));
  next(SEQUENCE); // validity
  const subject = nameOf(der, next(SEQUENCE));
  return { subject, issuer };
}

/** Name ::= SEQUENCE OF SET OF SEQUENCE { type OBJECT IDENTIFIER, value ANY }. */
function nameOf(der: Uint8Array, name: Element): NameAttribute[] {
  const attributes: NameAttribute[] = [];
  for (let at = name.start; at < name.end;) {
    const rdn = element(der, at, name.end, SET);
    at = rdn.end;
    for (let inner = rdn.start; inner < rdn.end;) {
      const pair = element(der, inner, rdn.end, SEQUENCE);
      inner = pair.end;
      const type = element(der, pair.start, pair.end, OID);
      const value = element(der, type.end, pair.end);
      const text = stringOf(der, value);
      if (text === undefined) continue;
      const oid = oidOf(der.subarray(type.start, type.end));
      attributes.push({ type: SHORT_NAMES[oid] ?? oid, value: text });
    }
  }
  return attributes;
}

/** The DER element at `at` (ending by `limit`), of the expected tag if given. */
function element(der: Uint8Array, at: number, limit: number, expected?: number): Element {
  if (at + 2 > limit) throw new RangeError(`truncated at byte ${at}`);
  const tag = der[at]!;
  if (expected !== undefined && tag !== expected) {
    throw new RangeError(
      `expected tag 0x${expected.toString(16)} at byte ${at}, found 0x${tag.toString(16)}`,
    );
  }
  let length = der[at + 1]!;
  let start = at + 2;
  if (length & 0x80) {
    const octets = length & 0x7f;
    if (octets === 0 || octets > 4 || start + octets > limit) {
      throw new RangeError(`bad length at byte ${at}`);
    }
    length = 0;
    for (let i = 0; i < octets; i++) length = length * 256 + der[start + i]!;
    start += octets;
  }
  const end = start + length;
  if (end > limit) throw new RangeError(`element at byte ${at} runs past its container`);
  return { tag, start, end };
}

const LATIN1 = new TextDecoder("latin1");

/** The text of a string-typed value, or `undefined` for other types. */
function stringOf(der: Uint8Array, value: Element): string | undefined {
  const bytes = der.subarray(value.start, value.end);
  switch (value.tag) {
    case 0x0c: // UTF8String
      return new TextDecoder().decode(bytes);
    case 0x13: // PrintableString
    case 0x16: // IA5String
    case 0x14: // TeletexString (T.61; Latin-1 in practice)
      return LATIN1.decode(bytes);
    case 0x1e: // BMPString (UTF-16BE)
      return new TextDecoder("utf-16be").decode(bytes);
    default:
      return undefined;
  }
}

/** An OBJECT IDENTIFIER's content as dotted decimals. */
function oidOf(bytes: Uint8Array): string {
  if (!bytes.length) throw new RangeError("empty object identifier");
  const parts: number[] = [];
  let value = 0;
  for (const byte of bytes) {
    value = value * 128 + (byte & 0x7f);
    if (!(byte & 0x80)) {
      parts.push(value);
      value = 0;
    }
  }
  const [first = 0, ...rest] = parts;
  const head = first < 80 ? [Math.floor(first / 40), first % 40] : [2, first - 80];
  return [...head, ...rest].join(".");
}
