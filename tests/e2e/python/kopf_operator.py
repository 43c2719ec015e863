"""A kopf operator (pip `kopf==1.45.*`) for kapi's e2e test `tests/e2e/tests/operator_kopf.rs`.

It reconciles the test's `Counter` custom resources (`counters.ops.kapi.dev/v1`) exactly as a
production kopf operator would, with kopf's defaults: kopf's own finalizer
(`kopf.zalando.org/KopfFinalizerMarker`, added because there is a delete handler), its diff base
in the annotation `kopf.zalando.org/last-handled-configuration`, its progress in annotations and
`status.kopf`, merge patches for the status subresource and JSON patches with a `test` op on
`/metadata/resourceVersion` for finalizers, k8s Events for handler outcomes, and list+watch with
resume from the last resourceVersion after a disconnect.

For every object, create/update/resume handlers write `status.observedValue`,
`status.observedMessage` and `status.observedGeneration` (through the status subresource: kopf
splits `patch.status` off to `/status` because the CRD declares the subresource); the delete
handler counts the cleanup, and kopf then removes its finalizer.

Run: `kopf run --standalone --all-namespaces tests/e2e/python/kopf_operator.py` with KUBECONFIG
set. A `stats ...` line goes to stdout every second (handler calls), for the test's report.
"""

import asyncio
import logging

import kopf

GROUP, VERSION, PLURAL = "ops.kapi.dev", "v1", "counters"

CALLS = {"create": 0, "update": 0, "resume": 0, "delete": 0}


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, logger, **_):
    # Defaults everywhere that matters; only keep the per-object log volume down (500 objects).
    settings.posting.level = logging.WARNING
    asyncio.get_running_loop().create_task(report())
    logger.info("kopf operator configured")


async def report():
    while True:
        await asyncio.sleep(1)
        print("stats " + " ".join(f"{k}={v}" for k, v in CALLS.items()), flush=True)


def observe(spec, meta, patch):
    patch.status["observedValue"] = spec.get("value")
    patch.status["observedMessage"] = spec.get("message")
    patch.status["observedGeneration"] = meta.get("generation")


@kopf.on.create(GROUP, VERSION, PLURAL)
def created(spec, meta, patch, **_):
    CALLS["create"] += 1
    observe(spec, meta, patch)


@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
def updated(spec, meta, patch, **_):
    CALLS["update"] += 1
    observe(spec, meta, patch)


@kopf.on.resume(GROUP, VERSION, PLURAL)
def resumed(spec, meta, patch, status, **_):
    CALLS["resume"] += 1
    if (status or {}).get("observedGeneration") != meta.get("generation"):
        observe(spec, meta, patch)


@kopf.on.delete(GROUP, VERSION, PLURAL)
def deleted(name, namespace, logger, **_):
    CALLS["delete"] += 1
    logger.debug(f"cleaning up {namespace}/{name}")
