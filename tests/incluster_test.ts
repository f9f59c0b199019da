/**
 * The operator in a cluster for real: a node of our own (containerd + runc + the kubelet,
 * testing/plane/node.ts) registered to a control plane of this test, the operator's image built
 * by `kopf build --image` and imported into the node's containerd, and `deploy/` applied as a
 * user would — the RBAC that `kopf generate rbac` prints for the handlers, the peering object,
 * the Deployments of deploy/deployment.yaml and deploy/sharded.yaml with the image. One plane and
 * one node serve all the proofs, one after the other, each in a namespace of its own:
 *
 * 1. Ready by the kubelet's probes, an object handled (status and Events), no 403 in the log;
 * 2. the Pod deleted: the operator stops by SIGTERM, the next Pod repeats no finished handler;
 * 5. the admission webhook served from the Pod at the node's address, in the webhook
 *    configuration it manages (RBAC by `kopf generate rbac --admission-managed`): a bad object
 *    is denied by the API server's call to the Pod, a good one admitted;
 * 3. leader election: two replicas, the leader's Pod removed by scaling to 1 (marked as the
 *    cheapest to delete), the standby takes over (the hand-over time is printed, not asserted);
 * 4. sharding: deploy/sharded.yaml at 1 replica, scaled to 3 and back to 1 through the scale
 *    subresource (as `kubectl scale` does) while objects are created: each handled exactly once,
 *    each replica's share read from its metrics endpoint, no finalizer touched;
 * 6. token rotation (opt-in, `KOPF_TS_TEST_TOKEN_ROTATION=1`, about 11 minutes): a projected
 *    service-account token of 600 s, the shortest the API server accepts; the kubelet writes a
 *    new one at about 80% of it, and the operator keeps working after the first has expired.
 *
 * The node needs root, Debian's containerd/runc/CNI plugins, the kubelet and kube-scheduler
 * (`tools/kube-binaries.sh --node`) and network and mount namespaces of its own: run it as
 * `tools/netns.sh tools/deno.sh test -A --no-check=remote tests/incluster_test.ts` (tools/test.sh
 * does). Elsewhere it is skipped with the reason. The image is built by the test unless
 * `$KOPF_TS_TEST_IMAGE` names one already built (the namespace has no route to the registries,
 * so `tools/test.sh` builds it outside first).
 *
 * What differs from a user's cluster, in memory only (deploy/ is read, never written): the image
 * name, `imagePullPolicy: Never`, `hostNetwork: true` (no Pod network here), and
 * `KUBERNETES_SERVICE_HOST=127.0.0.1` / `KUBERNETES_SERVICE_PORT` in the container's environment
 * (no kube-proxy serves the `kubernetes` Service's cluster IP that the kubelet injects). With
 * several replicas on the one node, they share its network namespace, so a fixed port can be
 * bound by one of them only (and the scheduler refuses a second Pod that declares it): there the
 * endpoints listen on port 0 (a free port each), the declared ports and the probes are dropped,
 * and the test reads each replica's metrics port from its log line `Serving metrics at …`.
 *
 * The proofs are here; what they use around them (the manifests made to fit the node, the Pods'
 * logs followed, the waits) is in tests/_incluster.ts.
 */

import assert from "node:assert/strict";
import { loadKubeconfig } from "../core/client/config.ts";
import { KubeClient as Client } from "../core/client/client.ts";
import { ApiError } from "../core/client/errors.ts";
import { readShardStatus } from "../core/engines/coordination/sharding.ts";
import { ControlPlane, createTestNamespace } from "../testing/control_plane.ts";
import { nodeUnavailable, TestNode } from "../testing/plane/node.ts";
import { PODS } from "./_examples.ts";
import {
  applyCrds,
  eventually,
  FINALIZER,
  kex,
  KOPFEXAMPLES,
  permissionErrors,
  sleep,
  tempDir,
} from "./_support.ts";
import {
  apply,
  applyRbac,
  creating,
  deploymentFrom,
  DEPLOYMENTS,
  eventsAbout,
  handledBy,
  handlerRuns,
  HANDLERS,
  IMAGE,
  jwtClaims,
  kopf,
  LEASES,
  metricsPort,
  onFreePorts,
  opts,
  PodLogs,
  podSpecOf,
  type PodStatus,
  readyPods,
  removeDeployment,
  TOKEN_ROTATION,
  VALIDATING,
  watchFinalizers,
  yamlDocs,
} from "./_incluster.ts";

