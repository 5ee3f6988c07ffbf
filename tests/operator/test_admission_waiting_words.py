"""Why an elastic actor's replicas wait, in words: what one more replica needs (each replica is
admitted alone), and, when what its pool lacks is quota it lent that its
`reclaimWithinCohort: Never` will not take back, that."""

from __future__ import annotations

from tests.operator.test_admission_pass import actor, admit, pool

LENT = (
    "; pool team-a lent 4 nvidia.com/gpu of flavor h100 to cohort eng and its"
    " preemption.reclaimWithinCohort: Never does not take lent quota back: it waits for the"
    " borrowers to release it (LowerPriority or Any would reclaim it)"
)


def test_the_message_says_what_one_more_replica_needs_not_what_every_replica_would():
    pools = [pool("team-a", h100={"nvidia_com_gpu": 4, "cpu": 16})]

    decided = admit(pools, [actor("embed", desired=3, gpus=4, cpu="1500m")])

    assert decided["embed"].admitted == 1
    assert decided["embed"].message == (
        "1 of 3 replicas admitted, 2 waiting; one more replica needs 1500m cpu, 4 nvidia.com/gpu:"
        " insufficient quota for nvidia.com/gpu in flavor h100: needs 4, pool team-a has 0 unused"
        " (4 more needed); preemption could make room, but no admitted workload qualifies under"
        " pool team-a's policy (withinPool: Never, reclaimWithinCohort: Never)"
    )


def lender_waits(reclaim: str, *, team_a_gpus: int = 4):
    """team-b's older actor runs on 8 GPUs, borrowing team-a's 4; team-a's own actor, newer and
    of the same priority, asks for one replica of 4."""
    pools = [
        pool("team-a", cohort="eng", reclaim=reclaim, h100={"nvidia_com_gpu": team_a_gpus}),
        pool("team-b", cohort="eng", h100={"nvidia_com_gpu": 4}),
    ]
    train = actor(
        "train", "team-b", namespace="ml-b", desired=2, gpus=4, admitted=2, admitted_flavor="h100"
    )
    return admit(pools, [train, actor("embed", desired=1, gpus=4, age=1)])


def test_a_pool_that_lent_what_it_lacks_and_never_reclaims_says_so_naming_the_policy():
    decided = lender_waits("Never")

    assert (decided["train"].admitted, decided["embed"].admitted) == (2, 0)
    message = decided["embed"].message
    assert message is not None
    assert message.startswith("0 of 1 replicas admitted, 1 waiting; one more replica needs 4")
    assert message.endswith(LENT)


def test_a_pool_that_may_reclaim_but_not_from_this_borrower_is_not_told_it_never_will():
    decided = lender_waits("LowerPriority")  # train is of the same priority: not reclaimable

    message = decided["embed"].message
    assert decided["embed"].admitted == 0
    assert message is not None
    assert "reclaimWithinCohort: LowerPriority)" in message
    assert "lent" not in message


def test_a_pool_that_reclaims_any_takes_its_quota_back_and_waits_for_nothing():
    decided = lender_waits("Any")

    assert (decided["train"].admitted, decided["embed"].admitted) == (1, 1)
    assert decided["train"].preempted_by == "ml-a/embed"
    assert decided["embed"].message is None


def test_a_pool_that_lent_nothing_is_not_told_about_lending():
    pools = [pool("team-a", cohort="eng", h100={"nvidia_com_gpu": 4})]

    decided = admit(pools, [actor("embed", desired=2, gpus=4)])

    assert decided["embed"].admitted == 1
    assert "lent" not in (decided["embed"].message or "")
