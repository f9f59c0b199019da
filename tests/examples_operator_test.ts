/**
 * End-to-end tests of the examples of the operator around its handlers: children (02-children),
 * an operator embedded in a program (12-embedded) and operator hooks (13-hooks), on the shared
 * control plane; daemons, timers and indices: tests/examples_background_test.ts. Each runs
 * `examples/NN-name/example.ts` the way a user would — with the real CLI (`cli.ts run …
 * --verbose -n <namespace>`) as a subprocess, or, for 12-embedded, as a program of its own —
 * does what a user would do with kubectl, and checks what a user would look at: objects, their
 * status and finalizers, children, the liveness endpoint, and the operator's log lines.
 * With `DUMP_LINES=1`, each test prints the operator's whole output when it stops.
 */

import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { sharedControlPlane } from "../testing/control_plane.ts";
import {
  assertNoCrashes,
  createExampleObject,
  fixture,
  getObject,
  isGone,
  lineIndex,
  linesWith,
  NAME,
  opts,
  PODS,
  ref,
  runExample,
  stopCleanly,
  waitFor,
} from "./_examples.ts";
import { eventually, KOPFEXAMPLES } from "./_support.ts";
import { freePort } from "../core/util/_test_support.ts";
import { createPod, probe, timeOf, waitForServiceAccount } from "./_example_operator.ts";

Deno.test(
  "02-children: a Pod is adopted by its parent and garbage-collected with it",
  opts,
  async () => {
    await using fx = await fixture("ex02");
    const { client, namespace } = fx;
    await waitForServiceAccount(client, namespace);
    await using op = await runExample("02-children", namespace);
    const parent = await createExampleObject(client, namespace);
    const p = ref(namespace);

    await waitFor(op, new RegExp(`\\[${namespace}/${NAME}\\] Handler 'create_fn' succeeded\\.`));
    const handled = await eventually(
      async () => {
        const b = await getObject(client, namespace);
        const status = b.status as { create_fn?: { children?: string[] } } | undefined;
        return status?.create_fn?.children ? b : undefined;
      },
      10_000,
      "the children in the parent's status",
    );
    const children = (handled.status as { create_fn: { children: string[] } }).create_fn.children;
    assert.equal(children.length, 1);

    // The child: found by its uid, adopted by the parent.
    const { items } = await client.api.list(PODS, { namespace });
    assert.equal(items.length, 1);
    const pod = items[0]!;
    assert.equal(pod.metadata?.uid, children[0]);
    assert.equal(pod.metadata?.namespace, namespace);
    assert.equal(pod.metadata?.generateName, `${NAME}-`);
    assert.ok(pod.metadata?.name?.startsWith(`${NAME}-`));
    assert.deepEqual(pod.metadata?.labels, { somelabel: "somevalue" });
    assert.deepEqual(pod.metadata?.ownerReferences, [{
      apiVersion: "kopf.dev/v1",
      kind: "KopfExample",
      name: NAME,
      uid: parent.metadata!.uid!,
      controller: true,
      blockOwnerDeletion: true,
    }]);
    // Rendered from the parent's spec.
    const container = (pod.spec as { containers: Array<Record<string, unknown>> }).containers[0]!;
    assert.deepEqual(container.env, [{ name: "FIELD", value: "value" }]);
    assert.match(String((container.args as string[])[0]), /echo "FIELD=\$FIELD"\nsleep 1m/);
    // Only a creation handler: no finalizer on the parent.
    assert.equal(handled.metadata?.finalizers, undefined);
    assert.equal(linesWith(op.lines, `${p} Handler 'create_fn' succeeded.`).length, 1);

    // The parent goes; the controller manager's garbage collector deletes the child.
    await client.api.delete(KOPFEXAMPLES, NAME, { namespace });
    await eventually(() => isGone(client, KOPFEXAMPLES, namespace, NAME), 10_000, "the parent");
    await eventually(
      () => isGone(client, PODS, namespace, pod.metadata!.name!),
      25_000,
      "the child to be garbage-collected",
    );

    await stopCleanly(op);
    assert.deepEqual(linesWith(op.lines, "Handler 'create_fn' failed"), []);
  },
);

// ---------------------------------------------------------------------------------------------
// 12-embedded
// ---------------------------------------------------------------------------------------------

