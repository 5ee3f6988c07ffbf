"""The controller (`asya_operator.handlers.actors`) run by kopf against the stand-in cluster.

Each test creates CRs and Secrets with the official client, and waits (bounded) for what the
operator makes. The broker is real: queues are declared and deleted in the test's own
namespace, which is also the Kubernetes namespace. The stand-in has no garbage collector and
no Deployment controller, so nothing here expects either.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import urllib.request

import pytest
from asya_operator import cli as operator_cli
from asya_operator.config import OperatorConfig, load_operator_config
from prometheus_client.parser import text_string_to_metric_families

from asya.errors import SettingsError
from asya.routing import ERROR_END, HAPPY_END
from tests.operator.controller_world import (
    ACTORS,
    DEPLOYMENTS,
    SCALED_OBJECTS,
    SIDECAR_IMAGE,
    TRIGGER_AUTHS,
    async_actor,
    condition_of,
    container,
    env_of,
    has_queue,
    observed,
)


@pytest.mark.rabbitmq
async def test_a_created_actor_gets_its_deployment_keda_objects_end_actors_and_status(
    world, broker_secret, operator, queues
):
    created = await world.create_actor(async_actor("text", scaling={"maxReplicas": 4}))
    uid = created["metadata"]["uid"]

    deployment = await world.wait_exists(DEPLOYMENTS, "text")
    scaled = await world.wait_exists(SCALED_OBJECTS, "text")
    auth = await world.wait_exists(TRIGGER_AUTHS, "text")
    happy = await world.wait_exists(DEPLOYMENTS, HAPPY_END)
    await world.wait_exists(DEPLOYMENTS, ERROR_END)
    actor = await world.wait_for(
        ACTORS, "text", lambda o: observed(o) == 1, "AsyncActor text's status, generation 1"
    )

    runtime, sidecar = container(deployment, "runtime"), container(deployment, "sidecar")
    assert runtime["image"] == "ghcr.io/acme/text:1"
    assert env_of(runtime)["ASYA_HANDLER"] == "text:normalize"
    assert sidecar["image"] == SIDECAR_IMAGE
    assert env_of(sidecar)["ASYA_BROKER_URL"] == {
        "secretKeyRef": {"name": "asya-broker", "key": "amqp-url"}
    }
    (owner,) = deployment["metadata"]["ownerReferences"]
    assert (owner["uid"], owner["controller"]) == (uid, True)
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["metadata"]["queueName"] == f"asya.{world.namespace}.text"
    assert scaled["spec"]["maxReplicaCount"] == 4
    assert scaled["metadata"]["ownerReferences"][0]["uid"] == uid
    assert auth["spec"]["secretTargetRef"][0]["name"] == "asya-broker"
    (end_owner,) = happy["metadata"]["ownerReferences"]
    assert (end_owner["uid"], end_owner["controller"]) == (uid, False)
    status = actor["status"]
    assert condition_of(actor, "Degraded")["status"] == "False"
    assert status["selector"] == "app.kubernetes.io/component=actor,asya.sh/actor=text"


@pytest.mark.rabbitmq
async def test_a_created_actor_gets_its_queue_and_the_end_actors_queues_declared(
    world, broker_secret, operator, queues
):
    assert not await has_queue(queues, "text")

    await world.create_actor(async_actor("text"))
    # The status is written last: once it observes the generation, the queues are there.
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")

    assert await has_queue(queues, "text")
    assert await has_queue(queues, HAPPY_END)
    assert await has_queue(queues, ERROR_END)


@pytest.mark.rabbitmq
async def test_an_updated_actor_gets_its_objects_patched(world, broker_secret, operator, queues):
    await world.create_actor(async_actor("text"))
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")

    await world.patch_actor(
        "text", {"spec": {"image": "ghcr.io/acme/text:2", "scaling": {"maxReplicas": 7}}}
    )

    deployment = await world.wait_for(
        DEPLOYMENTS,
        "text",
        lambda o: o is not None and container(o, "runtime")["image"] == "ghcr.io/acme/text:2",
        "the Deployment's runtime image patched",
    )
    scaled = await world.wait_for(
        SCALED_OBJECTS,
        "text",
        lambda o: o is not None and o["spec"]["maxReplicaCount"] == 7,
        "the ScaledObject's maxReplicaCount patched",
    )
    assert container(deployment, "sidecar")["image"] == SIDECAR_IMAGE
    assert scaled["spec"]["triggers"][0]["metadata"]["queueName"] == f"asya.{world.namespace}.text"


@pytest.mark.rabbitmq
async def test_a_deleted_actor_loses_its_queues_and_then_its_finalizer(
    world, broker_secret, operator, queues
):
    await world.create_actor(async_actor("text"))
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")
    await queues.declare("text")  # idempotent: as the operator (and a sidecar) declare it

    await world.delete_actor("text")

    await world.wait_for(ACTORS, "text", lambda o: o is None, "the AsyncActor gone")
    assert not await has_queue(queues, "text")


@pytest.mark.rabbitmq
async def test_a_deleted_actor_with_keep_queues_keeps_them(world, broker_secret, operator, queues):
    await world.create_actor(async_actor("text", keepQueues=True))
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")
    await queues.declare("text")

    await world.delete_actor("text")

    await world.wait_for(ACTORS, "text", lambda o: o is None, "the AsyncActor gone")
    assert await has_queue(queues, "text")


@pytest.mark.rabbitmq
async def test_a_deleted_actor_leaves_the_end_actors_owned_by_the_others(
    world, broker_secret, operator, queues
):
    await world.create_actor(async_actor("text"))
    other = await world.create_actor(async_actor("other"))
    await world.wait_for(
        DEPLOYMENTS,
        HAPPY_END,
        lambda o: o is not None and len(o["metadata"]["ownerReferences"]) == 2,
        "happy-end owned by both actors",
    )

    await world.delete_actor("text")

    happy = await world.wait_for(
        DEPLOYMENTS,
        HAPPY_END,
        lambda o: o is not None and len(o["metadata"]["ownerReferences"]) == 1,
        "happy-end owned by the remaining actor only",
    )
    assert happy["metadata"]["ownerReferences"][0]["uid"] == other["metadata"]["uid"]


@pytest.mark.rabbitmq
async def test_an_actor_without_its_secret_is_degraded_naming_it_and_recovers_when_it_appears(
    world, operator, queues, amqp_url
):
    await world.create_actor(async_actor("text", broker={"secretName": "broker-later"}))

    actor = await world.wait_condition("text", "Degraded", "True")
    degraded = condition_of(actor, "Degraded")
    assert degraded["reason"] == "SecretNotFound"
    assert f"Secret {world.namespace}/broker-later not found" in degraded["message"]
    assert condition_of(actor, "Ready")["status"] == "False"
    assert not await has_queue(queues, "text")
    assert await world.get(DEPLOYMENTS, "text") is None

    await world.create_secret(
        "broker-later", {"amqp-url": amqp_url, "management-url": "http://guest:guest@x/"}
    )

    await world.wait_condition("text", "Degraded", "False")
    await world.wait_exists(DEPLOYMENTS, "text")
    await world.wait_exists(SCALED_OBJECTS, "text")


@pytest.mark.rabbitmq
async def test_an_actor_missing_its_secret_does_not_hold_back_a_good_one_beside_it(
    world, broker_secret, operator, queues
):
    await world.create_actor(async_actor("gone", broker={"secretName": "no-such-secret"}))
    await world.create_actor(async_actor("text"))

    await world.wait_condition("gone", "Degraded", "True")
    await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "the good actor applied")
    await world.wait_exists(DEPLOYMENTS, "text")
    await world.wait_exists(SCALED_OBJECTS, "text")
    good = await world.wait_condition("text", "Degraded", "False")
    assert condition_of(good, "Degraded")["reason"] == "AsExpected"
    assert await world.get(DEPLOYMENTS, "gone") is None


@pytest.mark.rabbitmq
async def test_an_actor_naming_a_missing_flavor_is_degraded_naming_it(
    world, broker_secret, operator, queues
):
    await world.create_actor(async_actor("text", flavor="a100"))

    actor = await world.wait_condition("text", "Degraded", "True")

    degraded = condition_of(actor, "Degraded")
    assert degraded["reason"] == "FlavorNotFound"
    assert "ResourceFlavor a100 not found" in degraded["message"]
    assert await world.get(DEPLOYMENTS, "text") is None


@pytest.mark.rabbitmq
async def test_an_actor_is_ready_and_its_generation_observed_only_once_its_queues_are_declared(
    world, operator, queues, amqp_url
):
    # Given an actor whose Secret is missing
    await world.create_actor(async_actor("text", broker={"secretName": "broker-later"}))
    missing = await world.wait_condition("text", "Degraded", "True")
    assert condition_of(missing, "Ready")["status"] == "False"
    assert observed(missing) is None

    # When the Secret appears with an AMQP URL no broker answers at
    management = "http://guest:guest@127.0.0.1:15672/"
    unreachable = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
    await world.create_secret(
        "broker-later", {"amqp-url": unreachable, "management-url": management}
    )

    # Then its objects are applied, but with no queue it is not Ready
    await world.wait_exists(DEPLOYMENTS, "text")
    applied = await world.wait_for(
        ACTORS,
        "text",
        lambda o: o is not None and condition_of(o, "Ready").get("reason") != "SecretNotFound",
        "a status written after the Secret appeared",
    )
    assert condition_of(applied, "Ready")["status"] == "False"
    assert observed(applied) is None
    assert not await has_queue(queues, "text")

    # When the Secret points at the broker
    await world.patch_secret("broker-later", {"amqp-url": amqp_url})

    # Then the queues are declared, and only then is the generation observed and the actor Ready
    ready = await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")
    assert await has_queue(queues, "text")
    assert condition_of(ready, "Ready")["status"] == "True"


@pytest.mark.rabbitmq
async def test_an_actor_whose_broker_cannot_be_reached_is_degraded_naming_it_with_a_warning(
    world, operator, queues, amqp_url
):
    # Given a broker Secret whose AMQP URL is a closed port
    port = free_port()
    await world.create_secret(
        "asya-broker",
        {
            "amqp-url": f"amqp://guest:guest@127.0.0.1:{port}/",
            "management-url": "http://guest:guest@127.0.0.1:15672/",
        },
    )

    # When an actor is created
    await world.create_actor(async_actor("text"))

    # Then it is Degraded and not Ready, naming the broker and its error
    actor = await world.wait_condition("text", "Degraded", "True")
    degraded, ready = condition_of(actor, "Degraded"), condition_of(actor, "Ready")
    assert degraded["reason"] == "BrokerUnreachable"
    assert f"cannot reach the broker at amqp://guest:***@127.0.0.1:{port}/" in degraded["message"]
    assert (ready["status"], ready["reason"]) == ("False", "BrokerUnreachable")
    assert observed(actor) is None
    # and a Warning Event on the actor says the same
    events = [
        (e["type"], e["reason"], e["message"])
        for e in await world.events()
        if e["involved_object"]["name"] == "text"
    ]
    assert ("Warning", "BrokerUnreachable", degraded["message"]) in events

    # When the reconcile tries again, and again, finding the same broker unreachable
    said = []

    def record() -> None:
        stored = world.cluster.current(ACTORS, world.namespace, "text")
        if stored is not None and condition_of(stored, "Degraded").get("status") == "True":
            said.append(condition_of(stored, "Degraded")["message"])

    world.cluster.after_write(ACTORS, record)
    await world.wait_for(ACTORS, "text", lambda o: len(said) >= 5, "five more retries written")

    # Then each retry's status says it once: a kept problem is replaced, never joined again
    assert all(message.count("queues not declared") == 1 for message in said), said

    # When the Secret points at a broker that answers
    await world.patch_secret("asya-broker", {"amqp-url": amqp_url})

    # Then a recheck declares the queues and the actor recovers
    recovered = await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1")
    assert condition_of(recovered, "Degraded")["status"] == "False"
    assert condition_of(recovered, "Ready")["status"] == "True"
    assert await has_queue(queues, "text")


def is_ready(actor) -> bool:
    return observed(actor) == 1 and condition_of(actor, "Ready").get("status") == "True"


async def warnings_on(world, name: str) -> set[tuple[str, str]]:
    return {
        (e["reason"], e["message"])
        for e in await world.events()
        if e["involved_object"]["name"] == name and e["type"] == "Warning"
    }


@pytest.mark.rabbitmq
async def test_a_ready_actor_whose_secret_is_deleted_is_degraded_naming_it_until_it_returns(
    world, broker_secret, operator, queues
):
    # Given a Ready actor
    await world.create_actor(async_actor("text"))
    await world.wait_for(ACTORS, "text", is_ready, "AsyncActor text Ready, generation 1")

    # When its Secret is deleted
    await world.delete_secret("asya-broker")

    # Then it is Degraded naming the Secret, not Ready, with a Warning Event saying so
    actor = await world.wait_condition("text", "Degraded", "True")
    degraded = condition_of(actor, "Degraded")
    assert degraded["reason"] == "SecretNotFound"
    assert f"Secret {world.namespace}/asya-broker not found" in degraded["message"]
    assert condition_of(actor, "Ready")["status"] == "False"
    assert ("SecretNotFound", degraded["message"]) in await warnings_on(world, "text")

    # When the Secret comes back
    await world.create_secret("asya-broker", broker_secret)

    # Then the actor recovers
    recovered = await world.wait_for(ACTORS, "text", is_ready, "AsyncActor text Ready again")
    assert condition_of(recovered, "Degraded")["status"] == "False"


@pytest.mark.rabbitmq
async def test_a_ready_actor_whose_secret_loses_its_amqp_url_is_degraded_naming_the_key(
    world, broker_secret, operator, queues
):
    # Given a Ready actor
    await world.create_actor(async_actor("text"))
    await world.wait_for(ACTORS, "text", is_ready, "AsyncActor text Ready, generation 1")

    # When its Secret loses the key amqp-url
    await world.patch_secret("asya-broker", {"amqp-url": None})

    # Then it is Degraded naming the Secret and the key
    actor = await world.wait_condition("text", "Degraded", "True")
    degraded = condition_of(actor, "Degraded")
    assert degraded["reason"] == "SecretKeyMissing"
    assert f"Secret {world.namespace}/asya-broker has no key amqp-url" in degraded["message"]
    assert condition_of(actor, "Ready")["status"] == "False"

    # When the key is put back
    await world.patch_secret("asya-broker", {"amqp-url": broker_secret["amqp-url"]})

    # Then the actor recovers
    await world.wait_for(ACTORS, "text", is_ready, "AsyncActor text Ready again")


def test_the_operator_config_is_read_from_asya_operator_variables():
    config = load_operator_config(
        {"ASYA_OPERATOR_SIDECAR_IMAGE": "reg/sidecar:9", "ASYA_OPERATOR_RECHECK_S": "2.5"}
    )

    assert (config.sidecar_image, config.recheck_s) == ("reg/sidecar:9", 2.5)
    assert config.grace_s == OperatorConfig().grace_s


def test_a_bad_operator_variable_is_named_at_start():
    with pytest.raises(SettingsError, match="ASYA_OPERATOR_RECHECK_S='soon' is invalid") as info:
        load_operator_config({"ASYA_OPERATOR_RECHECK_S": "soon"})

    assert info.value.variable == "ASYA_OPERATOR_RECHECK_S"


@pytest.mark.rabbitmq
async def test_asya_operator_run_runs_the_controller_on_the_kubeconfigs_cluster(
    world, broker_secret, queues, tmp_path
):
    log = (tmp_path / "operator.log").open("wb")
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "asya_operator.cli",
        # Cluster-wide: with --namespace kopf lists /api/v1/namespaces, which the stand-in
        # cannot parse (kmock 0.8).
        "run",
        stdout=log,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "ASYA_OPERATOR_SIDECAR_IMAGE": "reg/sidecar:run",
            "ASYA_OPERATOR_PORT": str(port),
            "ASYA_LOG_LEVEL": "INFO",
            "ASYA_LOG_FORMAT": "json",
        },
    )
    try:
        await world.wait_for_watch(ACTORS)
        await world.create_actor(async_actor("text"))

        deployment = await world.wait_exists(DEPLOYMENTS, "text")
        await world.wait_for(ACTORS, "text", lambda o: observed(o) == 1, "generation 1 applied")
        live = await asyncio.to_thread(http_get, port, "/healthz")
        scraped = await asyncio.to_thread(http_get, port, "/metrics")
    finally:
        process.terminate()
        await process.wait()
        log.close()
    assert container(deployment, "sidecar")["image"] == "reg/sidecar:run"
    assert live == (200, "ok\n")
    status, text = scraped
    samples = {
        (sample.name, sample.labels.get("outcome")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert status == 200
    assert samples[("asya_operator_reconciles_total", "applied")] >= 1
    assert samples[("asya_operator_reconciles_total", "degraded")] == 0
    assert samples[("asya_operator_reconcile_seconds_count", None)] >= 1
    # ASYA_LOG_FORMAT=json: one JSON object per line, the INFO records included.
    lines = (tmp_path / "operator.log").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.startswith("{")]
    assert any(r.get("severity") == "info" for r in records), lines[:3]
    assert not [line for line in lines if line.startswith("[")], "a record in kopf's text format"


@pytest.mark.parametrize(
    ("variable", "value"), [("ASYA_LOG_LEVEL", "LOUD"), ("ASYA_OPERATOR_RECHECK_S", "soon")]
)
def test_asya_operator_run_refuses_a_bad_setting_before_it_starts(
    variable, value, monkeypatch, capsys
):
    monkeypatch.setenv(variable, value)

    code = operator_cli.main(["run"])

    assert code == 2
    assert variable in capsys.readouterr().err


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def http_get(port: int, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.status, response.read().decode()
