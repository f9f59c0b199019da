/**
 * The throw-away credentials of a test control plane and the kubeconfigs that use them: a CA,
 * the API server's serving certificate, an admin user (`system:masters`) with a bearer token and
 * a client certificate, and the service-account signing key, written under `<dir>/pki`.
 * @module
 */

import {
  createCertificateAuthority,
  generateKeyPair,
  issueCertificate,
} from "../../kits/certificates.ts";
import { base64 } from "./etcd.ts";

/** Name of the cluster, user and context in the written kubeconfigs. */
export const CONTEXT = "kopf-ts-test";

/** What clients need to talk to the plane as its admin. */
export interface Credentials {
  /** The CA certificate (PEM) of the plane. */
  readonly caPem: string;
  /** The admin's bearer token (`--token-auth-file`). */
  readonly adminToken: string;
  /** The admin's client certificate (PEM, CN=admin, O=system:masters). */
  readonly adminCertPem: string;
  /** The admin's client key (PEM). */
  readonly adminKeyPem: string;
}

/**
 * Creates the plane's credentials and writes them under `<dir>/pki` (keys 0600, the directory
 * 0700): `ca.crt/key`, `apiserver.crt/key`, `admin.crt/key`, `sa.key/pub`, `tokens.csv`.
 * @param dir The plane's directory.
 * @returns The admin's credentials.
 */
export async function writePki(dir: string): Promise<Credentials> {
  const ca = await createCertificateAuthority({ commonName: "kopf-ts-test-ca" });
  const serving = await issueCertificate(ca, {
    commonName: "kube-apiserver",
    dnsNames: [
      "localhost",
      "kubernetes",
      "kubernetes.default",
      "kubernetes.default.svc",
      "kubernetes.default.svc.cluster.local",
    ],
    ipAddresses: ["127.0.0.1", "10.0.0.1"],
    usages: "server",
  });
  const admin = await issueCertificate(ca, {
    commonName: "admin",
    organization: "system:masters",
    usages: "client",
  });
  const sa = await generateKeyPair("rsa-2048");
  const token = Array.from(
    crypto.getRandomValues(new Uint8Array(24)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
  await Deno.mkdir(`${dir}/pki`, { mode: 0o700 });
  const secret = { mode: 0o600 };
  await Deno.writeTextFile(`${dir}/pki/ca.crt`, ca.certPem);
  await Deno.writeTextFile(`${dir}/pki/ca.key`, ca.keyPem, secret);
  await Deno.writeTextFile(`${dir}/pki/apiserver.crt`, serving.certPem);
  await Deno.writeTextFile(`${dir}/pki/apiserver.key`, serving.keyPem, secret);
  await Deno.writeTextFile(`${dir}/pki/admin.crt`, admin.certPem);
  await Deno.writeTextFile(`${dir}/pki/admin.key`, admin.keyPem, secret);
  await Deno.writeTextFile(`${dir}/pki/sa.key`, sa.privateKeyPem, secret);
  await Deno.writeTextFile(`${dir}/pki/sa.pub`, sa.publicKeyPem);
  await Deno.writeTextFile(
    `${dir}/pki/tokens.csv`,
    `${token},admin,admin-uid,"system:masters"\n`,
    secret,
  );
  return {
    caPem: ca.certPem,
    adminToken: token,
    adminCertPem: admin.certPem,
    adminKeyPem: admin.keyPem,
  };
}

/**
 * The kubeconfig for clients: the admin by token (current context) and by client certificate
 * (context `kopf-ts-test-cert`), with everything inline.
 * @param server The API server's URL.
 * @param creds The admin's credentials.
 * @returns The kubeconfig's YAML.
 */
export function adminKubeconfig(server: string, creds: Credentials): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${CONTEXT}`,
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority-data: ${base64(creds.caPem)}`,
    "users:",
    `- name: ${CONTEXT}`,
    "  user:",
    `    token: ${creds.adminToken}`,
    `- name: ${CONTEXT}-cert`,
    "  user:",
    `    client-certificate-data: ${base64(creds.adminCertPem)}`,
    `    client-key-data: ${base64(creds.adminKeyPem)}`,
    "contexts:",
    `- name: ${CONTEXT}`,
    "  context:",
    `    cluster: ${CONTEXT}`,
    `    user: ${CONTEXT}`,
    `- name: ${CONTEXT}-cert`,
    "  context:",
    `    cluster: ${CONTEXT}`,
    `    user: ${CONTEXT}-cert`,
    `current-context: ${CONTEXT}`,
    "",
  ].join("\n");
}

/**
 * The kubeconfig of kube-controller-manager: the admin's client certificate, by file.
 * @param server The API server's URL.
 * @param dir The plane's directory (with `pki/` written by {@link writePki}).
 * @returns The kubeconfig's YAML.
 */
export function controllerManagerKubeconfig(server: string, dir: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    `- name: ${CONTEXT}`,
    "  cluster:",
    `    server: ${server}`,
    `    certificate-authority: ${dir}/pki/ca.crt`,
    "users:",
    `- name: ${CONTEXT}`,
    "  user:",
    `    client-certificate: ${dir}/pki/admin.crt`,
    `    client-key: ${dir}/pki/admin.key`,
    "contexts:",
    `- name: ${CONTEXT}`,
    "  context:",
    `    cluster: ${CONTEXT}`,
    `    user: ${CONTEXT}`,
    `current-context: ${CONTEXT}`,
    "",
  ].join("\n");
}
