import assert from "node:assert/strict";
import { createCertificateAuthority } from "../../../kits/certificates.ts"; // installs the default issuer
import type { WebhookFn, WebhookServeOptions } from "../../structs/admission.ts";
import { detectLocalCluster, WebhookAutoServer } from "./webhooks.ts";

const noReviews: WebhookFn = () => Promise.resolve({});

/** The CAs of the cluster kinds, named as their installers name them. */
async function clusterCas(): Promise<Record<"minikube" | "k3s" | "kubeadm", string>> {
  const [minikube, k3s, kubeadm] = await Promise.all([
    createCertificateAuthority({ commonName: "minikubeCA" }),
    createCertificateAuthority({ commonName: "k3s-server-ca@1700000000" }),
    createCertificateAuthority({ commonName: "kubernetes" }),
  ]);
  return { minikube: minikube.certPem, k3s: k3s.certPem, kubeadm: kubeadm.certPem };
}

Deno.test("detectLocalCluster() tells K3s and Minikube by the version and the CA's names (WH-18)", async () => {
  const cas = await clusterCas();
  assert.equal(detectLocalCluster({ gitVersion: "v1.33.3+k3s1" }), "k3s");
  assert.equal(detectLocalCluster({ gitVersion: "v1.36.3", caPem: cas.k3s }), "k3s");
  assert.equal(detectLocalCluster({ gitVersion: "v1.36.3", caPem: cas.minikube }), "minikube");
  assert.equal(detectLocalCluster({ gitVersion: "v1.36.3", caPem: cas.kubeadm }), undefined);
  // A bundle: any of its certificates tells.
  assert.equal(detectLocalCluster({ caPem: `${cas.kubeadm}${cas.minikube}` }), "minikube");
  // Nothing to tell by, or a CA that cannot be read: a plain server, no error.
  assert.equal(detectLocalCluster({}), undefined);
  const broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
  assert.equal(detectLocalCluster({ caPem: broken }), undefined);
});

Deno.test("WebhookAutoServer serves under the detected cluster's host name, with a certificate for it (WH-18)", async () => {
  const cas = await clusterCas();
  const cases: Array<[Omit<WebhookServeOptions, "signal">, string]> = [
    [{ caPem: cas.minikube }, "host.minikube.internal"],
    [{ gitVersion: "v1.33.3+k3s1", caPem: cas.kubeadm }, "host.k3d.internal"],
    [{ caPem: cas.kubeadm }, "127.0.0.1"],
  ];
  for (const [cluster, host] of cases) {
    const stop = new AbortController();
    const server = new WebhookAutoServer({ addr: "127.0.0.1", port: 0 });
    const configs = server.serve(noReviews, { signal: stop.signal, ...cluster });
    try {
      const { value: config } = await configs.next();
      assert.ok(config?.url && config.caBundle, `a client config for ${host}`);
      const url = new URL(config.url);
      assert.equal(url.hostname, host);
      // The certificate is valid for that name (what the API server checks), not just the URL.
      const tcp = await Deno.connect({ hostname: "127.0.0.1", port: Number(url.port) });
      const tls = await Deno.startTls(tcp, { hostname: host, caCerts: [atob(config.caBundle)] });
      await tls.handshake();
      tls.close();
    } finally {
      stop.abort();
      await configs.return(undefined);
    }
  }
});
