"""The sequence a volume's file name states (``sequences.yaml``): OASIS-3's ingest reads its BIDS suffixes, and
``curate imaging render`` those and the usual shorthands."""

from __future__ import annotations

import functools
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from curation.errors import ParamsError, validation_message

TABLE = Path(__file__).with_name("sequences.yaml")


class SequenceNames(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bids: dict[str, str]  # BIDS suffix, as written -> sequence
    shorthands: dict[str, str]  # further endings, for file names outside a BIDS source


@functools.cache
def sequence_names() -> SequenceNames:
    """The table, validated: both lists present, text to text, no ending twice (ignoring case)."""
    try:
        names = SequenceNames.model_validate(yaml.safe_load(TABLE.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", TABLE) from None
    except ValidationError as exc:
        raise ParamsError(validation_message(exc), TABLE) from None
    seen: set[str] = set()
    for ending in [*names.bids, *names.shorthands]:
        if ending.lower() in seen:
            raise ParamsError(f"{ending}: listed twice (ignoring case)", TABLE)
        seen.add(ending.lower())
    return names


def sequence_of_suffix(suffix: str) -> str | None:
    """The sequence of a BIDS suffix, as written (``T1w``; ``t1w`` is none), or None."""
    return sequence_names().bids.get(suffix)


def sequence_from_name(path: Path) -> str | None:
    """The contrast a volume's file name states in its last ``_`` part, ignoring case (``sub-01_T1w.nii.gz`` -> T1w,
    ``head_pd.nii`` -> PD), or None."""
    stem = path.name.removesuffix(".gz").rsplit(".", 1)[0]
    if "_" not in stem:
        return None
    names = sequence_names()
    endings = {k.lower(): v for k, v in [*names.bids.items(), *names.shorthands.items()]}
    return endings.get(stem.rsplit("_", 1)[-1].lower())
