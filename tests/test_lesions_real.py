"""Lesion finding on real pathology, the expert masks withheld from the finder (../shared/fixtures/lesions/ and
heads/): on every glioma and MS patient the lesion render's axial slice cuts the expert mask where the mask's
cross-section is at least half of its largest; the healthy heads get no lesion; the stroke patient's infarct is
found. The mask is read only here, to check. Skipped when ../shared is absent."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import yaml

from curation.params import NormalizeParams

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures"
LESIONS, HEADS = FIXTURES / "lesions", FIXTURES / "heads"
pytestmark = [pytest.mark.integration,  # the anatomy fit (ANTs) of real volumes
              pytest.mark.skipif(not (LESIONS / "README.md").is_file() or not (HEADS / "README.md").is_file(),
                                 reason="../shared/fixtures/lesions or heads absent")]
MIN_CUT = 0.5  # the rendered slice's mask area over the mask's largest axial cross-section

# (FLAIR, expert mask, ITK affine mapping the FLAIR into the mask's space, or None where they share a grid)
PATIENTS = {
    "brats_pat0005": ("brats_pat0005/flair.nii.gz", "brats_pat0005/mask.nii.gz", None),
    "brats_pat0006": ("brats_pat0006/flair.nii.gz", "brats_pat0006/mask.nii.gz", None),
    "ms_patient07": ("ms_patient07/flair.nii.gz", "ms_patient07/mask.nii.gz", None),
    **{f"ms_long_patient{p}_study{s}": (f"ms_long_patient{p}/study{s}_FLAIR.nii.gz", f"ms_long_patient{p}/gt.nii.gz",
                                        f"ms_long_patient{p}/study{s}_FLAIR_to_common_space.txt")
       for p in ("01", "03") for s in (1, 2)},
}
NOT_YET = {  # measured at this commit; each xfail is strict, so a fix shows up as a failure to remove it here
    "ms_long_patient01_study1": "the change mask marks a lesion that is new at study 2: not yet on this FLAIR",
}


def _normalize(src: Path, sequence: str, out: Path) -> dict:
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    params = NormalizeParams.model_validate(yaml.safe_load((ROOT / "params.yaml").read_text())["normalize"])
    res = process_series(SeriesTask("nifti", [str(src)], params, str(out), str(out), sequence))
    assert res.ok, (src, res.reason, res.detail)
    # the QC record as the stage writes it (cases.jsonl)
    return {"qc": res.value.qc.model_dump(), "renders": res.value.renders, "volume": out / "volume.nii.gz"}


def _lesion(made: dict) -> dict | None:
    return next((t for t in made["qc"]["targets"] if t["target"] == "lesion"), None)


def _mask_on(volume: Path, mask: Path, transform: Path | None) -> np.ndarray:
    """The expert mask on the normalized volume's grid ([x, y, z]), through the study's affine where it has one (the
    file maps the mask's space onto the study: a point of the volume is sent back through its inverse)."""
    import SimpleITK as sitk

    ref, m = sitk.ReadImage(str(volume)), sitk.ReadImage(str(mask))
    tx = sitk.Transform() if transform is None else sitk.ReadTransform(str(transform)).GetInverse()
    out = sitk.Resample(sitk.Cast(m > 0, sitk.sitkUInt8), ref, tx, sitk.sitkNearestNeighbor, 0)
    return sitk.GetArrayFromImage(out).transpose(2, 1, 0) > 0


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=NOT_YET[n], strict=True))
                                  if n in NOT_YET else n for n in PATIENTS])
def test_lesion_slice_cuts_the_expert_mask(name: str, tmp_path: Path) -> None:
    flair, mask, transform = PATIENTS[name]
    made = _normalize(LESIONS / flair, "FLAIR", tmp_path / name)
    lesion = _lesion(made)
    assert lesion is not None, made["qc"]["anatomy"]["not_located"].get("lesion")
    assert lesion["plane"] == "axial" and lesion["count"] >= 1 and lesion["smallest_mm3"] <= lesion["largest_mm3"]
    area = _mask_on(made["volume"], LESIONS / mask, LESIONS / transform if transform else None).sum(axis=(0, 1))
    assert area.max() > 0
    cut = float(area[lesion["slice_index"]]) / float(area.max())
    assert cut >= MIN_CUT, (name, lesion, cut, int(np.argmax(area)))
    render = next(r for r in made["renders"] if r.target == "lesion")
    assert Path(render.path).is_file()


@pytest.mark.parametrize(("name", "sequence"), [("chris_PD", "PD"), ("register_t2w", "T2w")])
def test_no_lesion_in_a_healthy_head(name: str, sequence: str, tmp_path: Path) -> None:
    made = _normalize(HEADS / f"{name}.nii.gz", sequence, tmp_path / name)
    assert _lesion(made) is None, _lesion(made)


def test_the_stroke_patients_infarct_is_found_on_flair(tmp_path: Path) -> None:
    made = _normalize(HEADS / "stroke_FLAIR.nii.gz", "FLAIR", tmp_path / "stroke")
    lesion = _lesion(made)
    assert lesion is not None, made["qc"]["anatomy"]["not_located"].get("lesion")
    assert lesion["largest_centre_mm"][0] < 0, lesion  # a left-hemisphere infarct (RAS: x < 0)
    assert lesion["largest_mm3"] >= 500
    assert 0 <= lesion["slice_index"] < nib.load(made["volume"]).shape[2]
    assert Path(next(r for r in made["renders"] if r.target == "lesion").path).is_file()
