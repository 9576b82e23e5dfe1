"""Lossless JSON: decimals keep their written scale (1.50 stays 1.50).

FHIR decimals carry precision in their scale, and PostgreSQL's JSONB keeps it, so we
parse numbers with a fraction as `Decimal` and write them back verbatim.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson


def loads(text: str | bytes) -> Any:
    return json.loads(text, parse_float=Decimal)


def _default(value: object) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(str(value))
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(value: Any, *, indent: bool = False) -> str:
    option = orjson.OPT_INDENT_2 if indent else 0
    return orjson.dumps(value, default=_default, option=option).decode()


def dumpb(value: Any) -> bytes:
    return orjson.dumps(value, default=_default)
