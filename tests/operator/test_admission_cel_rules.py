"""ResourcePool, Cohort and ActorGroup: each CEL rule rejects a CR that breaks it, with a message
that says what to fix, and accepts one that keeps it; the schema refuses malformed quota."""

from __future__ import annotations

import pytest
from asya_operator.api.crds import all_crds

from tests.operator.admission_crs import COHORT, GROUP, POOL, changed, member
from tests.operator.cr_validation import openapi_schema, rejections, rules_with_paths
from tests.operator.test_cel_rules import COVERED_HERE

CRDS = {crd["spec"]["names"]["kind"]: crd for crd in all_crds()}
KINDS = ("ResourcePool", "Cohort", "ActorGroup")


def selector(requirement):
    return changed(POOL, spec__namespaceSelector={"matchExpressions": [requirement]})


# (what is broken, the CR, the words of the message that says what to fix)
BROKEN_BY_CEL = [
    (
        "an In requirement without values",
        selector({"key": "team", "operator": "In"}),
        "give at least one value",
    ),
    (
        "an Exists requirement with values",
        selector({"key": "team", "operator": "Exists", "values": ["a"]}),
        "remove values",
    ),
    (
        "a priority threshold with borrowing policy Never",
        changed(
            POOL,
            spec__preemption={
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "Never", "maxPriorityThreshold": 0},
            },
        ),
        "set the policy or remove the threshold",
    ),
    (
        "borrowing while preempting without reclaiming",
        changed(POOL, spec__preemption={"borrowWithinCohort": {"policy": "LowerPriority"}}),
        "set reclaimWithinCohort, or borrowWithinCohort.policy: Never",
    ),
    (
        "a lending limit without a cohort",
        changed(POOL, spec__cohort=None),
        "set spec.cohort, or remove them",
    ),
    (
        "a negative integer quota",
        changed(
            POOL, spec__quotas__0__resources=[{"name": "cpu", "nominal": 1, "lendingLimit": -1}]
        ),
        "quota is never negative",
    ),
    ("a cohort that is its own parent", changed(COHORT, spec__parent="eng"), "name another"),
    ("a group without members", changed(GROUP, spec__members=[]), "spec.members is empty"),
    (
        "a member's timeout of 0",
        changed(
            GROUP,
            spec__members=[
                member(template={**member()["template"], "timeoutSeconds": 0.0}),
            ],
        ),
        "template.timeoutSeconds must be above 0",
    ),
    (
        "a member's minimum above its replicas",
        changed(GROUP, spec__members=[member(minReplicas=5)]),
        "lower minReplicas or raise replicas",
    ),
    (
        "a member's mount naming no volume",
        changed(
            GROUP,
            spec__members__0__template__volumeMounts=[{"name": "dshm", "mountPath": "/dev/shm"}],
        ),
        "template.volumeMounts names a volume that template.volumes does not have",
    ),
    (
        "a member's volume named as the operator's",
        changed(GROUP, spec__members__0__template__volumes=[{"name": "asya-socket"}]),
        "template.volumes: asya-socket and tmp are the operator's volume names",
    ),
    (
        "a member's mount at the runtime's socket",
        changed(
            GROUP,
            spec__members__0__template__volumes=[{"name": "v", "emptyDir": {}}],
            spec__members__0__template__volumeMounts=[{"name": "v", "mountPath": "/var/run/asya"}],
        ),
        "mount elsewhere",
    ),
    (
        "a member's pod label the selector uses",
        changed(GROUP, spec__members__0__template__podLabels={"asya.sh/member": "x"}),
        "template.podLabels: app.kubernetes.io/name",
    ),
    (
        "a member's pod label value with a slash",
        changed(GROUP, spec__members__0__template__podLabels={"team": "ml/a"}),
        "template.podLabels: a label's value is at most 63",
    ),
    (
        "a member's pod annotation the operator sets",
        changed(GROUP, spec__members__0__template__podAnnotations={"prometheus.io/path": "/m"}),
        "template.podAnnotations: prometheus.io/scrape",
    ),
    (
        "a member's toleration with neither key nor Exists",
        changed(GROUP, spec__members__0__template__tolerations=[{"value": "x"}]),
        "set operator: Exists, or give a key",
    ),
    (
        "a member's tolerationSeconds on a NoSchedule toleration",
        changed(
            GROUP,
            spec__members__0__template__tolerations=[
                {"key": "k", "effect": "NoSchedule", "tolerationSeconds": 30}
            ],
        ),
        "set effect: NoExecute or remove tolerationSeconds",
    ),
    (
        "a member's value on an Exists toleration",
        changed(
            GROUP,
            spec__members__0__template__tolerations=[
                {"key": "k", "operator": "Exists", "value": "v"}
            ],
        ),
        "remove value",
    ),
    (
        "a member template without an image",
        changed(GROUP, spec__members__0__template__image=""),
        "template.image is empty",
    ),
    (
        "a member template without a handler",
        changed(GROUP, spec__members__0__template__handler=""),
        "template.handler is empty",
    ),
    (
        "a member handler without a colon",
        changed(GROUP, spec__members__0__template__handler="ml.ddp.worker"),
        "module:attr",
    ),
    (
        "a group name with a dot",
        changed(GROUP, metadata__name="ddp.train"),
        "metadata.name starts each member's actor name",
    ),
    (
        "a group and member name too long together",
        changed(GROUP, metadata__name="g" * 40, spec__members=[member(name="m" * 8)]),
        "shorten the group's or the member's name",
    ),
    (
        "more instances than a group may have",
        changed(GROUP, spec__scaling={"maxReplicas": 1000}),
        "at most 999",
    ),
    (
        "group scaling with its minimum above its maximum",
        changed(GROUP, spec__scaling={"minReplicas": 3, "maxReplicas": 2}),
        "raise maxReplicas or lower minReplicas",
    ),
    (
        "a group's fallback above its most instances",
        changed(
            GROUP,
            spec__scaling={"maxReplicas": 2, "fallback": {"failureThreshold": 1, "replicas": 5}},
        ),
        "lower fallback.replicas or raise maxReplicas",
    ),
    (
        "a queue for a gang scheduler that has none",
        changed(GROUP, spec__scheduling={"gangScheduler": "kubernetes", "queue": "ml-b"}),
        "set gangScheduler to volcano or kai, or remove queue",
    ),
    (
        "a scheduler name without a gang scheduler",
        changed(GROUP, spec__scheduling={"gangScheduler": "none", "schedulerName": "volcano"}),
        "set gangScheduler, or remove schedulerName",
    ),
]

