import assert from "node:assert/strict";
import {
  DEFAULT_BACKOFF,
  ErrorsMode,
  execute,
  HandlerChildrenRetry,
  HandlerRetriesError,
  HandlerTimeoutError,
  isFinal,
  type Outcome,
  PermanentError,
  TemporaryError,
  withDefaultBackoff,
} from "./execution.ts";

const T0 = new Date("2024-01-01T00:00:00Z");
const at = (seconds: number) => new Date(T0.getTime() + seconds * 1000);
const fresh = { started: T0, retries: 0 };

function failing(error: unknown): () => never {
  return () => {
    throw error;
  };
}

function errorOf(outcome: Outcome): Error {
  assert.notEqual(outcome.kind, "success");
  return (outcome as { error: Error }).error;
}

Deno.test("execute() returns success with the sync or async result (REG-02, RES-01)", async () => {
  let calls = 0;
  const sync = await execute({ id: "h" }, fresh, () => {
    calls++;
    return { a: 1 };
  }, T0);
  assert.deepEqual(sync, { kind: "success", result: { a: 1 } });
  const asyncResult = await execute({ id: "h" }, fresh, async () => {
    calls++;
    await Promise.resolve();
    return "done";
  }, T0);
  assert.deepEqual(asyncResult, { kind: "success", result: "done" });
  assert.equal(calls, 2);
  assert.equal(isFinal(sync), true);
});

Deno.test("execute() retries TemporaryError after 60s by default (ERR-02)", async () => {
  const error = new TemporaryError("later");
  const outcome = await execute({ id: "h" }, fresh, failing(error), T0);
  assert.deepEqual(outcome, { kind: "temporary", error, delay: 60 });
  assert.equal(error.delay, 60);
  assert.equal(isFinal(outcome), false);
});

Deno.test("execute() uses TemporaryError's custom and null delays (ERR-02)", async () => {
  const custom = await execute(
    { id: "h" },
    fresh,
    failing(new TemporaryError("x", { delay: 7 })),
    T0,
  );
  assert.equal(custom.kind, "temporary");
  assert.equal((custom as { delay: number | null }).delay, 7);
  const immediate = await execute(
    { id: "h" },
    fresh,
    failing(new TemporaryError("x", { delay: null })),
    T0,
  );
  assert.equal(immediate.kind, "temporary");
  assert.equal((immediate as { delay: number | null }).delay, null);
});

Deno.test("execute() ignores the backoff and errors mode for TemporaryError (ERR-02, OPT-05)", async () => {
  for (const errors of Object.values(ErrorsMode)) {
    const outcome = await execute(
      { id: "h", errors, backoff: 3 },
      fresh,
      failing(new TemporaryError("x", { delay: 9 })),
      T0,
    );
    assert.equal(outcome.kind, "temporary", errors);
    assert.equal((outcome as { delay: number | null }).delay, 9, errors);
  }
});

Deno.test("execute() fails permanently on PermanentError in any errors mode (ERR-03)", async () => {
  for (const errors of [undefined, ...Object.values(ErrorsMode)]) {
    const error = new PermanentError("never");
    const outcome = await execute({ id: "h", errors }, fresh, failing(error), T0);
    assert.deepEqual(outcome, { kind: "permanent", error }, String(errors));
    assert.equal(isFinal(outcome), true);
  }
});

Deno.test("execute() retries arbitrary errors with the default 60s backoff (ERR-04, SUB-40)", async () => {
  const error = new RangeError("boom");
  const outcome = await execute({ id: "h" }, fresh, failing(error), T0);
  assert.deepEqual(outcome, { kind: "temporary", error, delay: DEFAULT_BACKOFF });
  assert.equal(DEFAULT_BACKOFF, 60);
});

Deno.test("execute() uses the handler's backoff in TEMPORARY mode (OPT-08, ERR-05)", async () => {
  const error = new Error("boom");
  const outcome = await execute(
    { id: "h", errors: ErrorsMode.TEMPORARY, backoff: 5 },
    fresh,
    failing(error),
    T0,
  );
  assert.deepEqual(outcome, { kind: "temporary", error, delay: 5 });
});

Deno.test("execute() fails arbitrary errors permanently in PERMANENT mode (ERR-05)", async () => {
  const error = new Error("boom");
  const outcome = await execute(
    { id: "h", errors: ErrorsMode.PERMANENT, backoff: 5 },
    fresh,
    failing(error),
    T0,
  );
  assert.deepEqual(outcome, { kind: "permanent", error });
});

Deno.test("execute() ignores arbitrary errors in IGNORED mode, as final (ERR-05)", async () => {
  const error = new Error("boom");
  const outcome = await execute({ id: "h", errors: ErrorsMode.IGNORED }, fresh, failing(error), T0);
  assert.deepEqual(outcome, { kind: "ignored", error });
  assert.equal(isFinal(outcome), true);
});

