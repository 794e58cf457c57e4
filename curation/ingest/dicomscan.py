"""Ingest's scan of one DICOM file: its header fields for grouping into series, without aborting on junk.

The reading and the checks (preamble, truncated pixels, DICOMDIR, no pixel data) are ``curation.imaging.io``'s."""

from __future__ import annotations

from curation.imaging.io import read_unbounded
from curation.report import Outcome


def inspect_dicom(path: str) -> Outcome:
    """An ok outcome with the header fields in ``data`` (``series_uid``, ``study_date``, ``modality``...), or why
    the file is not used (``skipped:not_dicom``, ``dicom_truncated``...)."""
    return read_unbounded(path)[1]
