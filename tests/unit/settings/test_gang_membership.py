"""asya.gang.membership: a gang member's place in its ActorGroup instance, from the variables
the operator sets on its pod."""

from __future__ import annotations

import pytest

from asya.errors import SettingsError
from asya.gang import Membership, membership

POD = {
    "ASYA_GROUP": "ddp",
    "ASYA_GROUP_INSTANCE": "2",
    "ASYA_GROUP_MEMBER": "worker",
    "ASYA_GROUP_MEMBER_INDEX": "1",
    "ASYA_GROUP_RANK_OFFSET": "1",
    "ASYA_GROUP_SIZE": "4",
    "ASYA_GROUP_LEADER": "ddp-coordinator-2-0.ddp-2.ml-b.svc",
}


def test_a_member_pod_knows_its_rank_among_every_pod_of_its_instance():
    assert membership(POD) == Membership(
        group="ddp",
        instance=2,
        member="worker",
        index=1,
        rank=2,
        size=4,
        leader="ddp-coordinator-2-0.ddp-2.ml-b.svc",
    )


def test_a_pod_outside_any_group_has_no_membership():
    assert membership({"ASYA_HANDLER": "app:f"}) is None


def test_a_group_named_without_the_rest_is_refused_naming_what_is_missing():
    partial = {k: v for k, v in POD.items() if k != "ASYA_GROUP_SIZE"}

    with pytest.raises(SettingsError, match="ASYA_GROUP_SIZE") as raised:
        membership(partial)

    assert raised.value.variable == "ASYA_GROUP_SIZE"


def test_a_malformed_rank_is_refused_naming_the_variable():
    with pytest.raises(SettingsError, match="ASYA_GROUP_MEMBER_INDEX"):
        membership(POD | {"ASYA_GROUP_MEMBER_INDEX": "-1"})
