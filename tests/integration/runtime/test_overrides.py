"""The runtime applies ASYA_ACTOR_OVERRIDES over the decorator and says so in its Pong."""

from __future__ import annotations

import json
import textwrap

from tests.integration.runtime.processes import connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    from asya import actor, RetryPolicy

    @actor(timeout_s=30, concurrency=2, retry=RetryPolicy(max_attempts=5))
    def work(doc):
        return doc
    """
)


async def test_the_pong_carries_the_overridden_options(tmp_path):
    overrides = {"timeoutSeconds": 4.0, "concurrency": 3, "retry": {"maxAttempts": 1}}
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", ASYA_ACTOR_OVERRIDES=json.dumps(overrides)
    )
    client = await connect(rt)

    pong = client.pong
    await client.aclose()
    await rt.stop()

    assert pong is not None
    info = pong.actor
    assert (info.timeout_s, info.concurrency, info.retry.max_attempts) == (4.0, 3, 1)


async def test_bad_overrides_stop_the_runtime_with_the_field_named(tmp_path):
    rt = await start_runtime(
        tmp_path, HANDLERS, "handlers_mod:work", ASYA_ACTOR_OVERRIDES='{"concurrency": 0}'
    )

    stderr = await rt.stderr()  # read to the end: the runtime has exited
    code = await rt.process.wait()

    assert code == 2
    assert "ASYA_ACTOR_OVERRIDES is invalid" in stderr
    assert "concurrency" in stderr
