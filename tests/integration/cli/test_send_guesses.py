"""`asya send` on a broker: an actor with no queue is answered with the namespace's closest
actor, read from the broker's queues (the management API, which CI's broker runs)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from tests.integration.cli.processes import ROOT


async def asya(*args: str, timeout_s: float) -> tuple[int | None, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya.cli",
        *args,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    return process.returncode, out.decode(), err.decode()


async def test_send_to_a_misspelt_actor_on_a_broker_guesses_the_closest_of_the_namespace(
    transport, actor_names, amqp_url, namespace
):
    for name in ("clean", "classify"):
        actor_names.add(name)
        await transport.declare(name)

    code, out, err = await asya(
        "send",
        "--broker",
        amqp_url,
        "--namespace",
        namespace,
        "--route",
        "clen,classify",
        "--payload",
        "{}",
        timeout_s=60,
    )

    assert code == 2
    assert out == ""
    assert err == (
        f"asya: no queue for actor 'clen' (asya.{namespace}.clen is not declared); did you mean"
        " 'clean'?\n"
    )
