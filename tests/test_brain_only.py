"""Brain-only, normalised volumes (BraTS, ISLES, MSSEG, OpenNeuro derivatives): skull-stripped, with float, z-scored
or rescaled intensities on a constant background that need not be zero. They pass defacing as face-free, recorded
in provenance and QC, and go on through the anatomy fit and rendering; a head with a face is still defaced."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

import curation.demo.phantom as phantom
from curation.imaging.templatefit import constant_background, head_mask
from curation.params import NormalizeParams


def _zscored_brain(sequence: str, seed: int = 3) -> np.ndarray:
    """A demo head cut to its brain and z-scored inside it, the background set to the brain's minimum (as BraTS
    distributes its volumes: values negative and positive, the background about -3.6)."""
    vol = phantom.head(sequence, seed=seed).astype(np.float32)
    brain = phantom.brain_mask()
    inside = vol[brain]
    z = (vol - inside.mean()) / inside.std()
    return np.where(brain, z, z[brain].min()).astype(np.float32)


def test_constant_background_is_read_from_the_border_not_assumed_zero() -> None:
    rng = np.random.default_rng(0)
    g = np.indices((40, 40, 40))
    ball = ((g - 20) ** 2).sum(axis=0) < 15**2
    zscored = np.where(ball, rng.normal(0.0, 1.0, ball.shape), -3.5).astype(np.float32)
    assert constant_background(zscored) == pytest.approx(-3.5)
    mask = head_mask(zscored)  # Otsu's half-threshold would keep only the ball's brighter half
    assert mask[ball].mean() > 0.97 and not mask[~ball].any()
    noisy = np.where(ball, 100.0, rng.rayleigh(3.0, ball.shape)).astype(np.float32)  # a head: air is noise
    assert constant_background(noisy) is None
    assert head_mask(noisy)[ball].mean() > 0.97


@pytest.mark.integration  # the anatomy fit (ANTs) and, for the head, the defacing registration
@pytest.mark.parametrize("sequence", ["FLAIR", "T1w"])
def test_zscored_brain_passes_as_face_free_and_is_rendered(sequence: str, tmp_path: Path) -> None:
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    src = tmp_path / "brain.nii.gz"
    nib.save(nib.Nifti1Image(_zscored_brain(sequence), phantom.AFFINE), src)
    res = process_series(SeriesTask("nifti", [str(src)], NormalizeParams(), str(tmp_path / "out"),
                                    str(tmp_path / "out"), sequence))
    assert res.ok, (res.reason, res.detail)
    deface = next(s for s in res.value.steps if s.name == "deface")
    assert deface.args["outcome"] == "face_free" and deface.args["series_kind"] == "brain", deface.args
    assert res.value.qc.deface is not None and res.value.qc.deface.outcome == "face_free"
    assert res.value.qc.anatomy.fit == "ok", res.value.qc.anatomy
    rendered = {r.target for r in res.value.renders}
    assert {"hippocampus", "lateral_ventricles"} <= rendered
    assert all(Path(r.path).is_file() for r in res.value.renders)


@pytest.mark.integration  # the defacing registration
def test_a_head_with_its_face_is_still_defaced(tmp_path: Path) -> None:
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    src = tmp_path / "head.nii.gz"
    nib.save(nib.Nifti1Image(phantom.head("T1w", seed=3).astype(np.float32), phantom.AFFINE), src)
    res = process_series(SeriesTask("nifti", [str(src)], NormalizeParams(), str(tmp_path / "out"),
                                    str(tmp_path / "out"), "T1w"))
    assert res.ok, (res.reason, res.detail)
    deface = res.value.qc.deface
    assert deface is not None and deface.outcome == "defaced" and (deface.removed_voxels or 0) > 1000
