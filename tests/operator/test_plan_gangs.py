"""An ActorGroup instance handed to a gang scheduler: `asya-operator plan` prints, per instance,
the scheduler's group object, valid against the scheduler's own schema, whose minimum is the
instance's pod count, and member pods that name the scheduler and join the group."""

from __future__ import annotations

import functools
import textwrap
from datetime import UTC, datetime

import kubernetes_validate
import msgspec
import pytest
import yaml
from asya_operator.api.group import ActorGroup, InstanceStatus, MemberAdmission
from asya_operator.api.metadata import TEMPLATE_HASH_LABEL
from asya_operator.cli import main
from asya_operator.config import OperatorConfig, load_operator_config
from asya_operator.kube import MemberPods
from asya_operator.plans.gangs import total_requests, unplaced_reason
from asya_operator.plans.group_objects import plan_group, template_hash
from asya_operator.plans.group_status import plan_group_status
from asya_operator.plans.instances import before_pass, placement
from asya_operator.reconcile.admission import stale_instances

from asya.admission.readiness import GangPhase
from asya.settings import SettingsError
from tests.operator.cr_validation import openapi_schema, schema_errors, unknown_fields
from tests.operator.plan_builders import SCHEMAS

KUBERNETES_1_37 = "1.37.0"
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
MEMBERS = [MemberAdmission(name="worker", flavor="h100", replicas=3)]
GANG_CRD_FILES = {
    "scheduling.volcano.sh/v1beta1": "scheduling.volcano.sh_podgroups.yaml",
    "scheduling.run.ai/v2alpha2": "scheduling.run.ai_podgroups.yaml",
}
GROUP_YAML = """\
apiVersion: asya.sh/v1alpha1
kind: ActorGroup
metadata:
  name: ddp
spec:
  replicas: 2
  {scheduling}
  members:
    - name: leader
      replicas: 1
      template:
        image: registry.example.com/ml/ddp:1
        handler: ml.ddp:leader
        resources: {{cpu: "2", memory: 4Gi}}
    - name: worker
      replicas: 3
      template:
        image: registry.example.com/ml/ddp:1
        handler: ml.ddp:worker
        resources: {{gpus: 1, cpu: "8", memory: 16Gi}}
"""


@functools.cache
def gang_schema(api_version: str) -> dict:
    path = SCHEMAS / GANG_CRD_FILES[api_version]
    return openapi_schema_of(path.read_text(encoding="utf-8"), api_version.split("/")[1])


def openapi_schema_of(text: str, version: str) -> dict:
    crd = yaml.safe_load(text)
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return openapi_schema(crd)


def plan(capsys, tmp_path, scheduling: str, *args: str) -> list[dict]:
    path = tmp_path / "group.yaml"
    path.write_text(GROUP_YAML.format(scheduling=scheduling), encoding="utf-8")
    code = main(["plan", str(path), *args])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return list(yaml.safe_load_all(out))


def of_kind(planned: list[dict], kind: str) -> list[dict]:
    return [o for o in planned if o["kind"] == kind]


def pod_templates(planned: list[dict], instance: int) -> list[dict]:
    return [
        s["spec"]["template"]
        for s in of_kind(planned, "StatefulSet")
        if s["metadata"]["labels"]["asya.sh/instance"] == str(instance)
    ]