# (what the rule allows, a CR next to the broken one that keeps the rule)
KEPT = [
    ("an In requirement with values", selector({"key": "team", "operator": "In", "values": ["a"]})),
    ("an Exists requirement without values", selector({"key": "team", "operator": "Exists"})),
    (
        "borrowing while preempting, reclaiming too, under a threshold",
        changed(
            POOL,
            spec__preemption={
                "reclaimWithinCohort": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 0},
            },
        ),
    ),
    ("a pool without a cohort or limits", changed(POOL, spec__cohort=None, spec__quotas=None)),
    ("a cohort with another parent", COHORT),
    ("a cohort with no spec at all", changed(COHORT, spec=None)),
    (
        "a group and member name of 48 characters together",
        changed(GROUP, metadata__name="g" * 39, spec__members=[member(name="m" * 8)]),
    ),
    ("a group scaling up to 999 instances", changed(GROUP, spec__scaling={"maxReplicas": 999})),
    (
        "a member's minimum equal to its replicas",
        changed(GROUP, spec__members=[member(minReplicas=4)]),
    ),
    ("a group as written", GROUP),
    (
        "a Volcano queue and scheduler name",
        changed(
            GROUP,
            spec__scheduling={
                "gangScheduler": "volcano",
                "queue": "ml-b",
                "schedulerName": "volcano-gpu",
            },
        ),
    ),
    (
        "a queue for the operator's default gang scheduler",
        changed(GROUP, spec__scheduling={"queue": "ml-b"}),
    ),
]


@pytest.mark.parametrize("cr", [row[1] for row in KEPT], ids=[row[0] for row in KEPT])
def test_a_cr_that_keeps_every_rule_is_accepted(cr):
    assert rejections(cr, CRDS[cr["kind"]]) == []


@pytest.mark.parametrize(
    ("cr", "fix"), [row[1:] for row in BROKEN_BY_CEL], ids=[row[0] for row in BROKEN_BY_CEL]
)
def test_a_cr_breaking_a_cel_rule_is_rejected_with_that_rules_message_only(cr, fix):
    found = rejections(cr, CRDS[cr["kind"]])

    assert len(found) == 1, found
    assert fix in found[0]


def test_every_cel_rule_of_the_admission_kinds_has_a_broken_cr_above_that_it_rejects():
    messages = {
        rule["message"]
        for kind in KINDS
        for _, rule in rules_with_paths(openapi_schema(CRDS[kind]))
    }
    rejected = {
        message.split(": ", 1)[1]
        for _, cr, _ in BROKEN_BY_CEL
        for message in rejections(cr, CRDS[cr["kind"]])
    }
    assert messages == rejected


def test_every_crd_has_its_rules_covered_by_one_of_the_two_rule_tables():
    assert set(CRDS) == {*KINDS, *COVERED_HERE}


BROKEN_BY_SCHEMA = [
    (
        "a negative quota",
        changed(POOL, spec__quotas__0__resources=[{"name": "cpu", "nominal": "-1"}]),
        "does not match",
    ),
    (
        "a malformed resource name",
        changed(POOL, spec__quotas__0__resources=[{"name": "gpu s", "nominal": 1}]),
        "does not match",
    ),
    ("an unknown queueing strategy", changed(POOL, spec__queueingStrategy="FIFO"), "is not one of"),
    (
        "an unknown preemption policy",
        changed(POOL, spec__preemption={"withinPool": "Always"}),
        "is not one of",
    ),
    (
        "a quota without nominal",
        changed(POOL, spec__quotas__0__resources=[{"name": "cpu"}]),
        "'nominal' is a required property",
    ),
    ("a member with 0 replicas", changed(GROUP, spec__members=[member(replicas=0)]), "minimum"),
    (
        "nine members",
        changed(GROUP, spec__members=[member(name=f"m{i}") for i in range(9)]),
        "is too long",
    ),
    ("negative gang instances", changed(GROUP, spec__replicas=-1), "less than the minimum of 0"),
    (
        "a readiness timeout of 0",
        changed(GROUP, spec__readinessTimeoutSeconds=0),
        "less than the minimum of 1",
    ),
]


@pytest.mark.parametrize(
    ("cr", "why"), [row[1:] for row in BROKEN_BY_SCHEMA], ids=[row[0] for row in BROKEN_BY_SCHEMA]
)
def test_a_cr_breaking_the_schema_is_rejected_naming_the_field(cr, why):
    found = rejections(cr, CRDS[cr["kind"]])

    assert any(why in message for message in found), found
