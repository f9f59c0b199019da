/**
 * A handler file for the scale-out tests, run by `kopf run` subprocesses (leader election and
 * sharded replicas). Each handler run prints one line `RUN <handler> <namespace>/<name> <replica>`
 * (the replica's name comes from `$REPLICA`), so a test can count the runs over all replicas,
 * even of a replica it killed. `$KOPF_TEST_LEASE` = `duration,deadline,retry` shortens the Lease
 * timings so that expiries happen within a test. `$KOPF_TEST_SLOW` = seconds makes the create
 * handler slow, printing `START create <namespace>/<name> <replica>` when it begins (so a test
 * can see which handlers are in flight). The create and update handlers return their replica
 * (and the value handled), so the objects' status shows whose completed run was persisted.
 */
import { on } from "../mod.ts";

const replica = Deno.env.get("REPLICA") ?? "?";
const say = (what: string, namespace: string | undefined, name: string | undefined) =>
  console.log(`RUN ${what} ${namespace}/${name} ${replica}`);

on.startup(function timings({ settings }) {
  settings.posting.enabled = false;
  const lease = Deno.env.get("KOPF_TEST_LEASE");
  if (lease) {
    const [leaseDuration, renewDeadline, retryPeriod] = lease.split(",").map(Number);
    for (const section of [settings.leadership, settings.sharding]) {
      Object.assign(section, { leaseDuration, renewDeadline, retryPeriod });
    }
  }
  const shards = Deno.env.get("KOPF_TEST_SHARDS");
  if (shards) settings.sharding.shards = Number(shards);
});

const slow = Number(Deno.env.get("KOPF_TEST_SLOW") ?? 0);

on.create("kopfexamples", async function create_fn({ namespace, name, signal }) {
  if (slow) {
    console.log(`START create ${namespace}/${name} ${replica}`);
    await new Promise((resolve) => setTimeout(resolve, slow * 1000));
    signal.throwIfAborted();
  }
  say("create", namespace, name);
  return { replica };
});

on.update("kopfexamples", function update_fn({ namespace, name, spec }) {
  const value = (spec as { value?: number }).value;
  say(`update:${value ?? ""}`, namespace, name);
  return { replica, value };
});

on.delete("kopfexamples", function delete_fn({ namespace, name }) {
  say("delete", namespace, name);
});

on.event("kopfexamples", function event_fn({ type, namespace, name }) {
  if (type === "DELETED") say("deleted-event", namespace, name);
});
