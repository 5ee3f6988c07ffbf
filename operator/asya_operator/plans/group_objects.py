"""An ActorGroup's objects: for each gang instance that runs, a headless Service and one
StatefulSet per member; the KEDA objects when the group scales on its entry queue.

Pure: the group, what each instance runs (member -> replicas and flavor, from admission) and
the flavors' definitions in; plain dicts out, ready to apply. Why StatefulSets and not
Deployments: a gang's pods rendezvous, so each needs a rank and rank 0 a stable address. A
StatefulSet gives every pod a fixed ordinal (the `apps.kubernetes.io/pod-index` label, read
into `ASYA_GROUP_MEMBER_INDEX`) and, with the instance's headless Service, a DNS name
(`{pod}.{service}.{namespace}.svc`) that exists before the pod is ready (the Service publishes
unready addresses: readiness may depend on the rendezvous). `podManagementPolicy: Parallel`
starts a gang's pods together rather than one after another. `updateStrategy: OnDelete`: a
changed template never replaces a running instance's ranks one by one (a rank that cannot
rejoin a running job hangs it); each StatefulSet carries its template's hash
(`TEMPLATE_HASH_LABEL`), and the admission loop restarts an instance whole, under the same
admission, when a member's planned hash differs from the one running.

Each pod is an actor pod like an AsyncActor's (runtime + sidecar, the same security context,
probes and volumes): the member's actor is `{group}-{member}`, whose queue every instance's
pods consume. The runtime also gets the gang variables (`asya.settings.GangSettings`): group,
instance, member, the pod's index, the member's rank offset (the pods of the members before
it), the instance's size and its leader's address; `asya.gang.membership` reads them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from asya.settings import env_var
from asya_operator.api.flavor import ResourceFlavor
from asya_operator.api.group import ActorGroup, GroupMember, member_actor
from asya_operator.api.metadata import (
    GROUP_COMPONENT,
    GROUP_LABEL,
    INSTANCE_LABEL,
    MEMBER_LABEL,
    TEMPLATE_HASH_LABEL,
    labels,
    object_meta,
)
from asya_operator.config import OperatorConfig
from asya_operator.plans.gangs import gang_objects
from asya_operator.plans.kueue import queue_instance
from asya_operator.plans.pods import actor_pod_template, env_entry
from asya_operator.plans.scaling import plan_group_keda

POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
"""The label a StatefulSet's controller puts on each pod: its ordinal (Kubernetes 1.28+)."""

Running = Mapping[str, tuple[str | None, int]]
"""What one instance runs: member -> (flavor, replicas)."""


def statefulset_name(group: str, member: str, instance: int) -> str:
    """`{group}-{member}-{instance}`: one member's pods in one instance."""
    return f"{member_actor(group, member)}-{instance}"


def service_name(group: str, instance: int) -> str:
    """`{group}-{instance}`: the headless Service naming one instance's pods."""
    return f"{group}-{instance}"


def leader_address(group: ActorGroup, namespace: str, instance: int) -> str:
    """DNS name of an instance's rank-0 pod: the first member's first."""
    name = group.metadata["name"]
    pod = f"{statefulset_name(name, group.spec.members[0].name, instance)}-0"
    return f"{pod}.{service_name(name, instance)}.{namespace}.svc"


def plan_group(
    group: ActorGroup,
    namespace: str,
    running: Mapping[int, Running],
    flavors: Mapping[str, ResourceFlavor],
    config: OperatorConfig,
) -> list[dict[str, Any]]:
    """What the group has while `running` (instance -> what it runs): its KEDA objects (when it
    scales), then per instance its Service and StatefulSets.

    Raises:
        ValueError: a flavor an instance runs in is not in `flavors` (look each up first: a
            missing flavor is a `Degraded` status, not a StatefulSet).
    """
    bodies = plan_group_keda(group, namespace)
    for instance, members in sorted(running.items()):
        bodies += plan_instance(group, namespace, instance, members, flavors, config)
    return bodies


