"""Settings describe themselves: every variable with its default and what it means."""

from __future__ import annotations

import pytest

from asya.envelope import Limits
from asya.errors import SettingsError
from asya.settings import (
    ProcessSettings,
    RuntimeSettings,
    SettingInfo,
    SidecarSettings,
    TransportSettings,
    describe_settings,
    format_settings_help,
    load_settings,
)


def test_every_settings_field_has_a_description():
    undescribed = [
        s.variable
        for s in describe_settings(
            Limits, TransportSettings, SidecarSettings, RuntimeSettings, ProcessSettings
        )
        if not s.description
    ]

    assert undescribed == []


def test_a_group_is_described_as_variable_default_and_description_in_field_order():
    assert [(s.variable, s.default) for s in describe_settings(ProcessSettings)] == [
        ("ASYA_LOG_LEVEL", "WARNING"),
        ("ASYA_LOG_FORMAT", "text"),
        ("ASYA_PIPELINE_DEPTH", 1),
        ("ASYA_EVENT_LOOP", "auto"),
    ]


def test_omitted_fields_are_left_out_of_the_description():
    described = describe_settings(
        RuntimeSettings, omit=("handler", "kill_grace_s", "workers", "actor_overrides")
    )

    assert [s.variable for s in described] == ["ASYA_SOCKET_PATH", "ASYA_GRACE_S"]


def test_help_shows_each_variable_as_it_would_be_written_with_its_description_below():
    settings = [
        SettingInfo(variable="ASYA_ACTOR", default=None, description="the actor"),
        SettingInfo(variable="ASYA_STEP_EVENTS", default=False, description="print steps"),
        SettingInfo(variable="ASYA_GRACE_S", default=30.0, description="drain time"),
        SettingInfo(variable="ASYA_HEALTH_PORT", default=8080, description=""),
    ]

    assert format_settings_help(settings) == (
        "  ASYA_ACTOR (unset)\n"
        "      the actor\n"
        "  ASYA_STEP_EVENTS=false\n"
        "      print steps\n"
        "  ASYA_GRACE_S=30\n"
        "      drain time\n"
        "  ASYA_HEALTH_PORT=8080"
    )


def test_the_log_format_is_text_or_json():
    assert load_settings({"ASYA_LOG_FORMAT": "json"}).process.log_format == "json"
    assert load_settings({}).process.log_format == "text"


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        (
            "ASYA_LOG_LEVEL",
            "debug",
            "Invalid enum value 'debug' (expected one of: DEBUG, INFO, WARNING, ERROR, CRITICAL)",
        ),
        ("ASYA_LOG_FORMAT", "xml", "Invalid enum value 'xml' (expected one of: text, json)"),
    ],
)
def test_a_value_outside_a_fixed_set_is_refused_listing_the_valid_ones(variable, value, expected):
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value})

    assert str(caught.value) == f"{variable}={value!r} is invalid: {expected}"
