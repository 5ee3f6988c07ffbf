"""`asya-operator run` started again and again on a cluster that already holds AsyncActors.

At start kopf resumes every actor at once: their handlers decode AsyncActors on the event
loop and on `asyncio.to_thread` workers together, which is where the first decode of a type
used to meet another thread building its decoding info, and the process died of a segfault
(`asya.typeinfo`). Each start must reconcile every actor and stop cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys

import pytest

from tests.operator.controller_world import ACTORS, async_actor, observed

ACTOR_COUNT = 10
STARTS = 20
# A cold start imports kopf and the client and resumes ten actors: generous on a busy machine.
START_S = 60.0


async def _all_reconciled(world) -> None:
    for index in range(ACTOR_COUNT):
        await world.cluster.wait_for(
            ACTORS, world.namespace, f"a{index}", lambda o: observed(o) == 1
        )


async def _start_and_stop(world, log_path) -> tuple[int, str]:
    """One operator process from a fresh interpreter, until every actor's status is written
    again; its exit status after SIGTERM, and its log."""
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import sys; from asya_operator.cli import main; sys.exit(main())",
            "run",
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ASYA_OPERATOR_PORT": "0"},
        )
        reconciled = asyncio.create_task(_all_reconciled(world))
        exited = asyncio.create_task(process.wait())
        # A process that dies is seen at once, not after the timeout.
        await asyncio.wait(
            {reconciled, exited}, timeout=START_S, return_when=asyncio.FIRST_COMPLETED
        )
        reconciled.cancel()
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await exited
        with contextlib.suppress(asyncio.CancelledError):
            await reconciled
    return code, log_path.read_text(errors="replace")


@pytest.mark.rabbitmq
# Twenty operator processes, one after another: about 70 s on an idle machine, and 250 s on
# the same machine slowed down threefold (12 s a start, measured): the limit only catches a hang.
@pytest.mark.timeout(600)
async def test_every_cold_start_reconciles_existing_actors_and_stops_cleanly(
    world, broker_secret, queues, tmp_path
):
    # Given: ten AsyncActors stored before any operator runs
    for index in range(ACTOR_COUNT):
        await world.create_actor(async_actor(f"a{index}"))
    outcomes = []

    try:
        for start in range(STARTS):
            # When: an operator starts from nothing (statuses cleared: each start's shows)
            for index in range(ACTOR_COUNT):
                await world.patch_actor(f"a{index}", {"status": None})
            code, log = await _start_and_stop(world, tmp_path / f"operator-{start}.log")
            statuses = [observed(await world.get(ACTORS, f"a{i}")) for i in range(ACTOR_COUNT)]
            outcomes.append((code, statuses, log[-2000:]))
    finally:
        await queues.delete_queues({f"a{index}" for index in range(ACTOR_COUNT)})

    # Then: no start crashed, and each reconciled every actor
    assert [code for code, _, _ in outcomes] == [0] * STARTS, [
        log for code, _, log in outcomes if code != 0
    ][:1]
    assert all(statuses == [1] * ACTOR_COUNT for _, statuses, _ in outcomes)
