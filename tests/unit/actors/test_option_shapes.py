"""`ActorOptions` is the one place an option is declared; the other shapes follow it."""

from __future__ import annotations

import typing

import msgspec
import pytest

from asya.actor import (
    ActorConfig,
    ActorKeywords,
    ActorOptions,
    ActorSpec,
    Resources,
    Scaling,
    build_spec,
)
from asya.retry import RetryPolicy


def types_of(cls: type) -> dict[str, object]:
    """Field name -> type, bounds (`Annotated`) left out."""
    return typing.get_type_hints(cls)


def test_the_keywords_type_checkers_see_are_the_options_names_and_types():
    options = {name: types_of(ActorOptions)[name] for name in ActorOptions.__struct_fields__}

    assert types_of(ActorKeywords) == options


@pytest.mark.parametrize("view", [Scaling, Resources])
def test_a_view_holds_options_fields_of_the_same_names_and_types(view):
    options = types_of(ActorOptions)

    assert {name: options[name] for name in view.__struct_fields__} == types_of(view)


def test_the_chain_config_holds_the_options_it_shares_with_the_same_types():
    options, config = types_of(ActorOptions), types_of(ActorConfig)

    shared = set(config) - {"name", "retry"}

    assert shared == {"timeout_s", "concurrency", "batch", "batch_wait_ms"}
    assert {name: options[name] for name in shared} == {name: config[name] for name in shared}


def test_an_actor_without_options_gets_every_default_of_actor_options():
    def step(doc):
        return doc

    spec = build_spec(step, {"name": "step"})

    defaults = msgspec.structs.asdict(ActorOptions())
    assert {name: getattr(spec, name) for name in defaults if name != "name"} == {
        name: value for name, value in defaults.items() if name != "name"
    }
    assert spec.scaling == ActorOptions().scaling
    assert spec.resources == ActorOptions().resources
    assert spec.config == ActorConfig(name="step")


def test_the_views_carry_the_declared_values():
    def embed(docs):
        return docs

    spec = build_spec(
        embed,
        {"min_replicas": 1, "polling_interval_s": 5, "gpus": 2, "memory": "2Gi", "batch": 8},
    )

    defaults = ActorOptions()
    assert spec.scaling == msgspec.structs.replace(
        defaults.scaling, min_replicas=1, polling_interval_s=5.0
    )
    assert spec.resources == Resources(cpu=None, memory="2Gi", gpus=2)
    assert spec.config == ActorConfig(name="embed", batch=8)
    assert spec.config.retry == RetryPolicy().schedule


def test_a_spec_is_its_options_plus_what_inspecting_the_target_found():
    added = set(ActorSpec.__struct_fields__) - set(ActorOptions.__struct_fields__)

    assert added == {
        "target",
        "module",
        "qualname",
        "is_class",
        "style",
        "takes_context",
        "payload_type",
    }