@pytest.mark.parametrize(
    ("scheduler", "api_version", "pod_scheduler"),
    [
        ("volcano", "scheduling.volcano.sh/v1beta1", "volcano"),
        ("kai", "scheduling.run.ai/v2alpha2", "kai-scheduler"),
        ("kubernetes", "scheduling.k8s.io/v1beta1", None),
    ],
)
def test_each_instance_gets_one_group_object_holding_all_its_pods(
    capsys, tmp_path, scheduler, api_version, pod_scheduler
):
    planned = plan(capsys, tmp_path, f"scheduling: {{gangScheduler: {scheduler}}}")

    groups = of_kind(planned, "PodGroup")
    assert [(g["apiVersion"], g["metadata"]["name"]) for g in groups] == [
        (api_version, "ddp-0"),
        (api_version, "ddp-1"),
    ]
    for instance, pod_group in enumerate(groups):
        assert pod_group["metadata"]["namespace"] == "default"
        assert pod_group["metadata"]["labels"]["asya.sh/instance"] == str(instance)
        spec = pod_group["spec"]
        minimum = (
            spec["schedulingPolicy"]["gang"]["minCount"]
            if scheduler == "kubernetes"
            else (spec["minMember"])
        )
        assert minimum == 4  # 1 leader + 3 workers: the instance's pod count
        for template in pod_templates(planned, instance):
            assert template["spec"].get("schedulerName") == pod_scheduler
            if scheduler == "volcano":
                assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == (
                    f"ddp-{instance}"
                )
            elif scheduler == "kai":
                assert template["metadata"]["annotations"]["pod-group-name"] == f"ddp-{instance}"
                assert template["metadata"]["annotations"]["kai.scheduler/skip-podgrouper"] == (
                    "true"
                )
                assert template["metadata"]["labels"]["kai.scheduler/queue"] == "default-queue"
            else:
                assert template["spec"]["schedulingGroup"] == {"podGroupName": f"ddp-{instance}"}
        # The group object goes in before the pods that need it.
        names = [(o["kind"], o["metadata"]["name"]) for o in planned]
        assert names.index(("PodGroup", f"ddp-{instance}")) < names.index(
            ("StatefulSet", f"ddp-leader-{instance}")
        )


@pytest.mark.parametrize("scheduler", ["volcano", "kai"])
def test_the_group_objects_are_valid_against_the_schedulers_crds(capsys, tmp_path, scheduler):
    planned = plan(capsys, tmp_path, f"scheduling: {{gangScheduler: {scheduler}, queue: ml-b}}")

    for pod_group in of_kind(planned, "PodGroup"):
        schema = gang_schema(pod_group["apiVersion"])
        assert schema_errors(pod_group, schema) == []
        assert unknown_fields(pod_group, schema) == []
        assert pod_group["spec"]["queue"] == "ml-b"


def test_the_kubernetes_pod_group_and_the_pods_joining_it_are_valid_kubernetes_1_37(
    capsys, tmp_path
):
    planned = plan(capsys, tmp_path, "scheduling: {gangScheduler: kubernetes}")

    for obj in [*of_kind(planned, "PodGroup"), *of_kind(planned, "StatefulSet")]:
        kubernetes_validate.validate(obj, KUBERNETES_1_37, strict=True)


def test_a_schema_check_catches_a_field_the_scheduler_does_not_have():
    # The check above can fail: a misspelt field is named.
    schema = gang_schema("scheduling.volcano.sh/v1beta1")
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {}}
    body["spec"] = {"minMembers": 4}

    assert unknown_fields(body, schema) == ["spec.minMembers"]


def test_volcano_gets_the_instances_total_requests_as_its_minimum_resources(capsys, tmp_path):
    planned = plan(capsys, tmp_path, "scheduling: {gangScheduler: volcano}")

    pod_group = of_kind(planned, "PodGroup")[0]
    resources = pod_group["spec"]["minResources"]
    # Every container of the 4 pods, sidecars included (what the scheduler counts).
    assert resources == total_requests(
        [s for s in of_kind(planned, "StatefulSet") if s["metadata"]["name"].endswith("-0")]
    )
    assert resources["nvidia.com/gpu"] == "3"
    assert resources["cpu"] == "26200m"  # 2 + 3 x 8, and 4 sidecars' 50m


def test_total_requests_counts_a_resource_given_only_as_a_limit_at_its_limit():
    statefulset = {
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "1Gi"},
                                "limits": {"memory": "2Gi", "nvidia.com/gpu": "1"},
                            }
                        },
                        {"resources": {"requests": {"cpu": "50m"}}},
                        {},
                    ]
                }
            },
        }
    }

    assert total_requests([statefulset]) == {
        "cpu": "1100m",
        "memory": "2Gi",
        "nvidia.com/gpu": "2",
    }


