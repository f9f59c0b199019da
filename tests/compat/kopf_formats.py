#!/usr/bin/env python3
"""
Generate the persisted formats of real Python Kopf for our compatibility tests.

Our storages in `core/settings/` must stay state-compatible with Python Kopf:
an object handled by one must look handled to the other. This script runs
Kopf's own storage classes, key conventions and diff functions on fixed
inputs and prints what they produce as JSON. The output is committed as
`tests/compat/kopf_formats.json` and read by `core/settings/compat_test.ts`
and `core/structs/compat_test.ts`.

Reproduce (the fixture was produced with kopf==1.45.2, Python 3.11):

    python3 -m venv /tmp/kopfvenv
    /tmp/kopfvenv/bin/pip install kopf==1.45.2
    PYTHONHASHSEED=0 /tmp/kopfvenv/bin/python tests/compat/kopf_formats.py \
        > tests/compat/kopf_formats.json

Diff items come out of Kopf in set-iteration order, so they are sorted here;
the tests compare them as sorted lists too.
"""
import copy
import datetime
import json
import sys
from typing import Any

import kopf
from kopf._cogs.structs import bodies, diffs, patches
from kopf._core.actions.progression import format_iso8601

KOPF_VERSION = kopf.__version__ if hasattr(kopf, '__version__') else None


def patch_of(fn: Any) -> dict[str, Any]:
    patch = patches.Patch()
    fn(patch)
    return dict(patch)


def sorted_diff(d: diffs.Diff) -> list[list[Any]]:
    items = [[str(op), list(field), old, new] for op, field, old, new in d]
    return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))


# ---------------------------------------------------------------------------------------------
# Annotation keys: V1/V2 forms, hashing, marking.
# ---------------------------------------------------------------------------------------------
KEY_IDS = [
    'create_fn',
    'update_fn/spec.field',
    'handler<with>angles',
    'touch-dummy',
    'last-handled-configuration',
    'x' * 46,
    'x' * 47,
    'x' * 50,
    'a' * 63,
    'a' * 64,
    'a' * 70,
    'a' * 100,
    'parent_handler_with_a_long_name/child_handler_with_a_long_name/grandchild',
    'ünïcödé_handler',
]
KEY_PREFIXES = [
    'kopf.zalando.org',
    'example.com',
    'my-operator-with-a-rather-long-name.example.com',
    'an-extremely-long-operator-prefix-for-v1-key-tests.example.com',  # V1 name room < 0
]

keys: list[dict[str, Any]] = []
for prefix in KEY_PREFIXES:
    for v1 in [True, False]:
        storage = kopf.AnnotationsProgressStorage(prefix=prefix, v1=v1)
        for key in KEY_IDS:
            keys.append({'prefix': prefix, 'v1': v1, 'key': key,
                         'keys': list(storage.make_keys(key))})

RS_BODY = {
    'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
    'metadata': {'name': 'rs1', 'ownerReferences': [
        {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'd1', 'uid': 'u1'},
    ]},
}
marked_keys = list(kopf.AnnotationsProgressStorage().make_keys('create_fn', body=bodies.Body(RS_BODY)))
suffixes = {text: kopf.AnnotationsProgressStorage().make_suffix(text)
            for text in ['abc', '', 'create_fn', 'a' * 70, 'ünïcödé']}

# ---------------------------------------------------------------------------------------------
# Progress records and storages.
# ---------------------------------------------------------------------------------------------
UTC = datetime.UTC
timestamps = {
    'micro': format_iso8601(datetime.datetime(2020, 2, 14, 16, 58, 25, 396364, tzinfo=UTC)),
    'milli': format_iso8601(datetime.datetime(2020, 2, 14, 16, 58, 25, 396000, tzinfo=UTC)),
    'whole': format_iso8601(datetime.datetime(2020, 2, 14, 16, 58, 25, 0, tzinfo=UTC)),
}

RECORD_FULL = {  # the shape HandlerState.for_storage() produces: all fields, Nones included
    'started': '2020-02-14T16:58:25.396000+00:00',
    'stopped': None,
    'delayed': '2020-02-14T16:59:25.396000+00:00',
    'purpose': 'create',
    'retries': 1,
    'success': False,
    'failure': False,
    'message': 'Ünïcödé ✓ "quoted"\n\ttab \x7f \U0001F600',
    'subrefs': ['create_fn/sub1', 'create_fn/sub2'],
}
RECORD_DONE = {
    'started': '2020-02-14T16:58:25.396000+00:00',
    'stopped': '2020-02-14T16:58:26.000000+00:00',
    'delayed': None,
    'purpose': 'update',
    'retries': 3,
    'success': True,
    'failure': False,
    'message': None,
    'subrefs': None,
}

