"""Which actors a run starts: those the inputs' routes reach, or all, once one may reroute."""

from __future__ import annotations

from asya.actor import build_spec
from asya.context import Context
from asya.local.discovery import App
from asya.local.runner import reachable_actors


def spec(name, *, context=False, **options):
    if context:

        def handler(doc, ctx: Context):
            return doc

    else:

        def handler(doc):
            return doc

    handler.__name__ = name.replace("-", "_")
    return build_spec(handler, {"name": name, **options})


def app(*specs, route=None):
    return App(specs=tuple(specs), route=route, search_path=None)


def names(specs):
    return [s.name for s in specs]


def reach(the_app, *lines, route=None):
    return names(reachable_actors(the_app, [line.encode() for line in lines], route))


def test_bare_payloads_reach_the_actors_on_their_route_only():
    pipeline = app(spec("clean"), spec("embed", gpus=1), spec("score"), route=("clean", "score"))

    assert reach(pipeline, '{"text": "a"}', "42") == ["clean", "score"]
    assert reach(pipeline, '{"text": "a"}', route=("embed",)) == ["embed"]


def test_an_envelope_line_reaches_what_is_left_on_its_own_route():
    pipeline = app(spec("clean"), spec("embed"), spec("score"), spec("review"))

    reached = reach(
        pipeline,
        '{"route": ["score"], "payload": 1}',
        '{"route": {"prev": ["clean"], "curr": "embed", "next": ["review"]}, "payload": 2}',
    )

    assert reached == ["embed", "score", "review"]


def test_lines_that_are_not_json_or_blank_reach_nothing():
    pipeline = app(spec("clean"), route=("clean",))

    assert reach(pipeline, "not json", "   ", '{"route": 7, "payload": 1}') == []


def test_an_actor_that_takes_a_context_may_reroute_anywhere_so_every_actor_is_reached():
    pipeline = app(
        spec("judge", context=True), spec("refine"), spec("embed", gpus=1), route=("judge",)
    )

    assert reach(pipeline, '{"text": "a"}') == ["judge", "refine", "embed"]


def test_an_actor_that_takes_a_context_off_every_route_changes_nothing():
    pipeline = app(spec("clean"), spec("judge", context=True), route=("clean",))

    assert reach(pipeline, '{"text": "a"}') == ["clean"]