Deno.test(
  "12-embedded: a program starts an operator, works with it running, and stops it",
  opts,
  async () => {
    await using fx = await fixture("ex12");
    const { client, namespace } = fx;
    const plane = await sharedControlPlane();
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--no-check", "examples/12-embedded/example.ts"],
      env: { KUBECONFIG: plane.kubeconfigPath, EXAMPLE_NAMESPACE: namespace, NO_COLOR: "1" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(40_000),
    }).output();
    const text = new TextDecoder().decode(output.stdout) + new TextDecoder().decode(output.stderr);
    const stdout = new TextDecoder().decode(output.stdout).split("\n");
    const lines = text.split("\n");
    assert.equal(output.code, 0, text);
    assertNoCrashes(lines);

    // The program's own steps, in order, while the operator runs in the background.
    const expected = [
      "Starting the main app.",
      "Do the main app activity here. Step 1/3.",
      "Do the main app activity here. Step 2/3.",
      "Do the main app activity here. Step 3/3.",
      "Exiting the main app.",
      "The operator has stopped.",
    ];
    assert.deepEqual(stdout.filter((l) => l && !l.startsWith("[")), expected, text);

    // The embedded operator handled each object: creation, then deletion (its finalizer kept
    // the object until the deletion handler had run).
    for (const step of [0, 1, 2]) {
      const p = ref(namespace, `kopf-example-${step}`);
      assert.equal(linesWith(lines, `${p} Handler 'create_fn' succeeded.`).length, 1, text);
      assert.equal(linesWith(lines, `${p} Handler 'delete_fn' succeeded.`).length, 1, text);
      assert.ok(
        lineIndex(lines, `${p} Handler 'create_fn' succeeded.`) <
          lineIndex(lines, `${p} Handler 'delete_fn' succeeded.`),
      );
    }
    // The operator was ready before the program started working, and stopped at the end.
    assert.ok(lineIndex(lines, `Watching kopfexamples`) >= 0, text);
    assert.ok(lineIndex(lines, "Operator stopped.") > lineIndex(lines, "Exiting the main app."));
    // Everything was deleted for real: no finalizer left behind.
    const { items } = await client.api.list(KOPFEXAMPLES, { namespace });
    assert.deepEqual(items.map((i) => i.metadata?.name), []);
  },
);

// ---------------------------------------------------------------------------------------------
// 13-hooks
// ---------------------------------------------------------------------------------------------

Deno.test(
  "13-hooks: startup, login, probes on the liveness endpoint, and cleanup",
  opts,
  async () => {
    await using fx = await fixture("ex13");
    const { client, namespace } = fx;
    const url = `http://127.0.0.1:${freePort()}/healthz`;
    await using op = await runExample("13-hooks", namespace, {
      plural: "pods",
      args: ["--liveness", url],
      env: { SERVE_DELAY_MAX: "1" },
    });
    const lines = op.lines;

    // Startup: the simple handler once; the retried one fails three times, 1 s apart.
    assert.equal(linesWith(lines, "Initialising the task registry...").length, 1);
    assert.equal(linesWith(lines, "Handler 'startup_fn_simple' succeeded.").length, 1);
    const failures = [3, 2, 1].map((n) =>
      linesWith(lines, `Handler 'startup_fn_retried' failed temporarily: Going to succeed in ${n}s`)
    );
    assert.deepEqual(failures.map((f) => f.length), [1, 1, 1], lines.join("\n"));
    const retried = linesWith(lines, "Starting retried...");
    assert.equal(retried.length, 1);
    assert.equal(linesWith(lines, "Handler 'startup_fn_retried' succeeded.").length, 1);
    const startupTook = timeOf(retried[0]!) - timeOf(failures[0]![0]!);
    assert.ok(startupTook >= 2_900, `retried for ${startupTook} ms`);

    // Login only after the startup; watching only after the login (which takes 2 s).
    const loginAt = lineIndex(lines, "Logging in in 2s...");
    assert.ok(loginAt > lineIndex(lines, "Starting retried..."), lines.join("\n"));
    const loggedIn = lineIndex(lines, "Handler 'login_fn' succeeded.");
    assert.ok(loggedIn > loginAt, lines.join("\n"));
    assert.ok(lineIndex(lines, "Watching pods") > loggedIn, lines.join("\n"));

    // The liveness endpoint answers with the probes' results: no tasks yet.
    assert.deepEqual(await probe(url), {
      status: 200,
      body: { tasks_count: 0, monitored_objects: {} },
    });
    const missing = await fetch(url.replace("/healthz", "/other"));
    assert.equal(missing.status, 404);
    await missing.body?.cancel();

    // A Pod gets a background task, which the probes report.
    await createPod(client, namespace, "kopf-pod");
    const p = ref(namespace, "kopf-pod");
    await waitFor(op, new RegExp(`\\[${namespace}/kopf-pod\\] Served by the background task\\.`));
    await waitFor(op, new RegExp(`\\[${namespace}/kopf-pod\\] Served by the background task\\.`));
    // Probe results are reused for 10 s (PROBE-04): the earlier answer may still be served.
    const expected = {
      status: 200,
      body: { tasks_count: 1, monitored_objects: { [namespace]: ["kopf-pod"] } },
    };
    await eventually(
      async () => isDeepStrictEqual(await probe(url), expected),
      20_000,
      "the probes to report the task",
    );
    assert.ok(linesWith(lines, `${p} Served by the background task.`).length >= 1);

    // On exit, the cleanup handler stops the tasks.
    await stopCleanly(op);
    const cleaning = lineIndex(lines, "Cleaning up...");
    assert.ok(cleaning > lineIndex(lines, "Stop requested"), lines.join("\n"));
    assert.equal(linesWith(lines, "All pod-tasks are requested to stop...").length, 1);
    assert.equal(linesWith(lines, "Handler 'cleanup_fn' succeeded.").length, 1);
    assert.equal(linesWith(lines, `${p} Serving is finished by request.`).length, 1);
    assert.ok(lineIndex(lines, `${p} Serving is finished by request.`) > cleaning);
    // The endpoint is gone with the operator.
    await assert.rejects(() => fetch(url));
  },
);

// ---------------------------------------------------------------------------------------------
// 14-daemons
// ---------------------------------------------------------------------------------------------
