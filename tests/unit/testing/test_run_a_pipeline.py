"""`asya.testing.run` runs payloads through a whole pipeline in memory and returns every final."""

from __future__ import annotations

from pathlib import Path

import pytest

from asya import PermanentError, actor
from asya.envelope import Reason
from asya.errors import ActorDefinitionError, EnvelopeError, SettingsError
from asya.testing import arun, run

TREE_APP = Path(__file__).parents[1] / "client" / "tree_app.py"


def test_run_returns_every_final_of_every_input_in_input_then_tree_order():
    results = run(str(TREE_APP), [[1, [2, 3]], [], ["bad", 4]])

    assert [f.payload for f in results] == [1, 2, 3, [], "bad", 4]
    assert results.payloads == [1, 2, 3, [], 4]
    assert [(f.payload, f.status.reason) for f in results.failed] == [("bad", Reason.HANDLER_ERROR)]


def test_run_groups_the_finals_by_reason():
    results = run(str(TREE_APP), [["bad", 1], "bad"], route=["check"])

    assert {reason: len(finals) for reason, finals in results.by_reason().items()} == {
        Reason.HANDLER_ERROR: 1,
        None: 1,
    }


def test_run_takes_a_list_of_actors_and_routes_through_them_in_order():
    @actor
    def double(n):
        return n * 2

    @actor
    def must_be_small(n):
        if n > 10:
            raise PermanentError(f"{n} is too large")
        return n

    results = run([double, must_be_small], [1, 2, 8])

    assert results.payloads == [2, 4]
    assert [f.payload for f in results.failed] == [16]
    assert results.failed[0].status.error.message == "16 is too large"


def test_run_takes_an_explicit_route():
    @actor
    def double(n):
        return n * 2

    results = run([double], [1], route=["double", "double", "double"])

    assert results.payloads == [8]


async def test_arun_runs_a_pipeline_inside_an_async_test():
    @actor
    def double(n):
        return n * 2

    results = await arun([double], [3])

    assert results.payloads == [6]


async def test_run_inside_an_event_loop_points_to_arun():
    with pytest.raises(RuntimeError, match="await arun"):
        run(str(TREE_APP), [1])


def test_run_refuses_something_that_is_not_an_actor():
    def plain(n):
        return n

    with pytest.raises(ActorDefinitionError, match="not an actor"):
        run([plain], [1])


def test_run_refuses_a_route_through_an_actor_the_app_does_not_define():
    with pytest.raises(SettingsError, match=r"'chek'.*did you mean 'check'"):
        run(str(TREE_APP), [1], route=["tree", "chek"])


def test_run_keeps_a_gpu_actor_in_process_so_a_test_needs_no_gpu():
    @actor(gpus=1)
    def on_gpu(n):
        return n + 1

    results = run([on_gpu], [1, 2])

    assert results.payloads == [2, 3]


def test_run_refuses_an_input_a_pipeline_could_not_send_naming_its_place():
    @actor
    def echo(doc):
        return doc

    with pytest.raises(EnvelopeError, match=r"^payloads\[1\]\.tags is \{'a'\} \(set\)"):
        run([echo], [{"tags": ["a"]}, {"tags": {"a"}}])
