"""The Namespace handler reacts to a namespace's `asya.sh/default-pool` label changing, and to
nothing else: each pool-less actor there is reconciled again, each pool-less group refreshed by
an admission pass. What that reaction does to the actors and groups is the stand-in's to show
(test_controller_default_pool); here, when it happens, on events as kopf delivers them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
from asya_operator.handlers.namespaces import NamespaceHandlers

POOL = "asya.sh/default-pool"


class Reactions:
    """Stands for the actor reconciler and the admission loop: records what is asked of them."""

    def __init__(
        self, *, failing: frozenset[str] = frozenset(), broken: frozenset[str] = frozenset()
    ) -> None:
        self.seen: list[tuple[str, ...]] = []
        self._failing = failing
        self.broken = set(broken)

    async def follow_default_pool(self, namespace: str, name: str, logger: Any) -> None:
        self.seen.append(("reconcile", namespace, name))
        if name in self._failing:
            raise kopf.TemporaryError("Degraded, nothing applied: the broker is unreachable")
        if name in self.broken:
            raise TimeoutError("the API server did not answer")

    def request(self, *, refresh: tuple[str, str] | None = None) -> int:
        assert refresh is not None
        self.seen.append(("pass", *refresh))
        return 1


async def deliver(handlers: NamespaceHandlers, kind: str | None, labels: dict[str, str]) -> None:
    """One event of the Namespace `ml-a`, whose pool-less actors are `embed` and `judge` and
    pool-less group `train` (kopf's indices)."""
    await handlers.follow_namespace(
        event={"type": kind, "object": {"metadata": {"name": "ml-a", "labels": labels}}},
        name="ml-a",
        labels=labels,
        logger=logging.getLogger(__name__),
        pool_less_actors={"ml-a": {"judge", "embed"}, "ml-b": {"other"}},
        pool_less_groups={"ml-a": {"train"}},
    )


class Timer:
    """The handler's `sleep`: each wait ends when the test says so, never by the clock."""

    def __init__(self) -> None:
        self.waits: list[tuple[float, asyncio.Future[None]]] = []
        self._asked = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        wait = asyncio.get_running_loop().create_future()
        self.waits.append((seconds, wait))
        self._asked.set()
        await wait

    async def waiting(self) -> float:
        """Once something waits: for how long it asked."""
        async with asyncio.timeout(5):
            await self._asked.wait()
        self._asked.clear()
        return self.waits[-1][0]

    def end_wait(self) -> None:
        self.waits[-1][1].set_result(None)


def handlers_with(reactions: Reactions, timer: Timer | None = None) -> NamespaceHandlers:
    sleep = timer.sleep if timer is not None else asyncio.sleep
    return NamespaceHandlers(reactions, reactions, retry_s=30.0, sleep=sleep)  # type: ignore[arg-type]


async def retries_done() -> None:
    """Wait for the handler's retry tasks (every task but this one) to end."""
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        async with asyncio.timeout(5):
            await asyncio.wait(others)


REACTION = [
    ("pass", "ml-a", "train"),
    ("reconcile", "ml-a", "embed"),
    ("reconcile", "ml-a", "judge"),
]


async def test_a_namespace_first_seen_is_only_remembered():
    reactions = Reactions()

    await deliver(handlers_with(reactions), None, {POOL: "team-a"})

    assert reactions.seen == []


async def test_adding_changing_and_removing_the_label_each_move_the_pool_less_actors_and_groups():
    reactions = Reactions()
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {})

    await deliver(handlers, "MODIFIED", {POOL: "team-a"})
    await deliver(handlers, "MODIFIED", {POOL: "team-b"})
    await deliver(handlers, "MODIFIED", {})

    assert reactions.seen == REACTION * 3


async def test_other_changes_to_a_namespace_move_nothing():
    reactions = Reactions()
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {POOL: "team-a"})

    await deliver(handlers, "MODIFIED", {POOL: "team-a", "team": "search"})
    await deliver(handlers, "MODIFIED", {POOL: "team-a"})

    assert reactions.seen == []


