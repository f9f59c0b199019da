/**
 * Embedding: an ordinary program that runs an operator in the background while it does its own
 * work, then stops it. Port of Kopf's example 12-embedded.
 *
 * The program starts the operator with `start()` (no CLI involved), waits until it is ready
 * (every watched resource listed once), then, as its own "main activity", creates and deletes a
 * few KopfExample objects — which the embedded operator handles meanwhile (`create_fn` on
 * creation, `delete_fn` on deletion, its finalizer keeping each object until then) — and
 * finally asks the operator to stop and waits for a clean exit. Kopf needs a thread and an
 * event loop for this; here the operator simply runs concurrently in the same event loop.
 *
 * The namespace is `default`, or `EXAMPLE_NAMESPACE` (not in Kopf's original; for tests).
 *
 *   kubectl apply -f crds/example.yaml
 *   deno run -A examples/12-embedded/example.ts
 */
import {
  ApiError,
  configureLogging,
  declarePermissions,
  KubeClient,
  on,
  start,
} from "../../mod.ts";

const KOPFEXAMPLES = { group: "kopf.dev", version: "v1", plural: "kopfexamples", namespaced: true };
const NAMESPACE = Deno.env.get("EXAMPLE_NAMESPACE") || "default";

// For `kopf generate rbac`: the app itself creates and deletes the objects.
declarePermissions(KOPFEXAMPLES, ["create", "delete"], { reason: "the app's main activity" });

on.create("kopfexamples", function create_fn() {});

on.delete("kopfexamples", function delete_fn() {});

async function main(steps = 3): Promise<void> {
  await configureLogging({ verbose: true }); // the same log lines as `kopf run --verbose`

  // Start the operator and let it initialise.
  console.log("Starting the main app.");
  await using operator = start({ namespaces: [NAMESPACE], standalone: true });
  await operator.ready;

  // The operator is active: run the app's own activity.
  using client = await KubeClient.connect();
  for (let step = 0; step < steps; step++) {
    console.log(`Do the main app activity here. Step ${step + 1}/${steps}.`);
    await createObject(client, step);
    await sleep(1);
    await deleteObject(client, step);
    await sleep(1);
  }

  // Ask the operator to terminate gracefully (can take a couple of seconds).
  console.log("Exiting the main app.");
  await operator.stop();
  console.log("The operator has stopped.");
}

async function createObject(client: KubeClient, step: number): Promise<void> {
  try {
    await client.api.create(KOPFEXAMPLES, {
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      metadata: { name: `kopf-example-${step}` },
    }, { namespace: NAMESPACE });
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 409)) throw error; // already exists: fine
  }
}

async function deleteObject(client: KubeClient, step: number): Promise<void> {
  try {
    await client.api.delete(KOPFEXAMPLES, `kopf-example-${step}`, { namespace: NAMESPACE });
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 404)) throw error; // already gone: fine
  }
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

if (import.meta.main) {
  await main();
}