Deno.test("execute() wraps thrown non-errors and async rejections (ERR-04)", async () => {
  const thrown = await execute({ id: "h" }, fresh, failing("a string"), T0);
  assert.equal(thrown.kind, "temporary");
  assert.ok(errorOf(thrown) instanceof Error);
  assert.equal(errorOf(thrown).message, "a string");
  const rejected = await execute({ id: "h", errors: "permanent" }, fresh, async () => {
    await Promise.resolve();
    throw new TypeError("async");
  }, T0);
  assert.equal(rejected.kind, "permanent");
  assert.equal(errorOf(rejected).message, "async");
});

Deno.test("execute() treats HandlerChildrenRetry as temporary with its delay (HK-SUB-10)", async () => {
  const outcome = await execute({ id: "h" }, fresh, failing(new HandlerChildrenRetry(null)), T0);
  assert.equal(outcome.kind, "temporary");
  assert.equal((outcome as { delay: number | null }).delay, null);
});

Deno.test("execute() checks retries before the attempt and looks ahead after it: retries=3 allows 3 attempts (OPT-07, ERR-07, SUB-41, K26-21)", async () => {
  const calls: number[] = [];
  const outcomes: Outcome[] = [];
  for (let retries = 0; retries < 4; retries++) {
    outcomes.push(
      await execute({ id: "h", retries: 3 }, { started: T0, retries }, () => {
        calls.push(retries);
        throw new Error("again");
      }, T0),
    );
  }
  assert.deepEqual(calls, [0, 1, 2]);
  assert.deepEqual(outcomes.map((o) => o.kind), [
    "temporary",
    "temporary",
    "permanent", // as Kopf: the next attempt would exceed the retries, so it stops now
    "permanent",
  ]);
  const foreseen = errorOf(outcomes[2]!);
  assert.ok(foreseen instanceof HandlerRetriesError);
  assert.equal(
    foreseen.message,
    "Handler 'h' failed with an exception and will stop now " +
      "(it would exceed 3 retries on the next attempt): again",
  );
  assert.equal((foreseen.cause as Error).message, "again");
  const last = errorOf(outcomes[3]!);
  assert.ok(last instanceof HandlerRetriesError);
  assert.ok(last instanceof PermanentError);
  assert.match(last.message, /'h'/);
});

Deno.test("execute() lets a successful last allowed attempt succeed (OPT-07)", async () => {
  const outcome = await execute({ id: "h", retries: 1 }, fresh, () => "ok", T0);
  assert.deepEqual(outcome, { kind: "success", result: "ok" });
});

Deno.test("execute() checks the timeout from the first attempt before running (OPT-06, ERR-06, SUB-41)", async () => {
  let calls = 0;
  const fn = () => {
    calls++;
    return "ran";
  };
  const within = await execute({ id: "h", timeout: 10 }, { started: T0, retries: 2 }, fn, at(9));
  assert.deepEqual(within, { kind: "success", result: "ran" });
  const past = await execute({ id: "h", timeout: 10 }, { started: T0, retries: 2 }, fn, at(11));
  assert.equal(past.kind, "permanent");
  const error = errorOf(past);
  assert.ok(error instanceof HandlerTimeoutError);
  assert.ok(error instanceof PermanentError);
  assert.equal(calls, 1);
});

Deno.test("execute() checks the timeout before the retries limit (SUB-41)", async () => {
  const outcome = await execute(
    { id: "h", timeout: 1, retries: 1 },
    { started: T0, retries: 5 },
    () => "never",
    at(100),
  );
  assert.ok(errorOf(outcome) instanceof HandlerTimeoutError);
});

Deno.test("execute() aborts the signal of an async handler running past its timeout (ERR-09)", async () => {
  const started = new Date();
  let sawAbort = false;
  const outcome = await execute(
    { id: "slow", timeout: 0.02 },
    { started, retries: 0 },
    (signal) =>
      new Promise((_, reject) => {
        const safety = setTimeout(() => reject(new Error("not aborted in time")), 2000);
        signal.addEventListener("abort", () => {
          clearTimeout(safety);
          sawAbort = true;
          reject(new Error("handler's own cancellation error"));
        }, { once: true });
      }),
    started,
  );
  assert.equal(sawAbort, true);
  assert.equal(outcome.kind, "permanent");
  assert.ok(errorOf(outcome) instanceof HandlerTimeoutError);
});

Deno.test("execute() does not abort the signal of a handler that finishes in time (ERR-09)", async () => {
  let captured: AbortSignal | undefined;
  const outcome = await execute({ id: "h", timeout: 0.02 }, { started: new Date(), retries: 0 }, (
    signal,
  ) => {
    captured = signal;
    return 1;
  });
  assert.deepEqual(outcome, { kind: "success", result: 1 });
  await new Promise((resolve) => setTimeout(resolve, 30));
  assert.equal(captured?.aborted, false);
});

Deno.test("TemporaryError/PermanentError carry names, messages and causes (ERR-02, ERR-03)", () => {
  const cause = new Error("root");
  const temporary = new TemporaryError("t", { delay: 1, cause });
  assert.equal(temporary.name, "TemporaryError");
  assert.equal(temporary.message, "t");
  assert.equal(temporary.cause, cause);
  const permanent = new PermanentError("p", { cause });
  assert.equal(permanent.name, "PermanentError");
  assert.equal(permanent.cause, cause);
  assert.equal(new HandlerTimeoutError("x").name, "HandlerTimeoutError");
  assert.equal(new HandlerRetriesError("x").name, "HandlerRetriesError");
  assert.ok(new HandlerChildrenRetry(1) instanceof TemporaryError);
});

