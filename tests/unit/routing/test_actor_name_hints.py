"""A route naming an actor by its Python name (`human_review`) is answered with the actor's
name (`human-review`) wherever a route is checked; a misspelt one with the closest actor."""

from __future__ import annotations

import pytest

from asya import Context, actor
from asya.client import Client
from asya.envelope import Reason
from asya.errors import EnvelopeError, SettingsError
from asya.routing import closest_actor, route_name_problem
from asya.testing import arun
from asya.transport.memory import MemoryTransport


@pytest.mark.parametrize(
    ("name", "actors", "expected"),
    [
        pytest.param("human_review", ["clean", "human-review"], "human-review", id="snake-case"),
        pytest.param("HumanReview", ["clean", "human-review"], "human-review", id="class-name"),
        # Spelling alone would say `dataset`: one character apart, against one substituted.
        pytest.param("data_set", ["dataset", "data-set"], "data-set", id="kebab-before-spelling"),
        pytest.param("clen", ["clean", "classify"], "clean", id="misspelt"),
        pytest.param("translate", ["clean", "classify"], None, id="nothing-close"),
    ],
)
def test_the_closest_actor_is_the_kebab_case_name_first_then_the_closest_spelling(
    name, actors, expected
):
    assert closest_actor(name, actors) == expected


def test_a_snake_case_name_in_a_route_is_answered_with_its_kebab_case_form():
    problem = route_name_problem("human_review")

    assert problem == (
        "'human_review' is not a valid actor name: use lowercase letters, digits and '-', at"
        " most 53 characters; did you mean 'human-review' (actor names are kebab-case)?"
    )


def test_a_name_with_no_valid_kebab_case_form_gets_no_guess():
    assert route_name_problem("$$$").endswith("at most 53 characters")


async def test_a_handler_routing_to_the_python_name_fails_with_the_actor_name_in_the_message():
    @actor
    def classify(doc: dict, ctx: Context) -> dict:
        ctx.route.next = ["human_review"]
        return doc

    @actor
    def human_review(doc: dict) -> dict:
        return doc

    results = await arun([classify, human_review], [{"score": 0.2}], route=["classify"])

    [failed] = results.failed
    assert failed.status.reason is Reason.UNKNOWN_ACTOR
    assert "did you mean 'human-review' (actor names are kebab-case)?" in (
        failed.status.error.message
    )


async def test_a_run_whose_route_names_the_python_name_fails_before_it_starts_naming_the_actor():
    @actor
    def human_review(doc: dict) -> dict:
        return doc

    with pytest.raises(SettingsError, match="did you mean 'human-review'"):
        await arun([human_review], [{}], route=["human_review"])


async def test_a_client_route_with_the_python_name_is_refused_naming_the_actor():
    client = Client(MemoryTransport())

    with pytest.raises(EnvelopeError, match="did you mean 'human-review'"):
        await client.send(["clean", "human_review"], {})