const unavailable = await nodeUnavailable();
if (unavailable) console.warn(`tests/incluster_test.ts skipped: ${unavailable}`);

Deno.test({
  name: "incluster: deploy/ on a real node — one plane and node for the proofs: Ready by its " +
    "probes and SIGTERM; the admission webhook in a Pod; leader election; sharding scaled " +
    "1 → 3 → 1; token rotation (opt-in)",
  ignore: unavailable !== undefined,
  ...opts,
  async fn(t) {
    await using dir = await tempDir("kopf-incluster-");
    let image = Deno.env.get("KOPF_TS_TEST_IMAGE");
    if (!image) {
      image = `${dir.path}/operator.oci.tar`;
      await kopf(["build", "--image", "--tag", IMAGE, HANDLERS, "-o", image]);
    }
    await using plane = await ControlPlane.start({ handleSignals: false });
    await using node = await TestNode.start(plane, { handleSignals: false });
    const logs = new PodLogs(node);
    const started = performance.now();
    const took: string[] = [];
    const timed = (name: string, fn: () => Promise<void>) => async () => {
      const at = performance.now();
      try {
        await fn();
      } finally {
        took.push(`${name} ${((performance.now() - at) / 1000).toFixed(0)} s`);
      }
    };
    try {
      await node.importImage(image);
      using client = new Client(await loadKubeconfig({ paths: [plane.kubeconfigPath] }));
      await applyCrds(client, "crds/example.yaml");
      await applyCrds(client, "crds/peering.yaml");
      const report = async (namespace: string, error: unknown) => {
        console.error(node.logs(30));
        console.error(logs.dump(namespace));
        const pods = await client.api.list(PODS, { namespace }).catch(() => ({ items: [] }));
        console.error(JSON.stringify(pods.items.map((p) => [p.metadata?.name, p.status])));
        throw error;
      };
      took.push(`setup ${((performance.now() - started) / 1000).toFixed(0)} s`);

      await t.step(
        "1, 2: Ready by its probes, an object handled with status and Events, no 403; the Pod " +
          "deleted stops by SIGTERM and its successor repeats nothing",
        timed("proofs 1, 2", async () => {
          const namespace = await createTestNamespace(plane, "incluster");
          try {
            // As a user would: the RBAC generated for the handlers, the peering object, the
            // Deployment (with its liveness and readiness probes).
            await applyRbac(client, namespace);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            await apply(
              client,
              [await deploymentFrom("deploy/deployment.yaml", node)],
              namespace,
            );

            // Proof 1: Ready, the object handled (status, Event), no permission error.
            const [first] = await readyPods(client, namespace, 1);
            const firstName = first!.metadata!.name!;
            assert.equal((first!.status as PodStatus).containerStatuses?.[0]?.restartCount, 0);
            await client.api.create(KOPFEXAMPLES, kex("kex-1", { field: "value" }), { namespace });
            assert.deepEqual(await handledBy(client, namespace, "kex-1"), {
              message: "hello world",
              pod: firstName,
            });
            const events = await eventsAbout(client, namespace, "kex-1");
            assert.ok(events.includes(`create_fn in ${firstName}`), events.join(" | "));

            // Proof 2: the Pod deleted — SIGTERM, a graceful stop; the next Pod repeats nothing.
            await client.api.delete(PODS, firstName, { namespace });
            const [second] = await readyPods(client, namespace, 1, [firstName]);
            const secondName = second!.metadata!.name!;
            await eventually(
              () => logs.of(namespace, firstName).some((l) => l.endsWith("Operator stopped.")),
              30_000,
              "the first operator's graceful stop",
            ).catch(() => {});
            const firstLog = logs.of(namespace, firstName);
            assert.ok(firstLog.some((l) => l.endsWith("Operator stopped.")), firstLog.join("\n"));
            await client.api.create(KOPFEXAMPLES, kex("kex-2", { field: "value" }), { namespace });
            assert.deepEqual(await handledBy(client, namespace, "kex-2"), {
              message: "hello world",
              pod: secondName,
            });
            const later = logs.of(namespace, secondName);
            assert.deepEqual(
              later.filter((l) => l.includes("handles kex-1")),
              [],
              later.join("\n"),
            );
            assert.deepEqual((await handledBy(client, namespace, "kex-1")).pod, firstName);
            assert.ok(firstLog.some((l) => l.includes(`create_fn handles kex-1 in ${firstName}`)));
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      );

      await t.step(
        "5: the admission webhook served from the Pod at the node's address, in the webhook " +
          "configuration it manages: a bad object denied, a good one admitted",
        timed("proof 5", async () => {
          const namespace = await createTestNamespace(plane, "incluster-webhook");
          const managed = `${namespace}.kopf.dev`;
          try {
            // The startup handler enables the webhook when WEBHOOK_HOST is set: so for the
            // generator too, which imports the handlers.
            await applyRbac(client, namespace, ["--admission-managed", managed], {
              WEBHOOK_HOST: "192.0.2.1",
            });
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = await deploymentFrom("deploy/deployment.yaml", node);
            const container = podSpecOf(doc).containers[0]!;
            container.env = [
              ...(container.env ?? []),
              { name: "WEBHOOK_HOST", valueFrom: { fieldRef: { fieldPath: "status.hostIP" } } },
              { name: "WEBHOOK_MANAGED", value: managed },
            ];
            await apply(client, [doc], namespace);
            const [pod] = await readyPods(client, namespace, 1);
            const podName = pod!.metadata!.name!;
            const hostIp = (pod!.status as PodStatus).hostIP!;
            assert.equal(hostIp, Deno.env.get("KOPF_TS_NODE_IP"));

            // The configuration it manages points the API server at the Pod: the node's address.
            const configuration = await eventually(
              () => client.api.get(VALIDATING, managed),
              60_000,
              `the ValidatingWebhookConfiguration ${managed}`,
            );
            const webhooks = configuration.webhooks as Array<
              { name: string; clientConfig: { url?: string; caBundle?: string } }
            >;
            assert.equal(webhooks.length, 1, JSON.stringify(webhooks));
            const url = new URL(webhooks[0]!.clientConfig.url!);
            assert.equal(url.host, `${hostIp}:9443`);
            assert.ok(webhooks[0]!.clientConfig.caBundle, "the generated CA as the caBundle");

            const labels = { "kopf.dev/incluster-webhook": "yes" };
            const denial = await eventually(
              async () => {
                try {
                  await client.api.create(KOPFEXAMPLES, kex("bad", { field: "bad" }, labels), {
                    namespace,
                  });
                  assert.fail("the bad object was admitted");
                } catch (error) {
                  // Until the server listens, the call fails (failurePolicy: Fail): try again.
                  if (error instanceof ApiError && /denied the request/.test(error.message)) {
                    return error;
                  }
                  throw error;
                }
              },
              30_000,
              "the webhook's denial",
            );
            assert.match(denial.message, new RegExp(`spec.field 'bad' is refused by ${podName}`));
            await client.api.create(KOPFEXAMPLES, kex("good", { field: "good" }, labels), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "good")).pod, podName);
            await assert.rejects(client.api.get(KOPFEXAMPLES, "bad", { namespace }), /not found/i);
            const lines = logs.of(namespace, podName);
            assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));

            // A graceful stop removes the (non-persistent) webhook from the configuration.
            await removeDeployment(client, namespace, "kopf-operator");
            const after = await client.api.get(VALIDATING, managed).catch(() => ({ webhooks: [] }));
            assert.deepEqual(after.webhooks ?? [], []);
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
            await client.api.delete(VALIDATING, managed).catch(() => {});
          }
        }),
      );

      await t.step(
        "3: leader election — two replicas, one leads; scaled to 1, its Pod goes, the standby takes over " +
          "and handles a new object",
        timed("proof 3", async () => {
          const namespace = await createTestNamespace(plane, "incluster-leader");
          try {
            await applyRbac(client, namespace, ["--leader-elect"]);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = onFreePorts(await deploymentFrom("deploy/deployment.yaml", node), 2);
            podSpecOf(doc).containers[0]!.args!.push("--leader-elect");
            await apply(client, [doc], namespace);
            const pods = (await readyPods(client, namespace, 2)).map((p) => p.metadata!.name!);
            const holder = async () => {
              const lease = await client.api.get(LEASES, "kopf-leader", { namespace });
              const identity = (lease.spec as { holderIdentity?: string }).holderIdentity ?? "";
              return pods.find((pod) => identity.startsWith(pod));
            };
            const leader = await eventually(holder, 60_000, "a leader among the two Pods");
            const standby = pods.find((pod) => pod !== leader)!;
            await client.api.create(KOPFEXAMPLES, kex("kex-l1", { field: "value" }), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "kex-l1")).pod, leader);

            // The leader's Pod removed: SIGTERM, the Lease released, the standby takes it at its
            // next attempt; then an object is created for it. Deleting the Pod alone would let
            // the ReplicaSet start a replacement that can win the released Lease before the
            // standby's next attempt (both are right, but only one proves the standby): so the
            // Deployment is scaled to 1 with the leader marked as the cheapest Pod to remove
            // (`controller.kubernetes.io/pod-deletion-cost`), as `kubectl annotate` + `kubectl
            // scale` would — the ReplicaSet deletes the leader's Pod and starts none.
            await client.api.patch(PODS, leader, {
              metadata: { annotations: { "controller.kubernetes.io/pod-deletion-cost": "-1000" } },
            }, { namespace });
            const deleted = performance.now();
            await client.api.patch(DEPLOYMENTS, "kopf-operator", { spec: { replicas: 1 } }, {
              namespace,
              subresource: "scale",
            });
            await eventually(
              async () =>
                (await client.api.list(PODS, { namespace })).items.every((p) =>
                  p.metadata?.name !== leader || p.metadata?.deletionTimestamp
                ),
              30_000,
              "the ReplicaSet's deletion of the leader's Pod",
            );
            await eventually(
              async () => (await holder()) === standby,
              60_000,
              "the standby's hold of the Lease",
            );
            const movedAt = performance.now();
            await client.api.create(KOPFEXAMPLES, kex("kex-l2", { field: "value" }), {
              namespace,
            });
            assert.equal((await handledBy(client, namespace, "kex-l2")).pod, standby);
            const handledAt = performance.now();
            console.log(
              `leader hand-over after kubectl delete pod: the Lease held by the standby after ` +
                `${((movedAt - deleted) / 1000).toFixed(1)} s; an object created then handled by ` +
                `it ${((handledAt - movedAt) / 1000).toFixed(1)} s later`,
            );
            const standbyLog = logs.of(namespace, standby);
            assert.ok(!standbyLog.some((l) => l.includes("handles kex-l1")), standbyLog.join("\n"));
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      );

      await t.step(
        "4: sharding — deploy/sharded.yaml at 1 replica, scaled to 3 and back to 1 while objects " +
          "are created: each handled once, each replica's share in its metrics, no finalizer " +
          "touched",
        timed("proof 4", async () => {
          const namespace = await createTestNamespace(plane, "incluster-shards");
          const observed = watchFinalizers(client, namespace);
          const name = "kopf-operator-sharded";
          const scale = (replicas: number) =>
            client.api.patch(DEPLOYMENTS, name, { spec: { replicas } }, {
              namespace,
              subresource: "scale",
            });
          const shardsHeldBy = async (pods: readonly string[]) => {
            const status = await readShardStatus(client.api, { name: "kopf", namespace });
            const holders = status.shards.map((s) => pods.find((p) => s.holder?.startsWith(p)));
            return status.shards.length === 32 && holders.every(Boolean) &&
              new Set(holders).size === pods.length;
          };
          try {
            // deploy/rbac.yaml's part generated for the handlers, then sharded.yaml as it is
            // documented: its Role for the Leases and the Deployment.
            await applyRbac(client, namespace);
            const docs = yamlDocs(await Deno.readTextFile("deploy/sharded.yaml"));
            await apply(client, docs.filter((d) => d.kind !== "Deployment"), namespace);
            await apply(
              client,
              [onFreePorts(await deploymentFrom("deploy/sharded.yaml", node), 1)],
              namespace,
            );
            const [one] = await readyPods(client, namespace, 1);
            const first = one!.metadata!.name!;
            await eventually(() => shardsHeldBy([first]), 60_000, "all shards held by one");
            const names: string[] = [];
            for (let i = 0; i < 5; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`a-${i}`, { field: "value" }), {
                namespace,
              });
              names.push(`a-${i}`);
            }

            // 1 → 3 (as `kubectl scale --replicas 3` does) while objects are created.
            let creator = creating(client, namespace, "b");
            await scale(3);
            const three = (await readyPods(client, namespace, 3)).map((p) => p.metadata!.name!);
            await eventually(() => shardsHeldBy(three), 90_000, "the shards split among three");
            names.push(...await creator.stop());
            const batch: string[] = [];
            for (let i = 0; i < 45; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`c-${i}`, { field: "value" }), {
                namespace,
              });
              batch.push(`c-${i}`);
            }
            names.push(...batch);
            const handled = new Map<string, string>();
            for (const object of names) {
              handled.set(object, (await handledBy(client, namespace, object)).pod ?? "");
            }
            // Each replica's share from its metrics endpoint: what it ran is what it persisted.
            const shares: string[] = [];
            for (const pod of three) {
              const port = await eventually(
                () => metricsPort(logs.of(namespace, pod)),
                30_000,
                `the metrics port of ${pod}`,
              );
              const runs = await handlerRuns(port, "create_fn");
              const persisted = [...handled.values()].filter((p) => p === pod).length;
              assert.equal(runs, persisted, `${pod}: create_fn runs in its metrics`);
              assert.ok(batch.some((o) => handled.get(o) === pod), `${pod} had no share`);
              shares.push(`${pod.slice(-5)} ${runs}`);
            }
            console.log(`sharding: create_fn runs per replica at 3 replicas: ${shares.join(", ")}`);

            // 3 → 1 while objects are created.
            creator = creating(client, namespace, "d");
            await scale(1);
            const [last] = await eventually(
              async () => {
                const pods = await client.api.list(PODS, { namespace });
                return pods.items.length === 1 ? pods.items : undefined;
              },
              90_000,
              "one replica left",
            );
            await eventually(
              () => shardsHeldBy([last!.metadata!.name!]),
              60_000,
              "all shards held by the one left",
            );
            names.push(...await creator.stop());
            for (let i = 0; i < 5; i++) {
              await client.api.create(KOPFEXAMPLES, kex(`e-${i}`, { field: "value" }), {
                namespace,
              });
              names.push(`e-${i}`);
            }
            for (const object of names) await handledBy(client, namespace, object);

            // Exactly once: one `create_fn handles` line per object in all replicas' logs (read
            // along: the last lines may come a moment later than the status).
            const notOnce = () => {
              const runs = new Map<string, number>();
              for (const lines of logs.inNamespace(namespace).values()) {
                for (const line of lines) {
                  const match = line.match(/create_fn handles (\S+) in /);
                  if (match) runs.set(match[1]!, (runs.get(match[1]!) ?? 0) + 1);
                }
              }
              return names.filter((object) => runs.get(object) !== 1)
                .map((object) => `${object}: ${runs.get(object) ?? 0}`);
            };
            await eventually(() => notOnce().length === 0, 5_000).catch(() => {});
            assert.deepEqual(notOnce(), [], "create_fn ran once per object");
            assert.ok(
              names.some((n) => n.startsWith("b-")) && names.some((n) => n.startsWith("d-")),
            );
            // Finalizers: added by the first handling, never removed or re-added by a rebalance.
            await observed.stop();
            assert.equal(observed.gaps(), 0, "the test's watch saw every version");
            const changed = names.map((n) => [n, observed.finalizers.get(n) ?? []] as const)
              .filter(([, lists]) =>
                JSON.stringify(lists) !== JSON.stringify(["[]", `["${FINALIZER}"]`])
              );
            assert.deepEqual(changed, [], "finalizer lists other than [] → [finalizer]");
            const all = [...logs.inNamespace(namespace).values()].flat();
            assert.deepEqual(permissionErrors(all), [], "no permission errors in the logs");
            assert.ok(
              !all.some((l) => l.includes("delete_fn handles")),
              "no deletion handling on a rebalance",
            );
          } catch (error) {
            await report(namespace, error);
          } finally {
            await observed.stop();
            await removeDeployment(client, namespace, name);
          }
        }),
      );

      await t.step({
        name: "6: token rotation — the kubelet refreshes a projected token of 600 s and the " +
          "operator keeps working after the first one expired (opt-in: " +
          "KOPF_TS_TEST_TOKEN_ROTATION=1, about 11 minutes)",
        ignore: !TOKEN_ROTATION,
        fn: timed("proof 6", async () => {
          const namespace = await createTestNamespace(plane, "incluster-token");
          try {
            await applyRbac(client, namespace);
            await apply(
              client,
              yamlDocs(await Deno.readTextFile("deploy/peering.yaml")),
              namespace,
            );
            const doc = await deploymentFrom("deploy/deployment.yaml", node);
            const spec = podSpecOf(doc);
            // The volume the ServiceAccount admission would add, with the shortest lifetime
            // the API server accepts (600 s: Pod validation's floor, no flag lowers it).
            spec.automountServiceAccountToken = false;
            spec.volumes = [...(spec.volumes ?? []), {
              name: "short-token",
              projected: {
                sources: [
                  { serviceAccountToken: { path: "token", expirationSeconds: 600 } },
                  {
                    configMap: {
                      name: "kube-root-ca.crt",
                      items: [{ key: "ca.crt", path: "ca.crt" }],
                    },
                  },
                  {
                    downwardAPI: {
                      items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }],
                    },
                  },
                ],
              },
            }];
            const container = spec.containers[0]!;
            container.volumeMounts = [...(container.volumeMounts ?? []), {
              name: "short-token",
              mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
              readOnly: true,
            }];
            await apply(client, [doc], namespace);
            const [pod] = await readyPods(client, namespace, 1);
            const podName = pod!.metadata!.name!;
            const file = `${node.dir}/kubelet/pods/${pod!.metadata!.uid}/volumes/` +
              "kubernetes.io~projected/short-token/token";
            const firstToken = await Deno.readTextFile(file);
            const { exp, iat } = jwtClaims(firstToken);
            assert.equal(exp - iat, 600);
            await client.api.create(KOPFEXAMPLES, kex("t-1", { field: "value" }), { namespace });
            assert.equal((await handledBy(client, namespace, "t-1")).pod, podName);

            // The kubelet writes a new token at about 80% of the lifetime (480 s, less a jitter
            // of up to 10 s).
            const secondToken = await eventually(
              async () => {
                const token = await Deno.readTextFile(file);
                return token !== firstToken && token;
              },
              (exp - Date.now() / 1000) * 1000,
              "the kubelet's new token",
            );
            assert.ok(jwtClaims(secondToken).exp > exp);
            // Past the first token's expiry and the API server's leeway (60 s), it is refused;
            // the operator's requests after that must carry the new one.
            await sleep(Math.max(0, (exp + 65) * 1000 - Date.now()));
            const review = await client.api.create(
              {
                group: "authentication.k8s.io",
                version: "v1",
                plural: "tokenreviews",
                namespaced: false,
              },
              {
                apiVersion: "authentication.k8s.io/v1",
                kind: "TokenReview",
                spec: { token: firstToken },
              },
            );
            assert.equal(
              (review.status as { authenticated?: boolean }).authenticated ?? false,
              false,
            );
            await client.api.create(KOPFEXAMPLES, kex("t-2", { field: "value" }), { namespace });
            assert.equal((await handledBy(client, namespace, "t-2")).pod, podName);
            const lines = logs.of(namespace, podName);
            assert.deepEqual(
              lines.filter((l) => /\b401\b|unauthorized/i.test(l)),
              [],
              "no request refused for an expired token",
            );
            assert.deepEqual(permissionErrors(lines), [], lines.join("\n"));
          } catch (error) {
            await report(namespace, error);
          } finally {
            await removeDeployment(client, namespace, "kopf-operator");
          }
        }),
      });
    } finally {
      await logs.stop();
      console.log(`incluster: ${took.join(", ")}`);
    }
  },
});
