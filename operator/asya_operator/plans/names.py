"""Which object of a namespace runs as each actor name, and which queues go with an object.

An AsyncActor runs as its own name; an ActorGroup's member as `{group}-{member}`
(`member_actor`). So two objects may ask for one name (AsyncActor `a-b-c`, group `a`'s member
`b-c`, group `a-b`'s member `c`): both would use its queue `asya.{namespace}.a-b-c` and apply
objects of one name over each other's. One that runs as its names now (applied at its current
generation, not refused) keeps them; among the others, the one created first: the older by
`creationTimestamp` (`creation_order` says how objects created in one second are ordered). So
a running object never loses a name to a newcomer, to a member added to an older group, or to
an older object that was refused until some third object went.
Every other one is refused whole (`NameTaken`: Degraded, nothing applied, no queue declared)
and so keeps none of its names: another object may have those. An object being deleted keeps
its names until it is gone, so no one declares a queue its release is about to delete.

A queue goes with its object only when no other object of the namespace runs as its name: a
refused object owns no queue, and the queue of one that leaves while another was refused its
name stays, for the one that runs as it next.

Pure: the namespace's objects in, the keepers and the refusals in words out (the statuses
say them as `NameTaken`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final

from asya_operator.api.actor import AsyncActor
from asya_operator.api.group import ActorGroup, member_actor

NAME_TAKEN: Final = "NameTaken"
"""The reason of a condition that says an object was refused one of its names
(`conditions.Reason.NAME_TAKEN`; a module below `conditions`, so its own copy, held equal by
the tests)."""

NameOwner = AsyncActor | ActorGroup
"""What runs as actor names: an AsyncActor, or an ActorGroup's members."""


@dataclasses.dataclass(frozen=True)
class Claim:
    """One object's claim to an actor name."""

    kind: str
    """`AsyncActor` or `ActorGroup`."""
    name: str
    """The object's name."""
    member: str | None = None
    """The group's member that runs as the name (None: an AsyncActor)."""
    running: bool = dataclasses.field(default=True, compare=False)
    """Of a keeper (`name_keepers`): whether it keeps the name because it runs as it now
    (False: because it came first, or those before it were refused another name). Not part
    of the claim's identity, nor is `passed_over`."""
    passed_over: frozenset[tuple[str, str]] = dataclasses.field(default=frozenset(), compare=False)
    """Of a keeper: the objects (kind, name) that came before it and claim one of its names,
    refused for another of theirs: an object refused one name keeps none."""

    def described(self, namespace: str) -> str:
        """`AsyncActor ns/a-b-c`, `ActorGroup ns/a (its member b-c)`."""
        whose = f"{self.kind} {namespace}/{self.name}"
        return whose if self.member is None else f"{whose} (its member {self.member})"


def claims(owner: NameOwner) -> dict[str, Claim]:
    """The actor names `owner` runs as, each with its claim."""
    name = str(owner.metadata["name"])
    if isinstance(owner, AsyncActor):
        return {name: Claim("AsyncActor", name)}
    return {
        member_actor(name, m.name): Claim("ActorGroup", name, m.name) for m in owner.spec.members
    }


def creation_order(owner: NameOwner) -> tuple[bool, str, bool, int, str]:
    """Those that run as their names now first (`runs_as_its_names`), then older first: by
    `creationTimestamp` (RFC 3339 in UTC, so its text sorts as its time). Within its
    resolution, one second: one already applied (its status has an `observedGeneration`: it
    has run as its names) before one not yet, an AsyncActor before an ActorGroup, then by
    name."""
    metadata, status = owner.metadata, owner.status
    applied = status is not None and status.observed_generation is not None
    kind = 0 if isinstance(owner, AsyncActor) else 1
    created = str(metadata.get("creationTimestamp") or "")
    return (not runs_as_its_names(owner), created, not applied, kind, str(metadata["name"]))


