"""User code runs without the broker's address and credentials, whatever the runtime was given."""

from __future__ import annotations

import textwrap

from asya.outcome import Success
from tests.integration.runtime.processes import call, connect, start_runtime

HANDLERS = textwrap.dedent(
    """
    import os
    from asya import actor

    @actor
    def environment(doc):
        return sorted(os.environ)
    """
)


async def test_user_code_sees_no_broker_variable_even_when_the_runtime_has_them(tmp_path):
    rt = await start_runtime(
        tmp_path,
        HANDLERS,
        "handlers_mod:environment",
        ASYA_BROKER_URL="amqp://app:s3cret@broker:5672/prod",
        ASYA_BROKER_HOST="broker",
        ASYA_BROKER_PORT="5672",
        ASYA_BROKER_USER="app",
        ASYA_BROKER_PASSWORD="s3cret",
        ASYA_BROKER_VHOST="prod",
        APP_SETTING="kept",
    )
    client = await connect(rt)

    [outcome] = await client.invoke(call({}, "environment"))
    await client.aclose()
    await rt.stop()

    assert isinstance(outcome, Success)
    seen = outcome.outputs[0].payload
    assert [name for name in seen if name.startswith("ASYA_BROKER_")] == []
    assert "APP_SETTING" in seen
