"""Canonical JSON: one byte-exact form for a value, so equal content always hashes the same."""

import hashlib
import json
from decimal import Decimal
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def _number_as_stored(text: str) -> int | float:
    # jsonb keeps numbers as exact decimals and prints them without an exponent: "1e+20" comes back as
    # 100000000000000000000 (an int to Python), "-0.0" as 0.0. Take the form it will come back in.
    number = Decimal(text)
    if "e" in text.lower() and number == number.to_integral_value():
        return int(number)
    value = float(text)
    return 0.0 if value == 0 else value


def json_as_stored(value: Any) -> Any:
    """`value` as PostgreSQL's jsonb will give it back, so a hash of it can be recomputed from the row.
    Numbers JSON cannot hold (NaN, ±Infinity) become the strings "NaN", "Infinity", "-Infinity"; other
    values are converted as canonical_json converts them (tuples to lists, keys and dates to strings)."""
    return json.loads(
        json.dumps(value, ensure_ascii=False, default=str), parse_float=_number_as_stored, parse_constant=lambda constant: constant
    )