def runs_as_its_names(owner: NameOwner) -> bool:
    """Applied at its current generation and not refused a name: what it asks for is what
    runs. (One whose spec changed since, a member added to a group say, asks for names it may
    not run as yet.)"""
    status = owner.status
    if status is None or status.observed_generation is None:
        return False
    generation = owner.metadata.get("generation")
    if generation is not None and generation != status.observed_generation:
        return False
    return not any(c.reason == NAME_TAKEN for c in status.conditions or ())


def name_keepers(
    owners: Iterable[NameOwner],
    *,
    order: Callable[[NameOwner], Any] = creation_order,
    runs: Callable[[NameOwner], bool] = runs_as_its_names,
) -> dict[str, Claim]:
    """Actor name -> the claim that keeps it, among `owners` (one namespace's, those being
    deleted included). Taken oldest first by `order`: an object one of whose names is kept
    already keeps none. `runs` says whether a keeper runs as its names now (`Claim.running`)."""
    kept: dict[str, Claim] = {}
    # Actor name -> the objects that claimed it and were refused before anyone kept it.
    refused: dict[str, set[tuple[str, str]]] = {}
    for owner in sorted(owners, key=order):
        mine = claims(owner)
        if any(actor in kept for actor in mine):
            for actor in mine:
                if actor not in kept:
                    refused.setdefault(actor, set()).add((owner.kind, str(owner.metadata["name"])))
            continue
        running = runs(owner)
        for actor, claim in mine.items():
            passed = frozenset(refused.get(actor, ()))
            kept[actor] = dataclasses.replace(claim, running=running, passed_over=passed)
    return kept


def names_taken(owner: NameOwner, namespace: str, keepers: Mapping[str, Claim]) -> list[str]:
    """For each actor name of `owner` another object keeps (`name_keepers`), why `owner` is
    refused, in words naming that object and the fixes."""
    return [message for _keeper, message in refusals(owner, namespace, keepers)]


def refusals(
    owner: NameOwner, namespace: str, keepers: Mapping[str, Claim]
) -> list[tuple[Claim, str]]:
    """As `names_taken`, each with the claim that keeps the name; those whose keeper came
    before `owner` first (the others it lost only by being refused one of those)."""
    found = []
    for actor, claim in claims(owner).items():
        keeper = keepers.get(actor)
        if keeper is None or keeper == claim:
            continue
        # Why the keeper has it: `owner`, though before it, was refused another name; or it
        # runs as it (whatever its age); or it came first.
        passed_over = (claim.kind, claim.name) in keeper.passed_over
        if passed_over:
            runs = f"runs as, {claim.kind} {claim.name} being refused another of its names"
        elif keeper.running:
            runs = "already runs as"
        else:
            runs = "runs as, created first"
        other = f"{keeper.described(namespace)} {runs}"
        fix = f"delete {keeper.kind} {keeper.name}"
        if claim.member is None:
            message = f"actor {actor} is what {other}: rename AsyncActor {actor}, or {fix}"
        else:
            message = (
                f"member {claim.member} runs as actor {actor}, which {other}: rename member"
                f" {claim.member} or ActorGroup {claim.name}, or {fix}"
            )
        found.append((passed_over, keeper, message))
    return [(keeper, message) for _later, keeper, message in sorted(found, key=lambda f: f[0])]


def shared_names(owner: NameOwner, others: Iterable[NameOwner]) -> list[str]:
    """The actor names of `owner` that one of `others` (the namespace's objects that stay) runs
    as too: their queues are not `owner`'s to delete when it goes."""
    return shared(list(claims(owner)), others, leaving=(owner.kind, str(owner.metadata["name"])))


def shared(
    actors: Sequence[str], others: Iterable[NameOwner], *, leaving: tuple[str, str]
) -> list[str]:
    """Those of `actors` (the names of the object `leaving`, as its kind and name) that one of
    `others` runs as too."""
    claimed: Collection[str] = {
        actor
        for other in others
        if (other.kind, str(other.metadata["name"])) != leaving
        for actor in claims(other)
    }
    return [actor for actor in actors if actor in claimed]
