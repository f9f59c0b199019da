"""
The benchmark's handlers for Python Kopf: the same three handlers as ``kopf_ts.ts``.

- ``create_fn`` returns ``{message, started}`` -> ``status.create_fn`` (``started``: ms since
  the epoch when the handler began, for the creation-to-handler latency);
- ``update_fn`` returns ``{value, started}`` -> ``status.update_fn``;
- ``delete_fn`` (only with ``BENCH_DELETE=1``, so the other scenarios run without finalizers).

The handlers are ``async def``: that is Kopf's fastest path (no thread-pool hop per handler).
Every run is appended to ``$BENCH_RUNLOG`` so that the harness can count handler runs.
With ``BENCH_LOGGERS=1`` (the ``kopf-py-logs-on`` contender) log messages are posted as Events.

    kopf run --standalone -n NAMESPACE -q bench/handlers/kopf_py.py
"""
import os
import time

import kopf

_plural = os.environ.get('BENCH_PLURAL', 'kopfexamples')  # the CRD variant's resource
_path = os.environ.get('BENCH_RUNLOG')
_runlog = open(_path, 'a', buffering=1) if _path else None


def _record(handler: str, name: str, started: float) -> None:
    if _runlog is not None:
        _runlog.write(f'{handler} {name} {started}\n')


@kopf.on.create(_plural)
async def create_fn(name, **_):
    started = time.time() * 1000
    _record('create', name, started)
    return {'message': 'hello', 'started': started}


@kopf.on.update(_plural)
async def update_fn(name, spec, **_):
    started = time.time() * 1000
    _record('update', name, started)
    return {'value': spec.get('value'), 'started': started}


if os.environ.get('BENCH_LOGGERS') == '1':
    @kopf.on.startup()
    async def log_events(settings: kopf.OperatorSettings, **_):
        settings.posting.loggers = True


if os.environ.get('BENCH_DELETE') == '1':
    @kopf.on.delete(_plural)
    async def delete_fn(name, **_):
        _record('delete', name, time.time() * 1000)
