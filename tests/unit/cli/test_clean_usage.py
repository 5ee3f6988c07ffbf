"""`asya clean`: what it needs before it touches a broker, and the names it would delete."""

from __future__ import annotations

import pytest

from asya.cli import main
from asya.transport.rabbitmq import RabbitMQOptions, RabbitMQTransport
from asya.transport.rabbitmq_namespace import namespace_queue_names

NOWHERE = "amqp://guest:guest@127.0.0.1:1/"


def test_clean_without_app_or_actors_says_which_queues_it_needs(capsys):
    code = main(["clean", "--namespace", "ml", "--broker", NOWHERE])

    assert code == 2
    assert capsys.readouterr().err == (
        "asya: pass APP, or --actors a,b: the actors whose queues to delete\n"
    )


def test_clean_has_no_default_namespace(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["clean", "--actors", "a", "--broker", NOWHERE])

    assert caught.value.code == 2
    assert "the following arguments are required: --namespace" in capsys.readouterr().err


@pytest.mark.parametrize("namespace", ["ml.a", "ML", "ml-", "*", ""])
def test_clean_refuses_what_cannot_be_a_namespace(namespace, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["clean", "--actors", "a", "--namespace", namespace, "--broker", NOWHERE])

    assert caught.value.code == 2
    assert f"'{namespace}' is not a namespace" in capsys.readouterr().err


def test_clean_without_a_broker_asks_for_one(capsys):
    code = main(["clean", "--actors", "a", "--namespace", "ml"])

    assert code == 2
    assert "pass --broker URL (or set ASYA_BROKER_URL)" in capsys.readouterr().err


def test_clean_is_listed_and_its_help_says_it_asks_and_refuses_while_consumed(capsys):
    with pytest.raises(SystemExit):
        main(["clean", "--help"])

    text = " ".join(capsys.readouterr().out.split())
    assert "Lists what it will delete and asks first (--yes: do not ask)" in text
    assert "Refuses, naming them, while consumers are attached" in text


def test_the_names_of_a_namespace_are_its_actors_and_ends_and_its_dotted_names_only():
    transport = RabbitMQTransport(NOWHERE, RabbitMQOptions(namespace="ml"))

    names = namespace_queue_names(transport, ["x"])

    assert names[:4] == [
        "asya-ml.parking",
        "asya-ml.results",
        "asya-ml.failures",
        "asya-ml.replays",
    ]
    assert {n.split(".retry-", 1)[0] for n in names[4:]} == {
        "asya.ml.error-end",
        "asya.ml.happy-end",
        "asya.ml.x",
    }
    assert "asya.ml.x.retry-10ms" in names
