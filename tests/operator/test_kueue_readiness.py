"""With Kueue admitting, an instance's readiness is read at its members' full size. Kueue lifts
its gate as it admits, so the pods may be ready before any pass has recorded the admission (the
status still Pending, holding nothing); read by what the status holds, that pass would show the
instance waiting, and no later event would come to look again."""

from __future__ import annotations

import msgspec
import pytest
from asya_operator.api.group import ActorGroup, InstanceStatus
from asya_operator.kube import MemberPods
from asya_operator.reconcile.admission import _kueue_instances, _ready_at_full_size

from asya.admission.readiness import GangPhase
from tests.operator.admission_crs import GROUP

ADMITTED = {"status": {"conditions": [{"type": "Admitted", "status": "True"}]}}


@pytest.mark.parametrize(
    ("ready_pods", "phase"),
    [(4, GangPhase.READY), (3, GangPhase.WAITING_FOR_READY)],
    ids=["all-ready", "one-not-ready"],
)
def test_an_instance_admitted_since_the_last_pass_is_ready_once_its_pods_are(ready_pods, phase):
    group = msgspec.convert(GROUP, ActorGroup)  # one member, worker, 4 replicas; no status yet
    pods = [
        MemberPods(name="ddp-worker-0", instance=0, member="worker", replicas=4, ready=ready_pods)
    ]

    shown = _kueue_instances(
        group,
        "ml-b",
        {0: InstanceStatus(instance=0)},  # as the status has it: Pending, holding nothing
        {("ml-b", "ddp-0"): ADMITTED},
        _ready_at_full_size(group, pods),
        None,
    )

    assert shown[0].phase is phase
