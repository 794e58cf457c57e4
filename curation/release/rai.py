"""The responsible-AI statements every release carries (``rai.yaml``, data): Croissant RAI properties and the card's
section, from one file."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

from curation.errors import ParamsError

RAI_FIELDS = ("data_collection", "data_collection_type", "data_preprocessing_protocol",
              "personal_sensitive_information", "data_biases", "data_limitations", "data_use_cases")


@cache
def rai_fields() -> dict[str, Any]:
    path = resources.files("curation.release").joinpath("rai.yaml")
    table = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(table, dict) or set(table) != set(RAI_FIELDS):
        raise ParamsError(f"must hold exactly {', '.join(RAI_FIELDS)}", str(path))
    empty = [k for k in RAI_FIELDS if not table[k]]
    if empty:
        raise ParamsError(f"empty responsible-AI field(s): {', '.join(empty)}", str(path))
    return table