def test_without_a_gang_scheduler_the_pods_are_the_default_schedulers_and_no_group_is_made(
    capsys, tmp_path
):
    planned = plan(capsys, tmp_path, "")

    assert of_kind(planned, "PodGroup") == []
    for template in pod_templates(planned, 0):
        assert "schedulerName" not in template["spec"]
        assert "schedulingGroup" not in template["spec"]
        assert "scheduling.k8s.io/group-name" not in template["metadata"].get("annotations", {})


def test_a_group_naming_no_scheduler_gets_the_operators_default_and_its_own_wins():
    body = yaml.safe_load(GROUP_YAML.format(scheduling=""))
    body["metadata"]["uid"] = "6f1c1c9e-0000-4000-8000-0000000000aa"
    group = msgspec.convert(body, ActorGroup)
    volcano = OperatorConfig(gang_scheduler="volcano")
    running = {0: {"leader": (None, 1), "worker": (None, 3)}}

    by_default = plan_group(group, "ml-b", running, {}, volcano)
    body["spec"]["scheduling"] = {"gangScheduler": "none"}
    own = plan_group(msgspec.convert(body, ActorGroup), "ml-b", running, {}, volcano)

    assert [o["apiVersion"] for o in of_kind(by_default, "PodGroup")] == [
        "scheduling.volcano.sh/v1beta1"
    ]
    assert of_kind(own, "PodGroup") == []
    # Owned by the group as its Service and StatefulSets are: it goes when the group goes.
    [pod_group] = of_kind(by_default, "PodGroup")
    [owner] = pod_group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("ActorGroup", "ddp", True)


def test_an_admitted_instance_smaller_than_asked_gets_its_admitted_count_as_minimum():
    body = yaml.safe_load(GROUP_YAML.format(scheduling="scheduling: {gangScheduler: kai}"))
    group = msgspec.convert(body, ActorGroup)

    planned = plan_group(group, "ml-b", {0: {"leader": (None, 1), "worker": (None, 2)}}, {}, CFG)

    assert of_kind(planned, "PodGroup")[0]["spec"]["minMember"] == 3


def test_a_scheduler_named_otherwise_is_what_the_pods_name(capsys, tmp_path):
    planned = plan(
        capsys, tmp_path, "scheduling: {gangScheduler: volcano, schedulerName: volcano-gpu}"
    )

    assert {t["spec"]["schedulerName"] for t in pod_templates(planned, 1)} == {"volcano-gpu"}


@pytest.mark.parametrize(
    ("scheduling", "words"),
    [
        (
            "scheduling: {gangScheduler: kubernetes, queue: ml-b}",
            "scheduling.queue names a Volcano or KAI queue",
        ),
        (
            "scheduling: {gangScheduler: none, schedulerName: volcano}",
            "scheduling.schedulerName is for a gang scheduler",
        ),
        ("scheduling: {gangScheduler: slurm}", "spec.scheduling.gangScheduler"),
    ],
)
def test_plan_refuses_a_scheduling_that_cannot_work(capsys, tmp_path, scheduling, words):
    path = tmp_path / "group.yaml"
    path.write_text(textwrap.dedent(GROUP_YAML.format(scheduling=scheduling)), encoding="utf-8")

    code = main(["plan", str(path)])
    _out, err = capsys.readouterr()

    assert code == 2
    assert words in err


CFG = OperatorConfig()


