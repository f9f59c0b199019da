/**
 * A control plane started elsewhere (`tools/control_plane.ts start`, found through
 * `$KOPF_TS_TEST_KUBECONFIG` and `$KOPF_TS_TEST_ETCD_URL`): its kubeconfig read for the
 * server, CA, admin token and client certificate. See `sharedControlPlane()`.
 * @module
 */

import { parse as parseYaml } from "yaml";
import type { SharedControlPlane } from "../control_plane.ts";
import { asRecord, asString, compactEtcd, unbase64 } from "./etcd.ts";

/** A {@link SharedControlPlane} described by a kubeconfig (and etcd's URL for compaction). */
export class ExternalControlPlane implements SharedControlPlane {
  readonly kubeconfigPath: string;
  readonly server: string;
  readonly caPem: string;
  readonly adminToken: string;
  readonly etcdUrl: string | undefined;
  readonly #certPem: string | undefined;
  readonly #keyPem: string | undefined;

  constructor(kubeconfigPath: string, etcdUrl: string | undefined) {
    this.kubeconfigPath = kubeconfigPath;
    this.etcdUrl = etcdUrl;
    const config = asRecord(parseYaml(Deno.readTextFileSync(kubeconfigPath))) ?? {};
    const named = (list: string, name: string | undefined) => {
      const items = Array.isArray(config[list]) ? config[list] as unknown[] : [];
      return asRecord(items.map(asRecord).find((item) => item?.["name"] === name));
    };
    const contextName = asString(config["current-context"]);
    const context = asRecord(named("contexts", contextName)?.["context"]);
    const cluster = asRecord(named("clusters", asString(context?.["cluster"]))?.["cluster"]);
    const userName = asString(context?.["user"]);
    const user = asRecord(named("users", userName)?.["user"]);
    const certUser = asRecord(named("users", `${userName}-cert`)?.["user"]) ?? user;
    const server = asString(cluster?.["server"]);
    const caData = asString(cluster?.["certificate-authority-data"]);
    const caFile = asString(cluster?.["certificate-authority"]);
    const token = asString(user?.["token"]);
    if (!server || !(caData || caFile) || !token) {
      throw new Error(
        `${kubeconfigPath}: the current context needs a server, a CA and a bearer token`,
      );
    }
    this.server = server.replace(/\/+$/, "");
    this.caPem = caData ? unbase64(caData) : Deno.readTextFileSync(caFile ?? "");
    this.adminToken = token;
    const certData = asString(certUser?.["client-certificate-data"]);
    const keyData = asString(certUser?.["client-key-data"]);
    this.#certPem = certData ? unbase64(certData) : undefined;
    this.#keyPem = keyData ? unbase64(keyData) : undefined;
  }

  get adminCertPem(): string {
    if (this.#certPem === undefined) throw this.#noCertificate();
    return this.#certPem;
  }

  get adminKeyPem(): string {
    if (this.#keyPem === undefined) throw this.#noCertificate();
    return this.#keyPem;
  }

  #noCertificate(): Error {
    return new Error(`${this.kubeconfigPath} has no admin client certificate (client-*-data)`);
  }

  get external(): boolean {
    return true;
  }

  async compact(): Promise<void> {
    if (!this.etcdUrl) {
      throw new Error("compact() needs KOPF_TS_TEST_ETCD_URL for an external control plane");
    }
    await compactEtcd(this.etcdUrl);
  }

  logs(): string {
    return `(external control plane at ${this.server}: see the log of the process that started it)\n`;
  }
}
