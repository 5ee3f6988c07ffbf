"""A failed `follow` (an actor's status after its Deployment or Secret changed) is tried again:
kopf does not retry event handlers, so the status update it carried was dropped until the
next event. Here, when the follows happen, on events as kopf delivers them; what a follow
writes is the stand-in's to show (test_controller)."""

from __future__ import annotations

import asyncio
from typing import Any

from asya_operator.handlers.actors import ActorHandlers

from tests.operator.test_namespace_handler import Timer, retries_done


class Follows:
    """Stands for the actor reconciler: records each follow; the first `failures` fail."""

    def __init__(self, failures: int = 0) -> None:
        self.seen: list[tuple[str, str]] = []
        self._failures = failures

    async def follow(self, namespace: str, name: str) -> None:
        self.seen.append((namespace, name))
        if len(self.seen) <= self._failures:
            raise TimeoutError("the API server did not answer")


def handlers_with(follows: Follows, timer: Timer) -> ActorHandlers:
    return ActorHandlers(follows, None, retry_s=30.0, sleep=timer.sleep)  # type: ignore[arg-type]


async def deployment_changed(handlers: ActorHandlers, name: str = "embed") -> None:
    event: Any = {"type": "MODIFIED", "object": {}}
    await handlers.follow_deployment(event=event, namespace="ml-a", name=name)


async def test_a_follow_that_fails_is_tried_again_until_it_succeeds():
    follows, timer = Follows(failures=2), Timer()
    handlers = handlers_with(follows, timer)

    # When: the follow fails twice, each time waiting out the retry delay
    await deployment_changed(handlers)
    assert await timer.waiting() == 30.0
    timer.end_wait()
    assert await timer.waiting() == 30.0
    timer.end_wait()
    await retries_done()

    # Then: followed three times, the last one succeeded, nothing waits any more
    assert follows.seen == [("ml-a", "embed")] * 3
    assert len(timer.waits) == 2


async def test_a_follow_that_succeeds_is_not_tried_again():
    follows, timer = Follows(), Timer()

    await deployment_changed(handlers_with(follows, timer))
    await retries_done()

    assert follows.seen == [("ml-a", "embed")]
    assert timer.waits == []


async def test_a_new_event_follows_anew_and_replaces_the_waiting_retry():
    follows, timer = Follows(failures=1), Timer()
    handlers = handlers_with(follows, timer)
    await deployment_changed(handlers)
    await timer.waiting()

    # When: the next event comes before the retry
    await deployment_changed(handlers)
    await retries_done()

    # Then: followed by the event, and the retry never ran
    assert follows.seen == [("ml-a", "embed")] * 2
    assert len(timer.waits) == 1


async def test_each_actor_has_its_own_retry():
    follows, timer = Follows(failures=2), Timer()
    handlers = handlers_with(follows, timer)

    await deployment_changed(handlers, "embed")
    await deployment_changed(handlers, "judge")
    await asyncio.sleep(0)  # one turn of the loop: each new retry task starts its wait
    assert len(timer.waits) == 2
    for _seconds, wait in list(timer.waits):
        wait.set_result(None)
    await retries_done()

    assert sorted(follows.seen) == sorted([("ml-a", "embed"), ("ml-a", "judge")] * 2)


async def test_stopping_the_operator_cancels_the_waiting_retries():
    follows, timer = Follows(failures=1), Timer()
    handlers = handlers_with(follows, timer)
    await deployment_changed(handlers)
    await timer.waiting()

    await handlers.stop()
    await retries_done()

    assert follows.seen == [("ml-a", "embed")]
    assert timer.waits[0][1].cancelled()


async def test_a_broker_secret_changing_follows_each_of_its_actors_with_retries():
    follows, timer = Follows(failures=1), Timer()
    handlers = handlers_with(follows, timer)
    users = {("ml-a", "broker"): {"judge", "embed"}}

    await handlers.follow_secret(namespace="ml-a", name="broker", actors_by_secret=users)
    await timer.waiting()
    timer.end_wait()
    await retries_done()

    assert follows.seen == [("ml-a", "embed"), ("ml-a", "judge"), ("ml-a", "embed")]
