"""`asya status`'s pure part: which queues are whose, the rows of each source, and why."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import msgspec
import pytest

from asya.status import (
    ActorActivity,
    Kind,
    QueueCounts,
    Report,
    Row,
    ServeStatus,
    Source,
    actor_of_queue,
    encode_report,
    format_table,
    management_url_of,
    rows_from_cluster,
    rows_from_queues,
    rows_from_serve,
    secret_value,
    stranded_notes,
    vhost_of,
    without_credentials,
)

TAKEN_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        ("asya.demo.score", ("score", False)),
        ("asya.demo.detect-language", ("detect-language", False)),
        ("asya.demo.score.retry-500ms", ("score", True)),
        ("asya-demo.parking", None),
        ("asya-demo.results", None),
        ("asya-demo.reply.abc123", None),
        ("asya.other.score", None),
        ("unrelated", None),
    ],
    ids=[
        "actor",
        "dashed-actor",
        "delay-queue",
        "parking",
        "records",
        "reply",
        "other-ns",
        "other",
    ],
)
def test_a_queue_name_tells_its_actor_and_whether_it_is_a_delay_queue(queue, expected):
    assert actor_of_queue("demo", queue) == expected


@pytest.mark.parametrize(
    ("amqp", "management", "vhost"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/", "http://guest:guest@127.0.0.1:15672/", "/"),
        ("amqp://u:p@rabbit:5672/prod", "http://u:p@rabbit:15672/prod", "prod"),
        ("amqp://rabbit", "http://rabbit:15672/", "/"),
    ],
    ids=["default-vhost", "named-vhost", "no-credentials"],
)
def test_the_management_url_is_the_brokers_host_on_port_15672_with_its_vhost(
    amqp, management, vhost
):
    assert management_url_of(amqp) == management
    assert vhost_of(management) == vhost


def test_credentials_never_reach_what_is_shown():
    assert without_credentials("http://guest:secret@h:15672/") == "http://guest:***@h:15672/"


def test_broker_rows_are_one_per_actor_with_retries_summed_and_why_when_no_one_consumes():
    queues = {
        "asya.demo.score": QueueCounts(ready=3, unacked=0, consumers=0),
        "asya.demo.score.retry-500ms": QueueCounts(ready=1, unacked=0, consumers=0),
        "asya.demo.score.retry-1000ms": QueueCounts(ready=2, unacked=0, consumers=0),
        "asya.demo.normalize": QueueCounts(ready=0, unacked=2, consumers=1),
        "asya.demo.happy-end": QueueCounts(ready=0, unacked=0, consumers=0),
        "asya-demo.parking": QueueCounts(ready=9, unacked=0, consumers=0),
    }

    rows = rows_from_queues("demo", queues)

    assert [(r.name, r.queued, r.unacked, r.retrying, r.consumers, r.why) for r in rows] == [
        ("happy-end", 0, 0, 0, 0, "idle: no consumer"),
        ("normalize", 0, 2, 0, 1, ""),
        ("score", 3, 0, 3, 0, "no consumer: 3 waiting"),
    ]


def test_serve_rows_show_workers_in_flight_and_counts_and_an_idle_actor_scaled_to_zero():
    status = ServeStatus(
        state="running",
        actors=[
            ActorActivity(name="a", workers=2, queued=5, in_flight=2, processed=7, failed=1),
            ActorActivity(name="b", workers=0, queued=0, in_flight=0, processed=0, failed=0),
            ActorActivity(name="c", workers=0, queued=4, in_flight=0, processed=0, failed=0),
        ],
        finals_succeeded=6,
        finals_failed=1,
    )

    rows = rows_from_serve(status)

    assert rows == [
        Row(name="a", queued=5, in_flight=2, desired=2, ready=2, processed=7, failed=1),
        Row(
            name="b",
            queued=0,
            in_flight=0,
            desired=0,
            ready=0,
            processed=0,
            failed=0,
            why="scaled to zero: queue idle",
        ),
        Row(
            name="c",
            queued=4,
            in_flight=0,
            desired=0,
            ready=0,
            processed=0,
            failed=0,
            why="scaling up: 4 queued, no worker yet",
        ),
    ]


def test_a_draining_service_says_so_on_every_row():
    status = ServeStatus(
        state="draining",
        actors=[ActorActivity(name="a", workers=1, queued=0, in_flight=1, processed=0, failed=0)],
        finals_succeeded=0,
        finals_failed=0,
    )

    assert [r.why for r in rows_from_serve(status)] == ["service draining"]


def async_actor(name, *, replicas=None, pool=None, priority=0, status=None, secret=None):
    spec = {"image": "img", "handler": "m:f", "priority": priority}
    if replicas is not None:
        spec["replicas"] = replicas
    if pool is not None:
        spec["pool"] = pool
    if secret is not None:
        spec["broker"] = {"secretName": secret}
    body = {"metadata": {"name": name, "namespace": "team"}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


def condition(kind, status, message, reason="R"):
    return {"type": kind, "status": status, "reason": reason, "message": message}


def actor_status(replicas, ready, *conditions, admitted=None, selector=None):
    status = {"replicas": replicas, "readyReplicas": ready, "conditions": list(conditions)}
    if admitted is not None:
        status["admittedReplicas"] = admitted
    if selector is not None:
        status["selector"] = selector
    return status


NO_GPUS = (
    "ResourceFlavor h100: its 2 Ready nodes advertise no allocatable nvidia.com/gpu"
    " (is the device plugin running?)"
)
READY = condition("Ready", "True", "2 of 2 replicas ready")
NOT_DEGRADED = condition("Degraded", "False", "nothing missing")
STABLE = condition("Scaling", "False", "2 replicas, as wanted")


def crash_looping_pod(labels):
    return {
        "metadata": {"name": "score-7d9-x", "namespace": "team", "labels": labels},
        "status": {
            "containerStatuses": [
                {
                    "name": "runtime",
                    "restartCount": 5,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off 2m40s restarting failed container",
                        }
                    },
                }
            ]
        },
    }


@pytest.mark.parametrize(
    ("actor", "pods", "queued", "why"),
    [
        (
            async_actor("a", replicas=2, status=actor_status(2, 2, READY, STABLE, NOT_DEGRADED)),
            [],
            0,
            "",
        ),
        (
            async_actor(
                "a",
                replicas=1,
                status=actor_status(
                    0,
                    0,
                    condition(
                        "Degraded",
                        "True",
                        "Secret team/asya-broker not found: create it with keys amqp-url and"
                        " management-url",
                    ),
                ),
            ),
            [],
            3,
            "Secret team/asya-broker not found: create it with keys amqp-url and management-url",
        ),
        (
            async_actor(
                "a",
                replicas=1,
                status=actor_status(
                    1,
                    0,
                    condition("Ready", "False", "0 of 1 replicas ready"),
                    NOT_DEGRADED,
                    selector="app=a,asya.sh/actor=a",
                ),
            ),
            [crash_looping_pod({"app": "a", "asya.sh/actor": "a", "pod-template-hash": "7d9"})],
            3,
            "container runtime of pod score-7d9-x: CrashLoopBackOff (5 restarts): back-off 2m40s"
            " restarting failed container",
        ),
        (
            async_actor(
                "a",
                replicas=3,
                pool="gpus",
                status=actor_status(
                    1,
                    1,
                    condition("Ready", "True", "1 of 1 replicas ready"),
                    NOT_DEGRADED,
                    condition(
                        "Admitted", "False", "1 of 3 replicas admitted: pool gpus has no a100 left"
                    ),
                    admitted=1,
                ),
            ),
            [],
            8,
            "waiting for quota: 1 of 3 replicas admitted: pool gpus has no a100 left",
        ),
        (
            async_actor(
                "a",
                replicas=1,
                pool="gpus",
                status=actor_status(
                    0,
                    0,
                    NOT_DEGRADED,
                    condition("Preempted", "True", "replicas preempted by team/urgent: pending"),
                    admitted=0,
                ),
            ),
            [],
            2,
            "replicas preempted by team/urgent: pending",
        ),
        (
            async_actor(
                "a",
                replicas=0,
                status=actor_status(0, 0, condition("Ready", "True", "idle"), NOT_DEGRADED),
            ),
            [],
            0,
            "scaled to zero: queue idle",
        ),
        (
            async_actor(
                "a",
                replicas=0,
                status=actor_status(0, 0, condition("Ready", "True", "idle"), NOT_DEGRADED),
            ),
            [],
            4,
            "scaled to zero: 4 queued, waiting for the scaler",
        ),
        (async_actor("a", replicas=1), [], 0, "not reconciled yet: no status from the operator"),
        (
            async_actor(
                "a",
                replicas=3,
                pool="gpus",
                status=actor_status(
                    2,
                    0,
                    condition("Ready", "False", "0 of 2 replicas ready"),
                    NOT_DEGRADED,
                    condition("Admitted", "False", "2 of 3 replicas admitted, 1 waiting"),
                    condition("AcceleratorsUnavailable", "True", NO_GPUS),
                    admitted=2,
                ),
            ),
            [],
            5,
            NO_GPUS,
        ),
    ],
    ids=[
        "as-wanted",
        "missing-secret",
        "crash-loop",
        "waiting-for-quota",
        "preempted",
        "scaled-to-zero",
        "queued-at-zero",
        "no-status",
        "no-allocatable-gpus",
    ],
)
def test_a_cluster_row_says_why_its_numbers_differ(actor, pods, queued, why):
    queues = {"team": {"asya.team.a": QueueCounts(ready=queued, unacked=0, consumers=0)}}

    [row] = rows_from_cluster([actor], [], pods, queues)

    assert row.why == why


def test_a_cluster_row_joins_its_queue_and_shows_pool_priority_and_admitted():
    actor = async_actor(
        "score",
        replicas=3,
        pool="gpus",
        priority=10,
        status=actor_status(2, 1, READY, NOT_DEGRADED, admitted=2),
    )
    queues = {"team": {"asya.team.score": QueueCounts(ready=7, unacked=2, consumers=2)}}

    [row] = rows_from_cluster([actor], [], [], queues)

    assert (row.queued, row.unacked, row.desired, row.admitted, row.ready) == (7, 2, 3, 2, 1)
    assert (row.pool, row.priority) == ("gpus", 10)


def test_an_actor_without_readable_queues_shows_them_unknown():
    actor = async_actor("score", replicas=1, status=actor_status(1, 1, READY, NOT_DEGRADED))

    [row] = rows_from_cluster([actor], [], [], {})

    assert (row.queued, row.unacked) == (None, None)


def test_an_actor_group_is_a_row_of_instances_with_its_entry_queue_and_why_it_waits():
    group = {
        "metadata": {"name": "rag", "namespace": "team"},
        "spec": {
            "members": [{"name": "retrieve"}, {"name": "generate"}],
            "replicas": 2,
            "pool": "gpus",
            "priority": 5,
        },
        "status": {
            "desired": 2,
            "admitted": 1,
            "ready": 1,
            "conditions": [
                {"type": "Admitted", "status": "False", "message": "1 of 2 instances admitted"},
                {"type": "PodsReady", "status": "True", "message": "1 admitted instances ready"},
                {"type": "Degraded", "status": "False", "message": "nothing missing"},
            ],
        },
    }
    queues = {"team": {"asya.team.rag-retrieve": QueueCounts(ready=7, unacked=2, consumers=3)}}

    [row] = rows_from_cluster([], [group], [], queues)

    assert row == Row(
        namespace="team",
        name="rag",
        kind=Kind.GROUP,
        queued=7,
        unacked=2,
        consumers=3,
        desired=2,
        admitted=1,
        ready=1,
        pool="gpus",
        priority=5,
        why="waiting for quota: 1 of 2 instances admitted",
    )


def test_an_actor_group_says_first_that_it_was_preempted_or_evicted():
    conditions = [
        {"type": "Admitted", "status": "False", "message": "0 of 1 instances admitted"},
        {"type": "Evicted", "status": "True", "message": "instance 0 evicted whole"},
        {"type": "Preempted", "status": "True", "message": "instance 0 preempted whole by x"},
    ]
    group = {"metadata": {"name": "rag", "namespace": "team"}, "spec": {}, "status": {}}
    group["status"]["conditions"] = conditions

    [preempted] = rows_from_cluster([], [group], [], {})
    group["status"]["conditions"] = conditions[:2]
    [evicted] = rows_from_cluster([], [group], [], {})

    assert preempted.why == "instance 0 preempted whole by x"
    assert evicted.why == "instance 0 evicted whole"


def test_a_secret_value_is_decoded_from_base64_and_absent_keys_are_none():
    secret = {"data": {"management-url": base64.b64encode(b"http://u:p@h:15672/").decode()}}

    assert secret_value(secret, "management-url") == "http://u:p@h:15672/"
    assert secret_value(secret, "amqp-url") is None


def test_the_table_shows_only_columns_some_row_knows_and_notes_below():
    report = Report(
        source=Source.BROKER,
        origin="amqp://guest:***@h:5672/ namespace demo",
        taken_at=TAKEN_AT,
        rows=[
            Row(namespace="demo", name="normalize", queued=12, why="no consumer: 12 waiting"),
            Row(namespace="demo", name="score", queued=0),
        ],
        notes=["management API not reachable"],
    )

    assert format_table(report) == (
        "NAME       QUEUED  WHY\n"
        "normalize  12      no consumer: 12 waiting\n"
        "score      0\n"
        "note: management API not reachable\n"
    )


def test_the_table_names_namespaces_and_groups_when_it_spans_several():
    report = Report(
        source=Source.KUBERNETES,
        origin="context c, all namespaces",
        taken_at=TAKEN_AT,
        rows=[
            Row(namespace="a", name="score", desired=1, ready=None),
            Row(namespace="b", name="rag", kind=Kind.GROUP, desired=2, why="not run yet"),
        ],
    )

    assert format_table(report) == (
        "NAMESPACE  NAME         DESIRED  WHY\n"
        "a          score        1\n"
        "b          rag (group)  2        not run yet\n"
    )


def test_the_json_report_round_trips_and_carries_its_schema_version():
    report = Report(
        source=Source.SERVE,
        origin="http://127.0.0.1:8081 (running)",
        taken_at=TAKEN_AT,
        rows=[Row(name="a", queued=1, in_flight=0, desired=1, ready=1, processed=3, failed=0)],
    )

    encoded = encode_report(report)

    assert msgspec.json.decode(encoded)["version"] == 1
    assert msgspec.json.decode(encoded, type=Report) == report


def test_an_actor_group_whose_flavors_nodes_advertise_no_gpu_says_so_before_quota():
    conditions = [
        {"type": "Admitted", "status": "False", "message": "1 of 2 instances admitted"},
        {"type": "PodsReady", "status": "False", "message": "instances 0 not ready yet"},
        {"type": "AcceleratorsUnavailable", "status": "True", "message": f"instance 0: {NO_GPUS}"},
    ]
    group = {"metadata": {"name": "rag", "namespace": "team"}, "spec": {}, "status": {}}
    group["status"]["conditions"] = conditions

    [row] = rows_from_cluster([], [group], [], {})

    assert row.why == f"instance 0: {NO_GPUS}"


def test_a_queue_of_the_old_names_that_holds_messages_is_named_with_what_moves_it():
    queues = {
        "asya-demo-score": QueueCounts(ready=3, unacked=1, consumers=0),
        "asya-demo-score-retry-1000ms": QueueCounts(ready=2, unacked=0, consumers=0),
        "asya-demo-empty": QueueCounts(ready=0, unacked=0, consumers=0),
        "asya-demo.parking": QueueCounts(ready=9, unacked=0, consumers=0),
        "asya-demo.reply.0123456789abcdef0123456789abcdef": QueueCounts(ready=1),
        "asya-other-score": QueueCounts(ready=5, unacked=0, consumers=0),
        "asya.demo.score": QueueCounts(ready=4, unacked=0, consumers=0),
    }

    notes = stranded_notes("demo", queues)

    assert notes == [
        "queue asya-demo-score, of the old names, holds 4 message(s) that no actor of today's"
        " names reads: move them with asya migrate-queues --namespace demo",
        "queue asya-demo-score-retry-1000ms, of the old names, holds 2 message(s) that no actor"
        " of today's names reads: move them with asya migrate-queues --namespace demo",
    ]