def plan_instance(
    group: ActorGroup,
    namespace: str,
    instance: int,
    running: Running,
    flavors: Mapping[str, ResourceFlavor],
    config: OperatorConfig,
) -> list[dict[str, Any]]:
    """One instance's headless Service, its gang scheduler's group object (with one) and one
    StatefulSet per member, sized as `running`."""
    name = group.metadata["name"]
    size = sum(count for _flavor, count in running.values())
    statefulsets = []
    offset = 0
    for member in group.spec.members:
        flavor_name, count = running.get(member.name, (None, 0))
        flavor = None
        if flavor_name is not None:
            if flavor_name not in flavors:
                raise ValueError(f"ActorGroup {name} runs in flavor {flavor_name!r}, not given")
            flavor = flavors[flavor_name]
        gang = {
            "group": name,
            "group_instance": str(instance),
            "group_member": member.name,
            "group_rank_offset": str(offset),
            "group_size": str(size),
            "group_leader": leader_address(group, namespace, instance),
        }
        statefulsets.append(
            _statefulset(group, namespace, instance, member, count, flavor, gang, config)
        )
        offset += count
    gang_meta = _instance_meta(group, namespace, instance)
    if config.admission == "kueue":
        members = [m.name for m in group.spec.members]
        queue_instance(statefulsets, members, gang_meta["name"], group.spec.pool)
    scheduled = gang_objects(group, gang_meta["name"], gang_meta, statefulsets, config)
    for statefulset in statefulsets:  # the templates as they are applied, every change made
        labels_of = statefulset["metadata"]["labels"]
        labels_of[TEMPLATE_HASH_LABEL] = template_hash(statefulset["spec"]["template"])
    return [_service(group, namespace, instance), *scheduled, *statefulsets]


def _instance_labels(group: str, instance: int) -> dict[str, str]:
    return {
        "app.kubernetes.io/component": GROUP_COMPONENT,
        GROUP_LABEL: group,
        INSTANCE_LABEL: str(instance),
    }


def _instance_meta(group: ActorGroup, namespace: str, instance: int) -> dict[str, Any]:
    """Metadata of an object made once per instance (its Service, its gang's group object)."""
    name = group.metadata["name"]
    meta = object_meta(
        service_name(name, instance), namespace, GROUP_COMPONENT, [group], controller=True
    )
    meta["labels"] |= _instance_labels(name, instance)
    return meta


def _service(group: ActorGroup, namespace: str, instance: int) -> dict[str, Any]:
    name = group.metadata["name"]
    meta = _instance_meta(group, namespace, instance)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "selector": _instance_labels(name, instance),
            # Members find each other before they are ready: readiness may need the rendezvous.
            "publishNotReadyAddresses": True,
        },
    }


def _statefulset(
    group: ActorGroup,
    namespace: str,
    instance: int,
    member: GroupMember,
    replicas: int,
    flavor: ResourceFlavor | None,
    gang: Mapping[str, str],
    config: OperatorConfig,
) -> dict[str, Any]:
    name = group.metadata["name"]
    actor = member_actor(name, member.name)
    meta = object_meta(
        statefulset_name(name, member.name, instance),
        namespace,
        GROUP_COMPONENT,
        [group],
        controller=True,
    )
    pod_labels = labels(actor, GROUP_COMPONENT) | _instance_labels(name, instance)
    pod_labels[MEMBER_LABEL] = member.name
    meta["labels"] = dict(pod_labels)
    extra = [env_entry(env_var(key), value) for key, value in gang.items()]
    if member.template.timeout_seconds is not None:
        # As an AsyncActor's: the runtime applies the CR's timeout over the decorator's.
        overrides = msgspec.json.encode({"timeoutSeconds": member.template.timeout_seconds})
        extra.append(env_entry(env_var("actor_overrides"), overrides.decode()))
    extra.append(
        {
            "name": env_var("group_member_index"),
            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
        }
    )
    template = actor_pod_template(
        member.template,
        pod_labels,
        flavor,
        config,
        actor=actor,
        namespace=namespace,
        secret_name=group.spec.broker.secret_name,
        extra_env=extra,
    )
    selector = _instance_labels(name, instance) | {MEMBER_LABEL: member.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "serviceName": service_name(name, instance),
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": selector},
            "template": template,
        },
    }


def template_hash(template: Mapping[str, Any]) -> str:
    """A short, stable hash of a pod template (its JSON with sorted keys): equal for equal
    templates, whatever order their fields were built in."""
    encoded = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]
