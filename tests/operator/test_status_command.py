"""`asya status --kubernetes` against the stand-in API server: AsyncActors with their status,
an ActorGroup, pods, and the broker Secret's management URL joined for queue depths."""

from __future__ import annotations

import asyncio
import base64

import kubernetes

from asya.cli import _parser
from asya.cli.status import source_of
from asya.settings import load_settings
from asya.status import Kind, Source, management_url_of

GROUP, VERSION = "asya.sh", "v1alpha1"


def own_notes(report) -> list[str]:
    """The report's notes but the one saying the suite's broker user reaches other tests'
    namespaces (it does: one user for all; tests/integration/tenancy covers that note)."""
    return [n for n in report.notes if "reaches more than" not in n]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def actor_body(name, *, replicas, status, pool=None, priority=0):
    spec = {"image": "img", "handler": "m:f", "replicas": replicas, "priority": priority}
    if pool is not None:
        spec["pool"] = pool
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AsyncActor",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


async def create(kube, namespace, plural, body):
    custom = kubernetes.client.CustomObjectsApi(kube)
    await asyncio.to_thread(
        custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
    )


async def status_of(kube, *argv):
    args = _parser().parse_args(["status", "--kubernetes", *argv])
    return await source_of(args, load_settings({}))()


async def test_actors_and_groups_of_a_namespace_are_rows_with_their_queues_and_why(
    kube, amqp_url, namespace, actor_names, transport
):
    actor_names.add("score")
    await transport.declare("score")
    await transport.publish("score", b"waiting")
    management = management_url_of(amqp_url)
    core = kubernetes.client.CoreV1Api(kube)
    await asyncio.to_thread(
        core.create_namespaced_secret,
        namespace,
        {"metadata": {"name": "asya-broker"}, "data": {"management-url": _b64(management)}},
    )
    await create(
        kube,
        namespace,
        "asyncactors",
        actor_body(
            "score",
            replicas=2,
            pool="gpus",
            priority=10,
            status={
                "replicas": 1,
                "readyReplicas": 1,
                "admittedReplicas": 1,
                "conditions": [
                    {"type": "Ready", "status": "True", "message": "1 of 1 replicas ready"},
                    {"type": "Degraded", "status": "False", "message": "nothing missing"},
                    {
                        "type": "Admitted",
                        "status": "False",
                        "message": "1 of 2 replicas admitted: no quota left in pool gpus",
                    },
                ],
            },
        ),
    )
    await create(
        kube,
        namespace,
        "actorgroups",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ActorGroup",
            "metadata": {"name": "rag"},
            "spec": {"members": [{"name": "retrieve"}, {"name": "generate"}], "pool": "gpus"},
        },
    )

    report = await status_of(kube, "--namespace", namespace)

    assert report.source is Source.KUBERNETES
    assert own_notes(report) == []
    score, rag = report.rows
    assert (score.name, score.desired, score.admitted, score.ready, score.pool, score.priority) == (
        "score",
        2,
        1,
        1,
        "gpus",
        10,
    )
    # The management API's counts trail the broker by seconds: the queue is there, joined.
    assert score.queued is not None
    assert score.why == "waiting for quota: 1 of 2 replicas admitted: no quota left in pool gpus"
    assert (rag.name, rag.kind, rag.pool) == ("rag", Kind.GROUP, "gpus")
    assert rag.why == "not reconciled yet: no status from the operator"  # no operator runs here


async def test_a_missing_broker_secret_leaves_depths_unknown_and_a_note_names_it(
    kube, amqp_url, namespace
):
    await create(
        kube,
        namespace,
        "asyncactors",
        actor_body(
            "lonely",
            replicas=1,
            status={
                "replicas": 0,
                "readyReplicas": 0,
                "conditions": [
                    {
                        "type": "Degraded",
                        "status": "True",
                        "message": f"Secret {namespace}/asya-broker not found: create it",
                    }
                ],
            },
        ),
    )

    report = await status_of(kube, "--namespace", namespace)

    [row] = report.rows
    assert (row.queued, row.why) == (None, f"Secret {namespace}/asya-broker not found: create it")
    [note] = own_notes(report)
    assert note.startswith(f"namespace {namespace}: queue depths unknown: Secret")
    assert f"{namespace}/asya-broker not readable (404" in note


async def test_dash_n_names_the_namespace_as_kubectl_does(kube, amqp_url, namespace):
    await create(kube, namespace, "asyncactors", actor_body("lonely", replicas=1, status={}))

    report = await status_of(kube, "-n", namespace)

    assert report.origin.endswith(f", namespace {namespace}")
    assert [(row.namespace, row.name) for row in report.rows] == [(namespace, "lonely")]