async def test_an_empty_label_is_no_default_pool():
    reactions = Reactions()
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {})

    await deliver(handlers, "MODIFIED", {POOL: ""})

    assert reactions.seen == []


async def test_a_namespace_deleted_and_made_again_is_first_seen_again():
    reactions = Reactions()
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {})

    await deliver(handlers, "DELETED", {})
    await deliver(handlers, "ADDED", {POOL: "team-a"})

    assert reactions.seen == []


async def test_an_actor_whose_reconcile_fails_does_not_stop_the_others():
    reactions = Reactions(failing=frozenset({"embed"}))
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {})

    await deliver(handlers, "MODIFIED", {POOL: "team-a"})

    assert reactions.seen == REACTION


async def test_an_actor_the_api_failed_for_is_tried_again_at_the_namespaces_next_event():
    reactions = Reactions(broken=frozenset({"embed"}))
    handlers = handlers_with(reactions)
    await deliver(handlers, None, {})

    await deliver(handlers, "MODIFIED", {POOL: "team-a"})
    reactions.broken.clear()
    await deliver(handlers, "MODIFIED", {POOL: "team-a"})  # no change to the label itself
    await deliver(handlers, "MODIFIED", {POOL: "team-a"})

    assert reactions.seen == REACTION * 2


async def failed_to_move_embed() -> tuple[Reactions, Timer, NamespaceHandlers]:
    """The label set on ml-a, `embed` failed to move for want of the API server, and its retry
    waiting on the timer."""
    reactions = Reactions(broken=frozenset({"embed"}))
    timer = Timer()
    handlers = handlers_with(reactions, timer)
    await deliver(handlers, None, {})
    await deliver(handlers, "MODIFIED", {POOL: "team-a"})
    return reactions, timer, handlers


async def test_an_actor_the_api_failed_for_is_tried_again_later_without_an_event():
    reactions, timer, handlers = await failed_to_move_embed()

    assert await timer.waiting() == 30.0
    reactions.broken.clear()
    timer.end_wait()
    await retries_done()

    assert reactions.seen == [*REACTION, ("reconcile", "ml-a", "embed")]
    # Every actor moved: the namespace's next event without a label change asks nothing.
    await deliver(handlers, "MODIFIED", {POOL: "team-a"})
    assert reactions.seen == [*REACTION, ("reconcile", "ml-a", "embed")]


async def test_an_actor_failing_again_is_tried_again_until_the_label_changes():
    reactions, timer, handlers = await failed_to_move_embed()
    await timer.waiting()

    timer.end_wait()
    assert await timer.waiting() == 30.0  # failed again: waits again
    reactions.broken.clear()
    await deliver(handlers, "MODIFIED", {POOL: "team-b"})  # follows them all; the retry stops
    await retries_done()

    assert reactions.seen == [*REACTION, ("reconcile", "ml-a", "embed"), *REACTION]
    assert timer.waits[-1][1].cancelled()


async def test_a_namespace_with_no_pool_less_object_asks_nothing():
    reactions = Reactions()
    handlers = handlers_with(reactions)
    await handlers.follow_namespace(
        event={"type": None, "object": {}},
        name="empty",
        labels={},
        logger=logging.getLogger(__name__),
        pool_less_actors={},
        pool_less_groups={},
    )

    await handlers.follow_namespace(
        event={"type": "MODIFIED", "object": {}},
        name="empty",
        labels={POOL: "team-a"},
        logger=logging.getLogger(__name__),
        pool_less_actors={},
        pool_less_groups={},
    )

    assert reactions.seen == []


async def test_an_object_that_gained_a_pool_leaves_the_index():
    from asya_operator.handlers.namespaces import _pool_less

    assert await _pool_less(namespace="ml-a", name="embed", spec={}) == {"ml-a": "embed"}
    assert await _pool_less(namespace="ml-a", name="embed", spec={"pool": "team-a"}) == {}


async def test_stopping_cancels_a_waiting_retry():
    reactions, timer, handlers = await failed_to_move_embed()
    await timer.waiting()

    await handlers.stop()

    assert timer.waits[-1][1].cancelled()
    assert reactions.seen == REACTION
