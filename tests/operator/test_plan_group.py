"""plan_group: an ActorGroup's objects, a headless Service and a StatefulSet per member for each
running instance, and its KEDA objects when it scales; each valid as Kubernetes (and KEDA) take
it, and each pod told its place in the gang."""

from __future__ import annotations

import kubernetes_validate
import msgspec
import pytest
from asya_operator.api.group import ActorGroup
from asya_operator.config import OperatorConfig
from asya_operator.plans.group_objects import plan_group

from asya.gang import membership
from tests.operator.admission_crs import GROUP, changed, member
from tests.operator.cr_validation import schema_errors
from tests.operator.plan_builders import KEDA_CRD_FILES, keda_schema, resource_flavor

CONFIG = OperatorConfig(sidecar_image="registry.example.com/asya-sidecar:9.9")
KUBERNETES_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]
TWO_MEMBERS = changed(
    GROUP,
    metadata__uid="6f1c1c9e-0000-4000-8000-0000000000aa",
    spec__members=[
        member(name="coordinator", replicas=1),
        member(name="worker", replicas=3),
    ],
)


def group(body=TWO_MEMBERS) -> ActorGroup:
    return msgspec.convert(body, ActorGroup)


def objects(body=TWO_MEMBERS, running=None, flavors=None):
    running = (
        running if running is not None else {0: {"coordinator": ("h100", 1), "worker": ("h100", 3)}}
    )
    flavors = (
        flavors
        if flavors is not None
        else {"h100": resource_flavor("h100", nodeLabels={"gpu": "h100"})}
    )
    return plan_group(group(body), "ml-b", running, flavors, CONFIG)


def by_name(planned):
    return {(o["kind"], o["metadata"]["name"]): o for o in planned}


def env(statefulset, container="runtime"):
    (found,) = [
        c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == container
    ]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in found["env"]}


def test_each_running_instance_has_a_headless_service_and_a_statefulset_per_member():
    planned = objects(
        running={
            0: {"coordinator": ("h100", 1), "worker": ("h100", 3)},
            2: {"coordinator": ("h100", 1), "worker": ("h100", 2)},
        }
    )

    assert [(o["kind"], o["metadata"]["name"]) for o in planned] == [
        ("Service", "ddp-0"),
        ("StatefulSet", "ddp-coordinator-0"),
        ("StatefulSet", "ddp-worker-0"),
        ("Service", "ddp-2"),
        ("StatefulSet", "ddp-coordinator-2"),
        ("StatefulSet", "ddp-worker-2"),
    ]
    workers = by_name(planned)["StatefulSet", "ddp-worker-2"]
    assert workers["spec"]["replicas"] == 2
    assert workers["spec"]["serviceName"] == "ddp-2"
    assert workers["spec"]["podManagementPolicy"] == "Parallel"
    service = by_name(planned)["Service", "ddp-2"]
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {
        "app.kubernetes.io/component": "actor-group",
        "asya.sh/group": "ddp",
        "asya.sh/instance": "2",
    }


