"""`asya send` on a broker: an actor with no queue is answered with the namespace's closest
actor, read from the broker's queues (the management API, which CI's broker runs)."""

from __future__ import annotations

from tests.integration.cli.processes import run_asya


async def test_send_to_a_misspelt_actor_on_a_broker_guesses_the_closest_of_the_namespace(
    transport, actor_names, amqp_url, namespace
):
    for name in ("clean", "classify"):
        actor_names.add(name)
        await transport.declare(name)

    code, out, err = await run_asya(
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