@pytest.mark.parametrize(
    ("scheduler", "status", "said"),
    [
        (
            "volcano",
            {"conditions": [{"type": "Unschedulable", "status": "True", "message": "3/3 pending"}]},
            "volcano cannot place it whole: 3/3 pending",
        ),
        (
            "volcano",
            {"conditions": [{"type": "Unschedulable", "status": "False", "message": "old"}]},
            None,
        ),
        ("volcano", {"phase": "Running", "conditions": [{"type": "Scheduled"}]}, None),
        (
            # Placed: Volcano leaves Unschedulable True, adds Scheduled and runs it.
            "volcano",
            {
                "phase": "Running",
                "conditions": [
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "message": "3/3 pending",
                        "lastTransitionTime": "2026-11-26T10:00:00Z",
                    },
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-11-26T10:05:00Z",
                    },
                ],
            },
            None,
        ),
        (
            # Placed once, then not again (its pods evicted and pending): the newer one counts.
            "volcano",
            {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-11-26T10:05:00Z",
                    },
                    {
                        "type": "Unschedulable",
                        "status": "True",
                        "message": "1/3 pending",
                        "lastTransitionTime": "2026-11-26T10:09:00Z",
                    },
                ],
            },
            "volcano cannot place it whole: 1/3 pending",
        ),
        (
            "kai",
            {
                "phase": "Pending",
                "schedulingConditions": [
                    {
                        "reason": "",
                        "message": "",
                        "reasons": [{"reason": "OverLimit", "message": "queue team-a over limit"}],
                    }
                ],
            },
            "kai cannot place it whole: queue team-a over limit",
        ),
        (
            "kubernetes",
            {
                "conditions": [
                    {
                        "type": "PodGroupInitiallyScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/8 nodes fit the gang",
                    }
                ]
            },
            "kubernetes cannot place it whole: 0/8 nodes fit the gang",
        ),
        (
            "kubernetes",
            {"conditions": [{"type": "PodGroupInitiallyScheduled", "status": "True"}]},
            None,
        ),
        (
            "kai",
            {
                "phase": "Pending",
                "schedulingConditions": [
                    {"reason": "OverLimit", "message": "old"},
                    {"reason": "NotEnoughResources", "message": "queue team-a: 2 GPUs short"},
                ],
            },
            "kai cannot place it whole: queue team-a: 2 GPUs short",
        ),
        ("kai", {"phase": "Running", "schedulingConditions": [{"message": "was short"}]}, None),
        ("kai", {}, None),
    ],
)
def test_what_each_scheduler_says_of_a_gang_it_cannot_place(scheduler, status, said):
    assert unplaced_reason(scheduler, {"status": status}) == said


def test_an_instance_waiting_for_its_pods_carries_the_schedulers_words_until_it_says_none():
    waiting = InstanceStatus(instance=0, phase=GangPhase.WAITING_FOR_READY, members=MEMBERS)
    queued = InstanceStatus(instance=1, message="insufficient quota for nvidia.com/gpu")
    said = "volcano cannot place it whole: 3/3 pending"

    placed = placement({0: waiting, 1: queued}, {0: said, 1: "not for a queued one"})
    cleared = placement(placed, {})

    assert (placed[0].message, placed[1].message) == (said, queued.message)
    assert (cleared[0].message, cleared[1].message) == (None, queued.message)


def test_a_gang_not_placed_is_why_the_group_is_not_ready():
    said = "volcano cannot place it whole: 3/3 pending"
    states = {
        0: InstanceStatus(
            instance=0, phase=GangPhase.WAITING_FOR_READY, members=MEMBERS, message=said
        )
    }
    body = yaml.safe_load(GROUP_YAML.format(scheduling="pool: team-b"))
    body["spec"]["replicas"] = 1
    group = msgspec.convert(body, ActorGroup)

    status = plan_group_status(group, states, {}, [], now=NOW).document()

    found = {c["type"]: (c["reason"], c["message"]) for c in status["conditions"]}
    assert found["PodsReady"] == (
        "GangNotPlaced",
        f"instances 0 not ready yet; instance 0: {said} (each evicted whole if not ready 300 s"
        " after its admission)",
    )
    assert found["Ready"] == found["PodsReady"]