BODY_WITH_PROGRESS = {
    'metadata': {'annotations': {
        'kopf.zalando.org/create_fn': '{"started":"2020-02-14T16:58:25.396364","retries":0}',
        'kopf.zalando.org/' + 'a' * 39 + '-DKa84Q': '{"retries":5}',  # a V1-only record
        'kopf.zalando.org/touch-dummy': 'old-touch',
        'unrelated': 'keep',
    }},
    'status': {'kopf': {'progress': {
        'create_fn': {'retries': 7},
        'status_only_fn': {'started': '2020-02-14T16:58:25.396364', 'retries': 2},
    }, 'dummy': 'old-status-touch'}},
}

ESSENCE_WITH_PROGRESS = {
    'spec': {'field': 'value'},
    'metadata': {'annotations': {
        'kopf.zalando.org/create_fn': '{}',
        'example.com/other': 'keep',
    }},
    'status': {'kopf': {'progress': {'create_fn': {}}}, 'other': 'keep'},
}

progress: dict[str, Any] = {}
ann = kopf.AnnotationsProgressStorage()
ann_verbose = kopf.AnnotationsProgressStorage(verbose=True)
ann_custom = kopf.AnnotationsProgressStorage(prefix='example.com', v1=False)
sts = kopf.StatusProgressStorage()
smart = kopf.SmartProgressStorage()
body = bodies.Body(BODY_WITH_PROGRESS)
empty = bodies.Body({})

progress['annotations_store_full'] = patch_of(
    lambda p: ann.store(key='create_fn', record=RECORD_FULL, body=empty, patch=p))
progress['annotations_store_done'] = patch_of(
    lambda p: ann.store(key='create_fn', record=RECORD_DONE, body=empty, patch=p))
progress['annotations_store_verbose'] = patch_of(
    lambda p: ann_verbose.store(key='create_fn', record=RECORD_DONE, body=empty, patch=p))
progress['annotations_store_long'] = patch_of(
    lambda p: ann.store(key='a' * 70, record=RECORD_DONE, body=empty, patch=p))
progress['annotations_store_custom_prefix'] = patch_of(
    lambda p: ann_custom.store(key='create_fn', record=RECORD_DONE, body=empty, patch=p))
progress['annotations_store_rs'] = patch_of(
    lambda p: ann.store(key='create_fn', record=RECORD_DONE, body=bodies.Body(RS_BODY), patch=p))
progress['annotations_fetch'] = {
    key: ann.fetch(key=key, body=body) for key in ['create_fn', 'a' * 70, 'absent_fn']}
progress['annotations_purge'] = patch_of(lambda p: [
    ann.store(key='fresh_fn', record=RECORD_DONE, body=body, patch=p),
    ann.purge(key='create_fn', body=body, patch=p),
    ann.purge(key='a' * 70, body=body, patch=p),
    ann.purge(key='fresh_fn', body=body, patch=p),
    ann.purge(key='absent_fn', body=body, patch=p),
])
progress['annotations_touch_value'] = patch_of(lambda p: ann.touch(body=body, patch=p, value='x'))
progress['annotations_touch_same'] = patch_of(lambda p: ann.touch(body=body, patch=p, value='old-touch'))
progress['annotations_touch_none'] = patch_of(lambda p: ann.touch(body=body, patch=p, value=None))
progress['annotations_touch_none_absent'] = patch_of(
    lambda p: ann.touch(body=empty, patch=p, value=None))
progress['annotations_touch_custom'] = patch_of(
    lambda p: ann_custom.touch(body=empty, patch=p, value='x'))
progress['annotations_clear'] = ann.clear(essence=copy.deepcopy(ESSENCE_WITH_PROGRESS))

progress['status_store'] = patch_of(
    lambda p: sts.store(key='create_fn', record=RECORD_DONE, body=empty, patch=p))
progress['status_fetch'] = {
    key: sts.fetch(key=key, body=body) for key in ['create_fn', 'status_only_fn', 'absent_fn']}
progress['status_purge'] = patch_of(lambda p: [
    sts.store(key='fresh_fn', record=RECORD_DONE, body=body, patch=p),
    sts.purge(key='create_fn', body=body, patch=p),
    sts.purge(key='fresh_fn', body=body, patch=p),
    sts.purge(key='absent_fn', body=body, patch=p),
])
progress['status_touch_value'] = patch_of(lambda p: sts.touch(body=body, patch=p, value='x'))
progress['status_touch_none'] = patch_of(lambda p: sts.touch(body=body, patch=p, value=None))
progress['status_clear'] = sts.clear(essence=copy.deepcopy(ESSENCE_WITH_PROGRESS))

progress['smart_store'] = patch_of(
    lambda p: smart.store(key='create_fn', record=RECORD_DONE, body=body, patch=p))
progress['smart_fetch'] = {
    key: smart.fetch(key=key, body=body)
    for key in ['create_fn', 'status_only_fn', 'a' * 70, 'absent_fn']}
