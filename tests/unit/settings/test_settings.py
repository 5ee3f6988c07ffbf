"""Settings come from ASYA_* variables, once, and bad values fail loudly."""

from __future__ import annotations

import pytest

from asya.envelope import Limits
from asya.errors import SettingsError
from asya.settings import Settings, env_var, load_settings
from asya.transport.rabbitmq import RabbitMQOptions


def test_with_no_variables_every_default_applies():
    assert load_settings({}) == Settings()


def test_variables_are_parsed_into_their_typed_fields():
    settings = load_settings(
        {
            "ASYA_HOP_LIMIT": "10",
            "ASYA_BROKER_URL": "amqp://h",
            "ASYA_GRACE_S": "2.5",
            "OTHER": "ignored",
        }
    )

    assert settings.limits == Limits(hop_limit=10)
    assert settings.transport.broker_url == "amqp://h"
    assert settings.runtime.grace_s == 2.5


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("ASYA_HOP_LIMIT", "many", "Expected `int`, got `str`"),
        ("ASYA_MAX_PAYLOAD_BYTES", "0", "Expected `int` >= 1"),
        ("ASYA_GRACE_S", "-1", "Expected `float` >= 0"),
        ("ASYA_ACK_WINDOW_MS", "5000", "Expected `float` <= 1000"),
    ],
)
def test_a_bad_value_names_the_variable_the_value_and_the_expected_type(variable, value, expected):
    with pytest.raises(SettingsError) as caught:
        load_settings({variable: value})

    assert (caught.value.variable, caught.value.value) == (variable, value)
    assert str(caught.value).startswith(f"{variable}={value!r} is invalid: {expected}")


def test_the_ack_window_reaches_the_brokers_transport_in_seconds():
    settings = load_settings({"ASYA_ACK_WINDOW_MS": "12.5"})

    options = RabbitMQOptions.from_settings(settings.transport, connection_name="t")

    assert options.ack_window_s == 0.0125


def test_every_settings_field_has_its_own_variable():
    fields = [
        name
        for group in Settings.__struct_fields__
        for name in getattr(Settings(), group).__struct_fields__
    ]

    assert len({env_var(f) for f in fields}) == len(fields)
