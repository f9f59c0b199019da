"""
The Python Kopf half of the twin test (tests/twin_test.ts): the same operator is written with
this project's API in that test and both run side by side, each restricted to its own namespace,
on Kopf's example CRD with the status subresource (tests/fixtures/status-crd.yaml).

Every handler prints ``TWIN <handler id> <object name> retry=<n>`` when called, so that the test
can count the runs. ``spec.mode == "retry"`` makes the create handler fail once with
``kopf.TemporaryError`` (delay 2 s); the update handler fails once with an arbitrary error
(``backoff=1``); the create handler appends to ``status.items`` with a transformation function.

Run by tests/_kopf.ts as ``kopf run --standalone -n <namespace> twin_handlers.py``.
"""
import sys

import kopf

RESOURCE = ("kopf.dev", "v1", "kopfstatusexamples")


def marker(handler: str, name: str, retry: int) -> None:
    # One write per line: print() writes the text and the newline separately, and handlers run
    # in threads, so two markers could end up on one line.
    sys.stdout.write(f"TWIN {handler} {name} retry={retry}\n")
    sys.stdout.flush()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_):
    settings.watching.server_timeout = 30


@kopf.on.create(*RESOURCE, id="create_fn")
def create_fn(spec, name, retry, patch, body, **_):
    marker("create_fn", name, retry)
    if spec.get("mode") == "retry" and retry == 0:
        raise kopf.TemporaryError("not yet", delay=2)
    patch.status["phase"] = "created"
    patch.fns.append(append_item)
    kopf.info(body, reason="TwinCreated", message=f"created {name} at retry {retry}")
    return {"message": f"created {name}", "retry": retry}


def append_item(body, /):
    # A transformation function (Kopf 1.44+ patch.fns): appends to a list in the status.
    items = body.setdefault("status", {}).setdefault("items", [])
    if "from-fn" not in items:
        items.append("from-fn")


@kopf.on.update(*RESOURCE, id="update_fn", backoff=1)
def update_fn(spec, name, retry, patch, **_):
    marker("update_fn", name, retry)
    if retry == 0:
        raise ValueError("boom")
    patch.status["phase"] = "updated"
    patch.status["size"] = spec.get("size")
    return {"size": spec.get("size")}


@kopf.on.field(*RESOURCE, field="spec.field", id="field_fn")
def field_fn(old, new, name, retry, **_):
    marker("field_fn", name, retry)
    return {"old": old, "new": new}


@kopf.on.delete(*RESOURCE, id="delete_fn")
def delete_fn(name, retry, body, **_):
    marker("delete_fn", name, retry)
    kopf.info(body, reason="TwinDeleting", message=f"deleting {name}")
