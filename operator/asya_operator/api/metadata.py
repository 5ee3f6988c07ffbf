"""Names, labels, selectors and owner references of the objects the operator makes.

Each is built by one function here, so a Deployment, its ScaledObject and the status's
selector can never disagree. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from asya_operator.api.template import DEFAULT_BROKER_SECRET, BrokerRef


class OwnerSpec(Protocol):
    """What an owner's spec has that the objects made for it need."""

    @property
    def broker(self) -> BrokerRef: ...


class Owner(Protocol):
    """A CR the operator makes objects for (an AsyncActor, an ActorGroup): what an owner
    reference, a name or an Event needs of it."""

    @property
    def api_version(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def metadata(self) -> dict[str, Any]: ...

    @property
    def spec(self) -> OwnerSpec: ...


ACTOR_LABEL: Final = "asya.sh/actor"
"""Label naming the actor a pod serves; the Deployment's selector is built on it."""

ACTOR_COMPONENT: Final = "actor"
"""`app.kubernetes.io/component` of an AsyncActor's objects."""

END_ACTOR_COMPONENT: Final = "end-actor"
"""`app.kubernetes.io/component` of the namespace's happy-end and error-end."""

GROUP_COMPONENT: Final = "actor-group"
"""`app.kubernetes.io/component` of an ActorGroup's objects (its members' pods included)."""

MANAGED_BY: Final = "asya-operator"
"""`app.kubernetes.io/managed-by` of every object the operator makes."""

PLACEHOLDER_NAMESPACE: Final = "default"
"""The namespace of a CR that names none (as kubectl applies it)."""


def actor_name(actor: Owner) -> str:
    """The actor's name: the AsyncActor's `metadata.name` (and its queue's last part)."""
    name: str = actor.metadata["name"]
    return name


def actor_namespace(actor: Owner, default: str = PLACEHOLDER_NAMESPACE) -> str:
    """The AsyncActor's Kubernetes namespace, which is also asya's namespace (ASYA_NAMESPACE).

    The two are the same string: a namespace name is a DNS-1123 label, exactly the pattern
    ASYA_NAMESPACE accepts, so queue names are `asya-{kubernetes namespace}-{actor}`.
    """
    namespace: str = actor.metadata.get("namespace") or default
    return namespace


def selector_labels(actor: str, component: str) -> dict[str, str]:
    """The labels a Deployment selects its pods by (immutable once the Deployment exists)."""
    return {"app.kubernetes.io/component": component, ACTOR_LABEL: actor}


def labels(actor: str, component: str) -> dict[str, str]:
    """Every label of an object made for `actor`: the selector's and the recommended ones."""
    return {
        "app.kubernetes.io/name": actor,
        "app.kubernetes.io/part-of": "asya",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **selector_labels(actor, component),
    }


def selector_string(actor: str, component: str = ACTOR_COMPONENT) -> str:
    """The selector as the scale subresource's `labelSelectorPath` wants it (for the HPA)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(actor, component).items()))


def owner_reference(owner: Owner, *, controller: bool) -> dict[str, Any]:
    """A reference to `owner` as an owner (it must have a uid: it exists in the cluster)."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.metadata["name"],
        "uid": owner.metadata["uid"],
        "controller": controller,
        "blockOwnerDeletion": controller,
    }


def owner_references(owners: Iterable[Owner], *, controller: bool) -> list[dict[str, Any]]:
    """Owner references to those `owners` that have a uid.

    An AsyncActor read from a file (`asya-operator plan`) has none until it is applied, so the
    objects planned for it carry no owner reference: the operator adds them in the cluster.
    """
    return [owner_reference(o, controller=controller) for o in owners if o.metadata.get("uid")]


def object_meta(
    name: str,
    namespace: str,
    component: str,
    owners: Iterable[Owner],
    *,
    controller: bool,
) -> dict[str, Any]:
    """`metadata` of an object the operator makes: name, namespace, labels, owners."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": labels(name, component),
    }
    refs = owner_references(owners, controller=controller)
    if refs:
        meta["ownerReferences"] = refs
    return meta


GROUP_LABEL: Final = "asya.sh/group"
"""Label naming the ActorGroup an object (a StatefulSet, a Service, a pod) is made for."""
INSTANCE_LABEL: Final = "asya.sh/instance"
"""Label naming the gang instance (0, 1, ...) an object of a group is made for."""
MEMBER_LABEL: Final = "asya.sh/member"
"""Label naming the group member a StatefulSet and its pods run."""
TEMPLATE_HASH_LABEL: Final = "asya.sh/template-hash"
"""Label of a group's StatefulSet: the hash of its pod template (`plans.group_objects`)."""


def group_selector(group: str) -> str:
    """The selector of every pod of the group, as the scale subresource wants it."""
    return f"app.kubernetes.io/component={GROUP_COMPONENT},{GROUP_LABEL}={group}"


def secret_name(spec: Mapping[str, Any]) -> str:
    """The broker Secret a stored spec names, read raw: for specs that may not decode."""
    broker = spec.get("broker") or {}
    return str(broker.get("secretName", DEFAULT_BROKER_SECRET))
