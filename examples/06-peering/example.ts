/**
 * Several operators for the same objects, and the development mode. Port of Kopf's example
 * 06-peering.
 *
 * Operators that serve the same namespace find each other in the `KopfPeering` object `default`
 * (cluster-wide operators: the `ClusterKopfPeering` `default`). Only the live one with the
 * highest priority works; the others pause — no watching, no handlers — until it is gone. Two
 * with the same priority is a deployment mistake: both pause and warn. The main use is the
 * development mode: `--dev` (priority 666) on a workstation pauses the deployed operator (priority
 * 0) until the developer's operator exits; `kopf freeze` does the same without an operator.
 *
 * The create handler stores the priority of the operator that handled the object in
 * `status.create_fn.priority`, so `kubectl get` shows which one it was.
 *
 *   kubectl apply -f crds/example.yaml -f crds/peering.yaml -f deploy/peering.yaml
 *   kopf run examples/06-peering/example.ts --verbose -n default      # shell A
 *   kopf run examples/06-peering/example.ts --verbose -n default      # shell B
 *     (both warn: "Possibly conflicting operators with the same priority 0: …"; stop B)
 *   kopf run examples/06-peering/example.ts --verbose -n default --dev
 *     (A: "Pausing operations in favour of … (priority 666)"; objects go to B; stop B)
 *     (A: "Resuming operations after the pause")
 *   kopf freeze -n default --lifetime 60 --priority 100   # A pauses
 *   kopf resume -n default                                # A resumes
 *
 * With `POD_ID=alice` in the environment, the operator appears as `alice` in the peering object
 * and in the other operators' messages (in a Pod: the Pod's name, see deploy/deployment.yaml).
 */
import { on } from "../../mod.ts";

/** This operator's priority, as `--priority`/`--dev` (or a startup handler) set it. */
let priority = 0;

on.startup(function remember_priority({ settings, logger }) {
  priority = settings.peering.priority;
  logger.info(`Starting with the peering priority ${priority}.`);
});

on.create("kopfexamples", function create_fn({ logger }) {
  logger.info(`Handled by the operator with the priority ${priority}.`);
  return { priority };
});