def test_an_instance_evicted_for_not_getting_ready_says_what_its_scheduler_said():
    body = yaml.safe_load(GROUP_YAML.format(scheduling="pool: team-b"))
    body["spec"]["replicas"] = 1
    body["spec"]["readinessTimeoutSeconds"] = 60
    body["status"] = {
        "instances": [
            {
                "instance": 0,
                "phase": "WaitingForReady",
                "admittedAt": "2026-11-25T12:00:00.000000Z",
                "members": [{"name": "worker", "flavor": "h100", "replicas": 3}],
            }
        ]
    }
    group = msgspec.convert(body, ActorGroup)
    later = NOW.timestamp() + 61
    said = "volcano cannot place it whole: 3/3 pending"

    states, changes = before_pass(group, {0: False}, later, {0: said})

    assert states[0].phase is GangPhase.BACKING_OFF
    assert f"not every pod ready within 60 s ({said})" in changes[0].message


def test_the_operators_default_gang_scheduler_is_read_from_its_environment():
    config = load_operator_config({"ASYA_OPERATOR_GANG_SCHEDULER": "kai"})

    assert config.gang_scheduler == "kai"
    with pytest.raises(SettingsError, match="expected one of: none, kubernetes, volcano, kai"):
        load_operator_config({"ASYA_OPERATOR_GANG_SCHEDULER": "slurm"})


def test_a_quantity_in_exponent_form_leaves_volcanos_minimum_resources_out_not_the_pass():
    # The CRD takes 1e-1 (a Kubernetes quantity); the summing does not: Volcano then gets no
    # minResources, and the group its objects, rather than the admission pass failing.
    body = yaml.safe_load(GROUP_YAML.format(scheduling="scheduling: {gangScheduler: volcano}"))
    body["spec"]["members"][0]["template"]["sidecar"] = {"resources": {"requests": {"cpu": "1e-1"}}}
    group = msgspec.convert(body, ActorGroup)

    planned = plan_group(group, "ml-b", {0: {"leader": (None, 1), "worker": (None, 3)}}, {}, CFG)

    [pod_group] = of_kind(planned, "PodGroup")
    assert pod_group["spec"] == {"minMember": 4, "queue": "default"}


def test_a_gangs_statefulsets_never_roll_ranks_and_carry_their_templates_hash(capsys, tmp_path):
    planned = plan(capsys, tmp_path, "scheduling: {gangScheduler: volcano}")
    statefulsets = of_kind(planned, "StatefulSet")

    assert {s["spec"]["updateStrategy"]["type"] for s in statefulsets} == {"OnDelete"}
    hashes = {
        s["metadata"]["name"]: s["metadata"]["labels"][TEMPLATE_HASH_LABEL] for s in statefulsets
    }
    assert all(
        h == template_hash(s["spec"]["template"])
        for s, h in zip(statefulsets, hashes.values(), strict=True)
    )
    assert len(set(hashes.values())) == len(hashes)  # member and instance are in each template

    again = plan(capsys, tmp_path, "scheduling: {gangScheduler: volcano}")
    assert hashes == {
        s["metadata"]["name"]: s["metadata"]["labels"][TEMPLATE_HASH_LABEL]
        for s in of_kind(again, "StatefulSet")
    }


def _member_pods(name: str, instance: int, template: str | None) -> MemberPods:
    return MemberPods(
        name=name,
        instance=instance,
        member=name.split("-")[1],
        replicas=1,
        ready=1,
        template_hash=template,
    )


def test_an_instance_restarts_whole_when_any_member_runs_another_template_or_an_unlabelled_one(
    capsys, tmp_path
):
    planned = plan(capsys, tmp_path, "")
    hashes = {
        s["metadata"]["name"]: s["metadata"]["labels"][TEMPLATE_HASH_LABEL]
        for s in of_kind(planned, "StatefulSet")
    }
    same = [_member_pods(name, int(name[-1]), h) for name, h in hashes.items()]
    assert stale_instances(planned, same) == set()

    changed = [p if p.name != "ddp-worker-1" else _member_pods(p.name, 1, "0" * 16) for p in same]
    assert stale_instances(planned, changed) == {1}

    unlabelled = [p if p.name != "ddp-leader-0" else _member_pods(p.name, 0, None) for p in same]
    assert stale_instances(planned, unlabelled) == {0}
    # A StatefulSet that is not planned (an instance that stops) restarts nothing.
    assert stale_instances(planned, [_member_pods("ddp-worker-7", 7, None)]) == set()
