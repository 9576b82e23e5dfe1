"""What every response model shares: camelCase aliases and the instant format."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; either is accepted when parsing."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        serialize_by_alias=True,
    )

    def wire(self) -> dict[str, Any]:
        """The JSON object the API sends for this model."""
        return self.model_dump(mode="json", by_alias=True)


# An instant as the API writes it: `datetime.isoformat()` (UTC, `+00:00`, microseconds
# when there are any), not Pydantic's default `Z` form.
Instant = Annotated[datetime, PlainSerializer(lambda v: v.isoformat(), return_type=str)]


def is_none(value: object) -> bool:
    return value is None


def is_empty(value: object) -> bool:
    """Left out when None, empty or blank (e.g. a note that says nothing)."""
    return not value
