"""Which pool an AsyncActor or ActorGroup is admitted by: its own, else its namespace's default.

Pure. A platform engineer labels a namespace `asya.sh/default-pool: P` (as Kueue gives a
namespace a default LocalQueue); an actor or group there without `spec.pool` is then P's, as if
it named P itself, everywhere its pool matters: the admission pass, the Deployment sized to what
is admitted, its status, and `asya-operator plan`'s what-if. Its readers take the owner with its
effective pool filled in (`with_effective_pool`) and need not know where it came from; the
stored spec is never written. A namespace is a cluster-scoped object: a tenant who may edit
only what is in it cannot change its labels, so cannot take its actors out of quota.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

import msgspec

from asya_operator.api.actor import AsyncActor
from asya_operator.api.group import ActorGroup

DEFAULT_POOL_LABEL: Final = "asya.sh/default-pool"
"""The namespace label naming the pool of the namespace's actors and groups without one."""

Owner = TypeVar("Owner", AsyncActor, ActorGroup)


def effective_pool(
    owner: AsyncActor | ActorGroup, namespace_labels: Mapping[str, str]
) -> str | None:
    """The pool `owner` is admitted by: `spec.pool`, else its namespace's `asya.sh/default-pool`
    (from `namespace_labels`, its namespace's labels); None: it is in no pool."""
    return owner.spec.pool or namespace_labels.get(DEFAULT_POOL_LABEL) or None


def with_effective_pool(owner: Owner, namespace_labels: Mapping[str, str]) -> Owner:
    """`owner` with `spec.pool` set to its effective pool (itself when that is its own)."""
    pool = effective_pool(owner, namespace_labels)
    if pool == owner.spec.pool:
        return owner
    return msgspec.structs.replace(owner, spec=msgspec.structs.replace(owner.spec, pool=pool))


def gpus_per_replica(actor: AsyncActor) -> int:
    """The GPUs (`nvidia.com/gpu`) each replica of `actor` asks for."""
    return actor.spec.resources.gpus


def gpus_per_instance(group: ActorGroup) -> int:
    """The GPUs (`nvidia.com/gpu`) each gang instance of `group` asks for, all members."""
    return sum(m.replicas * m.template.resources.gpus for m in group.spec.members)
