"""
A field handler with an explicit id, for the state-compatibility tests of handler ids
(tests/kopf_compat_test.ts): Kopf stores it as ``field_fn/spec.field`` (status key, progress
annotation ``kopf.zalando.org/field_fn.spec.field``, log lines), appending the field to the id
even though the id is explicit. It prints ``COMPAT <id> <name> retry=<n> at=<epoch ms>`` on
every call.

The object's ``spec.mode`` drives it:
- ``retry``: fail with ``kopf.TemporaryError`` (delay ``spec.delay`` seconds, default 60);
- anything else: succeed with ``{"message": "field from python"}``.

Run by tests/_kopf.ts as ``kopf run --standalone -n <namespace> field_handlers.py``.
"""
import time

import kopf


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.watching.server_timeout = 30


@kopf.on.field("kopf.dev", "v1", "kopfexamples", field="spec.field", id="field_fn")
def field_handler(spec, name, retry, **_):
    print(f"COMPAT field_fn {name} retry={retry} at={int(time.time() * 1000)}", flush=True)
    if spec.get("mode") == "retry":
        raise kopf.TemporaryError("python says: not yet", delay=int(spec.get("delay", 60)))
    return {"message": "field from python"}
