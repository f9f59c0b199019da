"""
Handlers of the real Python Kopf for the state-compatibility tests (tests/kopf_compat_test.ts).

They mirror the handlers our operator registers in those tests (same ids, same results), and
print a marker line ``COMPAT <handler id> <object name> retry=<n> at=<epoch ms>`` on every call,
so that the tests can tell from the output which handlers Python Kopf called, and when.

The object's ``spec.mode`` drives the create handler:
- ``retry``: fail with ``kopf.TemporaryError`` (delay ``spec.delay`` seconds, default 60);
- anything else: succeed with ``{"message": "hello from python"}`` (→ ``status.create_fn``).
  (Our operator's handlers in the tests fail on ``ours-fail``, so that Kopf continues a retry.)

Run by tests/_kopf.ts as ``kopf run --standalone -n <namespace> handlers.py``.
"""
import time

import kopf


def marker(handler: str, name: str, retry: int) -> None:
    print(f"COMPAT {handler} {name} retry={retry} at={int(time.time() * 1000)}", flush=True)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    # Objects' log messages are also posted as Events by default; keep them (as ours do), but
    # make the watch streams reconnect quickly so that a stop is prompt.
    settings.watching.server_timeout = 30


@kopf.on.create("kopf.dev", "v1", "kopfexamples")
def create_fn(spec, name, retry, **_):
    marker("create_fn", name, retry)
    if spec.get("mode") == "retry":
        raise kopf.TemporaryError("python says: not yet", delay=int(spec.get("delay", 60)))
    return {"message": "hello from python"}


@kopf.on.update("kopf.dev", "v1", "kopfexamples")
def update_fn(name, retry, **_):
    marker("update_fn", name, retry)


@kopf.on.resume("kopf.dev", "v1", "kopfexamples")
def resume_fn(name, retry, **_):
    marker("resume_fn", name, retry)


@kopf.on.delete("kopf.dev", "v1", "kopfexamples")
def delete_fn(name, retry, **_):
    marker("delete_fn", name, retry)
