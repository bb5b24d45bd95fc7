"""Base for every typed config: unknown keys, wrong types and infinite or NaN numbers are errors."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
