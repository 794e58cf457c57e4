"""An item never shows a target its slice misses: a target render whose recorded target fraction is 0 is not
offered to items (issue 49: a midline "hippocampus" slice, target fraction 0.0, was released as one)."""

from __future__ import annotations

from curation.generate.renders import target_render
from curation.schema import Placement, Render, Series, SeriesQC


def _series(fraction: float | None) -> Series:
    placed = Placement(target="hippocampus", plane="sagittal", slice_index=60, position_mm=0.0,
                       located_by="atlas_registration")
    if fraction is not None:
        placed.target_fraction = fraction
    return Series(series_id="s", sequence="T1w", format="nifti", qc=SeriesQC(targets=[placed]),
                  renders=[Render(plane="sagittal", slice_index=60, path="hip.png", role="target",
                                  target="hippocampus", position_mm=0.0)])


def test_a_target_render_that_misses_its_target_is_not_offered() -> None:
    assert target_render(_series(0.0), "hippocampus") is None


def test_a_target_render_through_its_target_or_unmeasured_is_offered() -> None:
    assert target_render(_series(0.031), "hippocampus") is not None
    assert target_render(_series(None), "hippocampus") is not None