Deno.test("execute() with a parent signal: the attempt's signal follows it (fast path without a timeout)", async () => {
  const fresh = () => ({ started: new Date(), retries: 0 });
  // Without a timeout, the attempt gets the parent signal itself (no combined signal).
  const parent = new AbortController();
  let captured: AbortSignal | undefined;
  assert.deepEqual(
    await execute(
      { id: "h" },
      fresh(),
      (signal) => (captured = signal, 1),
      undefined,
      parent.signal,
    ),
    { kind: "success", result: 1 },
  );
  assert.equal(captured, parent.signal);
  // With a timeout, the signal follows both the timeout and the parent.
  const outcome = await execute(
    { id: "h", timeout: 10, backoff: 1 },
    fresh(),
    (signal) => {
      captured = signal;
      assert.equal(signal.aborted, false);
      parent.abort(new Error("shutdown"));
      assert.equal(signal.aborted, true);
      assert.equal((signal.reason as Error).message, "shutdown");
      throw new Error("handler stopped");
    },
    undefined,
    parent.signal,
  );
  // A parent's abort is not the handler's timeout: the handler's own error is classified,
  // exactly as without a parent signal.
  assert.equal(outcome.kind, "temporary");
  assert.equal(errorOf(outcome).message, "handler stopped");
  // The same without a timeout.
  const other = new AbortController();
  const plain = await execute(
    { id: "h" },
    fresh(),
    () => {
      other.abort(new Error("shutdown"));
      throw new Error("handler stopped");
    },
    undefined,
    other.signal,
  );
  assert.equal(plain.kind, "temporary");
  assert.equal(errorOf(plain).message, "handler stopped");
  // The timeout still aborts with HandlerTimeoutError when a parent is given.
  const slow = await execute(
    { id: "slow", timeout: 0.02 },
    fresh(),
    (signal) =>
      new Promise((_, reject) => {
        signal.addEventListener("abort", () => reject(new Error("cancelled")), { once: true });
      }),
    undefined,
    new AbortController().signal,
  );
  assert.equal(slow.kind, "permanent");
  assert.ok(errorOf(slow) instanceof HandlerTimeoutError);
});

Deno.test("withDefaultBackoff() fills in the operator-wide backoff; a handler's own one wins (K26-02)", async () => {
  const error = new Error("boom");
  const fail = () => {
    throw error;
  };
  const state = { started: new Date(), retries: 0 };
  const filled = await execute(withDefaultBackoff({ id: "h" }, 7), state, fail);
  assert.deepEqual(filled, { kind: "temporary", error, delay: 7 });
  const own = await execute(withDefaultBackoff({ id: "h", backoff: 3 }, 7), state, fail);
  assert.deepEqual(own, { kind: "temporary", error, delay: 3 });
  const temporary = await execute(withDefaultBackoff({ id: "h" }, 7), state, () => {
    throw new TemporaryError("later");
  });
  assert.equal(temporary.kind === "temporary" && temporary.delay, 60, "TemporaryError keeps 60");
  const unset = await execute(withDefaultBackoff({ id: "h" }, undefined), state, fail);
  assert.deepEqual(unset, { kind: "temporary", error, delay: DEFAULT_BACKOFF });
});

Deno.test("execute() looks ahead at the timeout: a retry that would come too late ends the handler now, TemporaryError too (K26-21)", async () => {
  const state = { started: T0, retries: 0 };
  const at = new Date(T0.getTime() + 5_000); // 5 s into a 10 s timeout
  const arbitrary = await execute({ id: "h", timeout: 10, backoff: 6 }, state, () => {
    throw new Error("slow");
  }, at);
  assert.equal(arbitrary.kind, "permanent");
  assert.equal(
    errorOf(arbitrary).message,
    "Handler 'h' failed with an exception and will stop now " +
      "(it would time out in 10 seconds on the next attempt): slow",
  );
  assert.ok(errorOf(arbitrary) instanceof HandlerTimeoutError);
  const temporary = await execute({ id: "h", timeout: 10 }, state, () => {
    throw new TemporaryError("later", { delay: 6 });
  }, at);
  assert.equal(
    errorOf(temporary).message,
    "Handler 'h' failed temporarily but will time out after 10 seconds: later",
  );
  const retried = await execute({ id: "h", retries: 1 }, state, () => {
    throw new TemporaryError("later", { delay: 1 });
  }, at);
  assert.equal(
    errorOf(retried).message,
    "Handler 'h' failed temporarily but will exceed 1 retries: later",
  );
  const inTime = await execute({ id: "h", timeout: 10, backoff: 4 }, state, () => {
    throw new Error("fast");
  }, at);
  assert.equal(inTime.kind, "temporary", "the next attempt still fits");
});