progress['smart_purge'] = patch_of(lambda p: [
    smart.purge(key='create_fn', body=body, patch=p),
    smart.purge(key='status_only_fn', body=body, patch=p),
])
progress['smart_touch'] = patch_of(lambda p: smart.touch(body=body, patch=p, value='x'))
progress['smart_clear'] = smart.clear(essence=copy.deepcopy(ESSENCE_WITH_PROGRESS))

# ---------------------------------------------------------------------------------------------
# Diff-base storages and the essence.
# ---------------------------------------------------------------------------------------------
RICH_BODY = {
    'apiVersion': 'kopf.dev/v1',
    'kind': 'KopfExample',
    'metadata': {
        'name': 'kopf-example-1',
        'namespace': 'default',
        'uid': '6f6a4c2e-0000-4000-8000-000000000001',
        'resourceVersion': '12345',
        'generation': 2,
        'creationTimestamp': '2020-02-14T16:58:25Z',
        'finalizers': ['kopf.zalando.org/KopfFinalizerMarker'],
        'managedFields': [{'manager': 'kubectl', 'operation': 'Update'}],
        'labels': {'app': 'demo', 'zz': 'last', 'aa': 'first'},
        'annotations': {
            'kubectl.kubernetes.io/last-applied-configuration': '{"spec":{}}\n',
            'kopf.zalando.org/last-handled-configuration': '{"spec":{}}\n',
            'kopf.zalando.org/create_fn': '{"retries":1}',
            'other.kopf.zalando.org/whatever': 'x',
            'another-operator.example.com/kopf-managed': 'yes',
            'another-operator.example.com/last-handled-configuration': '{}',
            'custom.example.com/note': 'keep me',
            'note': 'ünïcödé ✓',
        },
    },
    'spec': {
        'field': 'value',
        'items': ['item1', 'item2'],
        'nested': {'b': 2, 'a': 1, 'empty': {}, 'null': None, 'list': [{'x': 1}, None, True]},
        'floats': [0.5, 1e-05, 0.0001, 123.456, 1e+21, 1.5e-07, -2.5],
        'ints': [0, -1, 123456789012, 9007199254740991],
        'text': 'tab\there "quoted" back\\slash /slash \x01 \x7f é \U0001F600',
    },
    'data': {'top-level': 'non-spec field'},
    'status': {
        'field': 'status-value',
        'kopf': {'progress': {'create_fn': {'retries': 1}}},
        'create_fn': {'message': 'result'},
    },
}

MINIMAL_BODY = {
    'apiVersion': 'v1', 'kind': 'ConfigMap',
    'metadata': {'name': 'cm', 'annotations': {'kopf.zalando.org/x': 'y'}, 'labels': {}},
    'status': {},
}

dflt = kopf.AnnotationsDiffBaseStorage()
dflt_custom = kopf.AnnotationsDiffBaseStorage(prefix='example.com', key='diff-base', v1=False)
status_db = kopf.StatusDiffBaseStorage()
multi_db = kopf.MultiDiffBaseStorage([dflt, status_db])
ignoring = kopf.AnnotationsDiffBaseStorage(ignored_fields=['spec.nested', 'spec.absent.x'])
rich = bodies.Body(RICH_BODY)

diffbase: dict[str, Any] = {}
diffbase['build'] = dflt.build(body=rich)
diffbase['build_extra'] = dflt.build(body=rich, extra_fields=['status.field', 'metadata.name',
                                                              'spec.absent', 'status.absent.x'])
diffbase['build_ignored'] = ignoring.build(body=rich)
diffbase['build_minimal'] = dflt.build(body=bodies.Body(MINIMAL_BODY))
diffbase['build_status'] = status_db.build(body=rich, extra_fields=['status.kopf', 'status.field'])
diffbase['build_multi'] = multi_db.build(body=rich, extra_fields=['status.field'])
diffbase['build_custom'] = dflt_custom.build(body=rich)
diffbase['store'] = patch_of(
    lambda p: dflt.store(body=rich, patch=p, essence=dflt.build(body=rich)))
diffbase['store_extra'] = patch_of(
    lambda p: dflt.store(body=rich, patch=p,
                         essence=dflt.build(body=rich, extra_fields=['status.field'])))
diffbase['store_minimal'] = patch_of(
    lambda p: dflt.store(body=empty, patch=p, essence=dflt.build(body=bodies.Body(MINIMAL_BODY))))
diffbase['store_custom'] = patch_of(
    lambda p: dflt_custom.store(body=rich, patch=p, essence=dflt_custom.build(body=rich)))
diffbase['store_long_key'] = patch_of(
    lambda p: kopf.AnnotationsDiffBaseStorage(key='k' * 70).store(
        body=empty, patch=p, essence={'spec': {'a': 1}}))
