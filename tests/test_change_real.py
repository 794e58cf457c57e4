"""Lesion change between visits on the two real MS pairs of ../shared/fixtures/lesions (clinical 2D FLAIR, months
apart, as acquired): the change is found without the expert change mask, which is read only here to check that the
change found lies on it (within 3 mm, mapped into the mask's space by the study's own ITK affine); a study against
itself, or against itself moved and resampled, shows no change. Skipped when ../shared is absent."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from curation.imaging.change import ChangeParams, change_between

LESIONS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "lesions"
pytestmark = pytest.mark.skipif(not (LESIONS / "README.md").is_file(), reason="../shared/fixtures/lesions absent")
WITHIN_MM = 3.0


def _distance_to_mask(centre_ras: list[float], patient: str) -> float:
    """mm from ``centre_ras`` (study 1's space) to the nearest voxel of the expert change mask."""
    import SimpleITK as sitk

    folder = LESIONS / patient
    to_common = sitk.ReadTransform(str(folder / "study1_FLAIR_to_common_space.txt"))  # common -> study (ITK, LPS)
    lps = np.array(to_common.GetInverse().TransformPoint(tuple(np.multiply(centre_ras, [-1, -1, 1]))))
    ras = lps * [-1, -1, 1]
    gt = nib.load(folder / "gt.nii.gz")
    vox = np.argwhere(np.asarray(gt.dataobj) > 0)
    pts = (gt.affine @ np.c_[vox, np.ones(len(vox))].T).T[:, :3]
    return float(np.min(np.linalg.norm(pts - ras, axis=1)))


@pytest.mark.parametrize("patient", ["ms_long_patient01", "ms_long_patient03"])
def test_the_largest_change_between_two_visits_lies_on_the_experts_change_mask(patient: str) -> None:
    base = nib.load(LESIONS / patient / "study1_FLAIR.nii.gz")
    follow = nib.load(LESIONS / patient / "study2_FLAIR.nii.gz")
    change, moved, _ = change_between(base, follow, ChangeParams())
    assert change is not None and moved.shape == base.shape
    assert change.kind in ("new", "enlarging") and change.volume_mm3 >= 30
    assert _distance_to_mask(change.centre_mm, patient) <= WITHIN_MM, change
    assert 0 <= change.slice_index < base.shape[2]


def test_a_study_against_itself_or_itself_moved_shows_no_change() -> None:
    import SimpleITK as sitk

    from curation.imaging.change import find_change
    from curation.imaging.sitk import to_sitk

    base = nib.load(LESIONS / "ms_long_patient01" / "study2_FLAIR.nii.gz")
    data = np.asarray(base.dataobj, dtype=np.float32)
    assert find_change(data, data, base.affine, ChangeParams()) is None
    # the same study turned 3 degrees and shifted 2 mm, resampled (linear) and registered back: interpolation and
    # registration alone make no change
    img = to_sitk(base)
    tx = sitk.Euler3DTransform(img.TransformContinuousIndexToPhysicalPoint([s / 2 for s in img.GetSize()]),
                               np.deg2rad(3.0), 0.0, np.deg2rad(2.0), (2.0, -1.0, 1.5))
    moved = sitk.Resample(img, img, tx, sitk.sitkLinear, 0.0, sitk.sitkFloat32)
    arr = sitk.GetArrayFromImage(moved).transpose(2, 1, 0)
    change, _, _ = change_between(base, nib.Nifti1Image(arr, base.affine), ChangeParams())
    assert change is None, change


def test_the_change_step_renders_baseline_and_follow_up_at_the_change(tmp_path: Path) -> None:
    """What the normalize stage runs per follow-up FLAIR: both visits rendered at the change's slice on the same
    grid, and the change recorded with its provenance."""
    from curation.imaging.change import ChangeTask, change_series
    from curation.params import NormalizeParams

    folder = LESIONS / "ms_long_patient01"
    job = ChangeTask(NormalizeParams(), str(folder / "study1_FLAIR.nii.gz"), str(folder / "study2_FLAIR.nii.gz"),
                     str(tmp_path), "files/case/s2", "s1", "v1")
    res = change_series(job)
    assert res.ok and res.value.change is not None
    renders = res.value.renders
    assert [r.role for r in renders] == ["change_baseline", "change"]
    assert len({(r.plane, r.slice_index, r.position_mm) for r in renders}) == 1
    assert all((tmp_path / Path(r.path).name).is_file() for r in renders)
    assert res.value.step.name == "lesion_change" and res.value.step.args["found"] == res.value.change.kind
