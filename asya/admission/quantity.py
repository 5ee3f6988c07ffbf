"""Kubernetes resource quantities (`500m`, `2`, `16Gi`) as integer milli-units.

Integers, never floats: quota arithmetic must be exact (1 CPU is 1000, `500m` is 500,
`1Gi` is 1073741824000). Fractions below a milli-unit round up, as Kubernetes does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

from asya.errors import AdmissionError

_PATTERN: Final = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)([munkMGTPE]|[KMGTPE]i)?$")
_FACTOR: Final = {
    None: Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
NON_NEGATIVE_QUANTITY_PATTERN: Final = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""A Kubernetes resource quantity without a minus sign (the core API's pattern, whose sign may
be `+` only): quota is never negative. Wider than `parse_quantity` (an exponent such as `1e3`),
which says so when it meets one."""
_BINARY: Final = (
    ("Ei", 2**60),
    ("Pi", 2**50),
    ("Ti", 2**40),
    ("Gi", 2**30),
    ("Mi", 2**20),
    ("Ki", 2**10),
)


class Milli(int):
    """A quantity in milli-units (an int, so arithmetic stays exact and cheap)."""


def parse_quantity(value: str | int | float) -> Milli:
    """`"500m"` -> 500, `2` -> 2000, `"1Gi"` -> 1073741824000.

    Raises:
        AdmissionError: not a quantity, or negative.
    """
    if isinstance(value, bool):
        raise AdmissionError(f"expected a quantity such as 2, '500m' or '16Gi', got {value!r}")
    if isinstance(value, int | float):
        if value < 0 or not math.isfinite(value):
            raise AdmissionError(f"a quantity must be a finite number >= 0, got {value!r}")
        return Milli(math.ceil(Fraction(value) * 1000))
    match = _PATTERN.match(value.strip())
    if match is None:
        raise AdmissionError(f"expected a quantity such as 2, '500m' or '16Gi', got {value!r}")
    number, suffix = match.groups()
    return Milli(math.ceil(Fraction(number) * _FACTOR[suffix] * 1000))


def format_quantity(milli: int) -> str:
    """The shortest exact Kubernetes notation: 500 -> `500m`, 2000 -> `2`, 2**30*1000 -> `1Gi`."""
    if milli % 1000:
        return f"{milli}m"
    units = milli // 1000
    for suffix, size in _BINARY:
        if units >= size and units % size == 0:
            return f"{units // size}{suffix}"
    return str(units)