diffbase['store_status'] = patch_of(
    lambda p: status_db.store(body=rich, patch=p, essence=status_db.build(body=rich)))
diffbase['store_multi'] = patch_of(
    lambda p: multi_db.store(body=rich, patch=p, essence=multi_db.build(body=rich)))

STORED_BODY = {'metadata': {'annotations': {
    'kopf.zalando.org/last-handled-configuration': '{"spec":{"a":1}}\n',
}}, 'status': {'kopf': {'last-handled-configuration': '{"spec":{"b":2}}'}}}
diffbase['fetch'] = dflt.fetch(body=bodies.Body(STORED_BODY))
diffbase['fetch_status'] = status_db.fetch(body=bodies.Body(STORED_BODY))
diffbase['fetch_multi'] = multi_db.fetch(body=bodies.Body(STORED_BODY))
diffbase['fetch_absent'] = dflt.fetch(body=empty)

# ---------------------------------------------------------------------------------------------
# Diffs.
# ---------------------------------------------------------------------------------------------
DIFF_CASES = [
    [None, None],
    [None, {'spec': {'a': 1}}],
    [{'spec': {'a': 1}}, None],
    [{'a': 1}, {'a': 1}],
    [{'a': 1}, {'a': 2}],
    [{'a': 1}, {'b': 1}],
    [{'a': None}, {}],
    [{'a': {'b': {'c': 1, 'd': 2}}}, {'a': {'b': {'c': 1, 'd': 3, 'e': 4}}}],
    [{'a': [1, 2]}, {'a': [1, 2, 3]}],
    [{'a': [1, 2]}, {'a': [1, 2]}],
    [{'a': {'x': 1}}, {'a': 'scalar'}],
    [{'a': 'scalar'}, {'a': {'x': 1}}],
    [{'a': {}}, {'a': None}],
    [{}, {'a': {}}],
    [1, 2],
    ['x', None],
    [{'spec': {'s': {'x': 1}}}, {'spec': {'s': None, 't': [1]}}],
]
REDUCE_CASES = [
    [{'spec': {'s': {'x': 1, 'y': 2}}}, {'spec': {'s': {'x': 2, 'y': 2}}}, ['spec', 's']],
    [{'spec': {'s': {'x': 1}}}, {'spec': {'s': {'x': 2}}}, ['spec', 's', 'x']],
    [None, {'spec': {'s': {'x': 1, 'y': {'z': 1}}}}, ['spec', 's']],
    [{'spec': {'s': {'x': 1}}}, {}, ['spec', 's', 'x']],
    [{'spec': {'s': 'str'}}, {'spec': {'s': {'x': 1}}}, ['spec', 's', 'x']],
    [{'spec': {'a': 1}, 'metadata': {'labels': {'l': 'v'}}}, {'spec': {'a': 2}}, ['spec']],
    [{'spec': {'a': 1}}, {'spec': {'a': 2}}, []],
    [{'spec': {'a': 1}}, {'spec': {'a': 2}}, ['status']],
]
diff_results = {
    'diff': [{'a': a, 'b': b, 'diff': sorted_diff(diffs.diff(a, b))} for a, b in DIFF_CASES],
    'reduce': [{'a': a, 'b': b, 'path': path,
                'diff': sorted_diff(diffs.reduce(diffs.diff(a, b), tuple(path)))}
               for a, b, path in REDUCE_CASES],
    'scope_left': sorted_diff(diffs.diff({'a': 1, 'b': {'c': 1}}, {'b': {'c': 2, 'd': 3}, 'e': 4},
                                         scope=diffs.DiffScope.LEFT)),
    'scope_right': sorted_diff(diffs.diff({'a': 1, 'b': {'c': 1}}, {'b': {'c': 2, 'd': 3}, 'e': 4},
                                          scope=diffs.DiffScope.RIGHT)),
}

json.dump({
    'generator': 'tests/compat/kopf_formats.py',
    'kopf': KOPF_VERSION or 'unknown',
    'python': sys.version.split()[0],
    'inputs': {
        'RS_BODY': RS_BODY, 'RECORD_FULL': RECORD_FULL, 'RECORD_DONE': RECORD_DONE,
        'BODY_WITH_PROGRESS': BODY_WITH_PROGRESS, 'ESSENCE_WITH_PROGRESS': ESSENCE_WITH_PROGRESS,
        'RICH_BODY': RICH_BODY, 'MINIMAL_BODY': MINIMAL_BODY, 'STORED_BODY': STORED_BODY,
    },
    'keys': keys,
    'marked_keys': marked_keys,
    'suffixes': suffixes,
    'timestamps': timestamps,
    'progress': progress,
    'diffbase': diffbase,
    'diffs': diff_results,
}, sys.stdout, indent=1, ensure_ascii=True)
sys.stdout.write('\n')
