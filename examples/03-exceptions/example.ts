/**
 * How handler errors are treated. Port of Kopf's example 03-exceptions.
 *
 * Four create handlers fail in four ways:
 * - `instant_failure_with_only_a_message` throws a `PermanentError`: it fails at once, and the
 *   log says only its message (no stack trace);
 * - `eventual_success_with_few_messages` throws a `TemporaryError` with a 1-second delay on its
 *   first three attempts and succeeds on the fourth;
 * - `eventual_failure_with_tracebacks` throws an ordinary error: it is retried every second
 *   (`backoff: 1`) and gives up after three attempts (`retries: 3`), each failure logged with
 *   its stack trace;
 * - `instant_failure_with_traceback` throws the same ordinary error, but with
 *   `errors: ErrorsMode.PERMANENT` it fails on the first attempt.
 * After about three seconds the creation is done: 1 succeeded, 3 failed. Failures are logged
 * (and, with `settings.posting.loggers` on, posted as Events) but never retried for this
 * creation again.
 *
 *   kubectl apply -f crds/example.yaml
 *   kopf run examples/03-exceptions/example.ts --verbose
 *   kubectl apply -f examples/obj.yaml
 */
import { ErrorsMode, on, PermanentError, TemporaryError } from "../../mod.ts";

/** An error the framework knows nothing about (neither temporary nor permanent). */
class MyException extends Error {
  override name = "MyException";
}

on.create("kopfexamples", function instant_failure_with_only_a_message() {
  throw new PermanentError("Fail once and for all.");
});

on.create("kopfexamples", function eventual_success_with_few_messages({ retry }) {
  // Attempts number 0, 1 and 2 fail; attempt 3 succeeds.
  if (retry < 3) {
    throw new TemporaryError("Expected recoverable error.", { delay: 1 });
  }
});

on.create(
  "kopfexamples",
  { retries: 3, backoff: 1 },
  function eventual_failure_with_tracebacks() {
    throw new MyException("An error that is supposed to be recoverable.");
  },
);

on.create(
  "kopfexamples",
  { errors: ErrorsMode.PERMANENT, backoff: 1 },
  function instant_failure_with_traceback() {
    throw new MyException("An error that is supposed to be recoverable.");
  },
);
