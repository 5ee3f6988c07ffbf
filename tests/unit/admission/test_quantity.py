"""Kubernetes quantities as exact integer milli-units."""

from __future__ import annotations

import pytest

from asya.admission.quantity import format_quantity, parse_quantity
from asya.errors import AdmissionError


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("2", 2000),
        (2, 2000),
        (0.5, 500),
        ("1.5", 1500),
        ("1k", 1_000_000),
        ("16Gi", 16 * 2**30 * 1000),
        ("1Mi", 2**20 * 1000),
        ("100n", 1),
        (".5", 500),
    ],
)
def test_quantities_parse_to_milli_units(text, milli):
    assert parse_quantity(text) == milli


@pytest.mark.parametrize(
    ("milli", "text"),
    [
        (500, "500m"),
        (2000, "2"),
        (16 * 2**30 * 1000, "16Gi"),
        (1536 * 2**20 * 1000, "1536Mi"),
        (0, "0"),
    ],
)
def test_quantities_format_back_exactly(milli, text):
    assert format_quantity(milli) == text


@pytest.mark.parametrize("bad", ["lots", "-1", "1e3", "2 Gi", True, -1, float("inf")])
def test_a_bad_quantity_says_what_a_quantity_looks_like(bad):
    with pytest.raises(AdmissionError):
        parse_quantity(bad)