def test_each_pod_learns_its_group_instance_member_rank_and_size_and_where_rank_0_is():
    planned = by_name(objects())
    coordinator = env(planned["StatefulSet", "ddp-coordinator-0"])
    worker = env(planned["StatefulSet", "ddp-worker-0"])

    assert coordinator["ASYA_GROUP_RANK_OFFSET"] == "0"
    assert worker["ASYA_GROUP_RANK_OFFSET"] == "1"
    assert worker["ASYA_GROUP_SIZE"] == coordinator["ASYA_GROUP_SIZE"] == "4"
    assert worker["ASYA_GROUP_LEADER"] == "ddp-coordinator-0-0.ddp-0.ml-b.svc"
    assert worker["ASYA_GROUP_MEMBER_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    # As the kubelet resolves it for the third worker pod (index 2): rank 3 of 4.
    resolved = {k: v for k, v in worker.items() if isinstance(v, str)} | {
        "ASYA_GROUP_MEMBER_INDEX": "2"
    }
    me = membership(resolved)
    assert me is not None
    assert (me.group, me.instance, me.member, me.index, me.rank, me.size) == (
        "ddp",
        0,
        "worker",
        2,
        3,
        4,
    )


def test_a_member_is_an_actor_named_group_dash_member_served_by_its_sidecar():
    worker = by_name(objects())["StatefulSet", "ddp-worker-0"]

    sidecar = env(worker, "sidecar")
    assert sidecar["ASYA_ACTOR"] == "ddp-worker"
    assert sidecar["ASYA_BROKER_URL"] == {
        "secretKeyRef": {"name": "asya-broker", "key": "amqp-url"}
    }
    runtime = env(worker)
    assert runtime["ASYA_HANDLER"] == "ml.ddp:worker"
    assert not any("BROKER" in name for name in runtime)
    assert worker["spec"]["template"]["metadata"]["labels"]["asya.sh/actor"] == "ddp-worker"


def test_the_pods_are_placed_by_the_flavor_their_quota_was_admitted_in():
    worker = by_name(objects())["StatefulSet", "ddp-worker-0"]

    assert worker["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "h100"}


def test_an_instance_admitted_with_fewer_replicas_runs_and_ranks_those():
    planned = by_name(objects(running={1: {"coordinator": ("h100", 1), "worker": ("h100", 2)}}))

    assert planned["StatefulSet", "ddp-worker-1"]["spec"]["replicas"] == 2
    assert env(planned["StatefulSet", "ddp-worker-1"])["ASYA_GROUP_SIZE"] == "3"


def test_a_flavor_not_looked_up_is_refused():
    with pytest.raises(ValueError, match="h100"):
        objects(flavors={})


def test_objects_are_owned_by_the_group_so_the_garbage_collector_removes_them():
    for obj in objects():
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("ActorGroup", "ddp", True)


def test_only_a_group_that_scales_has_keda_objects_scaling_it_on_its_entry_queue():
    assert not [o for o in objects() if o["kind"] in KEDA_CRD_FILES]

    scaled = changed(TWO_MEMBERS, spec__scaling={"maxReplicas": 4, "queueLength": 20})
    keda = [o for o in objects(scaled, running={}) if o["kind"] in KEDA_CRD_FILES]

    assert [(o["kind"], o["metadata"]["name"]) for o in keda] == [
        ("TriggerAuthentication", "ddp.actorgroup"),
        ("ScaledObject", "ddp.actorgroup"),
    ]
    scaled_object = keda[1]
    assert scaled_object["spec"]["scaleTargetRef"] == {
        "apiVersion": "asya.sh/v1alpha1",
        "kind": "ActorGroup",
        "name": "ddp",
    }
    (trigger,) = scaled_object["spec"]["triggers"]
    assert trigger["metadata"]["queueName"] == "asya.ml-b.ddp-coordinator"
    assert (trigger["metadata"]["value"], scaled_object["spec"]["maxReplicaCount"]) == ("20", 4)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid(version):
    scaled = changed(TWO_MEMBERS, spec__scaling={"maxReplicas": 4})
    for obj in objects(scaled):
        if obj["kind"] in KEDA_CRD_FILES:
            assert schema_errors(obj, keda_schema(obj["kind"])) == [], obj["metadata"]["name"]
        else:
            kubernetes_validate.validate(obj, version, strict=True)


def test_a_members_timeout_reaches_its_runtime_and_its_pods_drain_for_it():
    body = changed(
        GROUP,
        metadata__uid="6f1c1c9e-0000-4000-8000-0000000000aa",
        spec__members=[
            member(name="coordinator", replicas=1),
            member(
                name="worker",
                replicas=3,
                template={**member()["template"], "timeoutSeconds": 900.0},
            ),
        ],
    )

    planned = by_name(objects(body))

    worker = planned["StatefulSet", "ddp-worker-0"]
    coordinator = planned["StatefulSet", "ddp-coordinator-0"]
    assert env(worker)["ASYA_ACTOR_OVERRIDES"] == '{"timeoutSeconds":900.0}'
    assert env(worker)["ASYA_GRACE_S"] == "900"
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 900 + 15
    assert "ASYA_ACTOR_OVERRIDES" not in env(coordinator)
    assert coordinator["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300 + 15
