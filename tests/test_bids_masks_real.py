"""Lesion masks that come with a source are its truth: two real gliomas (BraTS: FLAIR and post-contrast T1, and a
post-contrast T1 alone) and a real MS patient (Ljubljana, FLAIR) laid out as a BIDS dataset with their expert masks
under derivatives/, through ingest, de-identification, normalize and generation. Each brain-only image passes as
face-free (the known lesion left out of the brain check) and its lesion render is placed by its own mask (no
finder): its slice cuts the mask where the mask is widest, its count and volume are the mask's, the side an item
keys is the side a person reads on the image, and the lobe it keys the lobe a neuroradiologist reads. A change mask,
and a mask on another voxel grid, are counted and left out. Skipped when ../shared is absent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from curation.schema import MASK_LOCATED

from .factories import project_params, through_generate

LESIONS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "lesions"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not (LESIONS / "README.md").is_file(),
                                                  reason="../shared/fixtures/lesions absent")]
# subject -> (fixture folder, {BIDS name: fixture file})
SUBJECTS = {"g05": ("brats_pat0005", {"FLAIR": "flair", "ce-gadolinium_T1w": "t1c"}),
            # a tumour of 217 mL whose mass effect hides the grey and white matter from the brain check
            "g06": ("brats_pat0006", {"ce-gadolinium_T1w": "t1c"}),
            "m07": ("ms_patient07", {"FLAIR": "flair"})}
# read on the image by a person, not by the code: brats_pat0005's tumour lies in the right hemisphere (the left of
# the image in radiological convention; the mask's voxels lie towards the patient's right of the brain's middle)
SIDE = {"g05": "right"}
# read on the volumes by a neuroradiologist's eye (a reviewer who had not seen the code), landmarks the Sylvian fissure,
# the central and parieto-occipital sulci: brats_pat0005's tumour is centred in the right inferior parietal lobule and
# reaches across the parieto-occipital sulcus (so "occipital lobe" is a second defensible answer on its slice, and no
# wrong option); brats_pat0006's is a left frontal mass. The MS patient's lesions are in many lobes: no lobe item.
LOBE = {"g05": "parietal lobe", "g06": "frontal lobe"}
NOT_OFFERED = {"g05": {"occipital lobe"}}
# a size is asked only on a sequence that shows the whole abnormality (not pat0006's post-contrast T1 alone) and where
# the slice holds one lesion (not the MS patient's)
SIZED = {"g05"}


@pytest.fixture(scope="module")
def curated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("bids-masks") / "lesions"
    root.mkdir()
    (root / "dataset_description.json").write_text(json.dumps({"Name": "Real lesions", "BIDSVersion": "1.8.0",
                                                               "License": "CC BY-NC-SA 3.0"}))
    for sub, (folder, files) in SUBJECTS.items():
        anat = root / f"sub-{sub}" / "anat"
        anat.mkdir(parents=True)
        for name, src in files.items():
            shutil.copy(LESIONS / folder / f"{src}.nii.gz", anat / f"sub-{sub}_{name}.nii.gz")
        deriv = root / "derivatives" / "experts" / f"sub-{sub}" / "anat"
        deriv.mkdir(parents=True)
        shutil.copy(LESIONS / folder / "mask.nii.gz", deriv / f"sub-{sub}_desc-lesion_mask.nii.gz")
    other = root / "derivatives" / "other" / "sub-g05" / "anat"
    other.mkdir(parents=True)
    # the MS patient's mask filed under the glioma patient: another voxel grid, so no image of that subject
    shutil.copy(LESIONS / "ms_patient07" / "mask.nii.gz", other / "sub-g05_label-lesion_mask.nii.gz")
    # a change between two sessions is no lesion of one image
    shutil.copy(LESIONS / "brats_pat0005" / "mask.nii.gz", other / "sub-g05_desc-lesionchange_mask.nii.gz")

    p = project_params()
    p.ingest.copy_files = True  # the dataset lies outside the work folder
    p.normalize.targets = ["lesion"]
    return through_generate(p, "bids", root, tmp_path_factory.mktemp("bids-masks-work"))


def _subjects(curated: dict) -> dict[str, str]:
    """Case id -> BIDS subject, read from the paths ingest stored its files under."""
    return {c.case_id: next(sub for sub in SUBJECTS for s in c.all_series() for f in s.files if f"sub-{sub}" in f)
            for c in curated["ingested"]}


def test_masks_go_with_their_images_and_other_derivatives_are_counted(curated: dict) -> None:
    skipped = curated["reports"]["ingest"]["skipped_by_reason"]
    assert skipped.get("skipped:derivative_not_read") == 1, skipped  # the change mask
    assert skipped.get("skipped:mask_unmatched") == 1, skipped  # the mask on another grid
    series = [s for c in curated["cases"] for s in c.all_series()]
    assert len(series) == 4 and all(s.lesion_mask for s in series), [(s.series_id, s.lesion_mask) for s in series]
    assert not curated["reports"]["deid"]["failures_by_reason"], curated["reports"]["deid"]


def test_the_lesion_render_lies_where_the_expert_mask_is_widest_with_its_count_and_volume(curated: dict) -> None:
    import nibabel as nib
    from scipy import ndimage

    subjects = _subjects(curated)
    for case in curated["cases"]:
        folder = SUBJECTS[subjects[case.case_id]][0]
        raw = nib.load(LESIONS / folder / "mask.nii.gz")
        mask = np.asarray(raw.dataobj) > 0
        area = mask.sum(axis=(0, 1))  # every fixture's third voxel axis runs inferior to superior
        volume = float(mask.sum()) * float(abs(np.linalg.det(raw.affine[:3, :3])))
        for s in case.all_series():
            placed = [t for t in s.qc.targets if t.target == "lesion"]
            assert placed and placed[0].located_by == MASK_LOCATED, (s.series_id, s.qc.anatomy)
            t = placed[0]
            k = int(round(float((np.linalg.inv(raw.affine) @ np.append(t.centre_mm, 1.0))[2])))
            assert area[k] >= 0.5 * area.max(), (s.series_id, k, int(area[k]), int(area.max()))
            assert t.total_mm3 is not None and abs(t.total_mm3 - volume) <= 0.02 * volume, (t.total_mm3, volume)
            parts, n = ndimage.label(mask, structure=np.ones((3, 3, 3), bool))
            assert t.count is not None and 1 <= t.count <= n
            assert any(r.role == "target" and r.target == "lesion" and r.slice_index == t.slice_index
                       for r in s.renders)


def test_the_side_an_item_keys_is_the_side_a_person_reads(curated: dict) -> None:
    items = [i for i in curated["items"] if i.template_id == "mask_lesion_laterality"]
    by_case = _subjects(curated)
    assert {by_case[i.case_id] for i in items} == set(SIDE), [(by_case[i.case_id], i.answer) for i in items]
    for item in items:
        assert item.answer == SIDE[by_case[item.case_id]] and all(curated["images"][item.item_id])
        assert set(item.options) == {"left", "right", "bilateral"}


def test_the_lobe_an_item_keys_is_the_lobe_a_neuroradiologist_reads(curated: dict) -> None:
    items = [i for i in curated["items"] if i.template_id == "mask_lesion_lobe"]
    by_case = _subjects(curated)
    assert {by_case[i.case_id]: i.answer for i in items} == LOBE
    for item in items:
        sub = by_case[item.case_id]
        assert all(curated["images"][item.item_id]) and item.answer in item.options and len(item.options) >= 3
        assert not NOT_OFFERED.get(sub, set()) & set(item.options), item.options


def test_the_size_an_item_keys_is_the_masks_widest_diameter_in_the_slice(curated: dict) -> None:
    """The key's band holds the mask's largest diameter on the item's slice, measured here by scikit-image's Feret
    diameter of the fixture's own mask, and the question states the field of view a reader needs for the scale."""
    import nibabel as nib
    from skimage.measure import regionprops

    items = [i for i in curated["items"] if i.template_id == "mask_lesion_size"]
    by_case = _subjects(curated)
    assert {by_case[i.case_id] for i in items} == SIZED, [(by_case[i.case_id], i.answer) for i in items]
    bands = [(10, "under 10 mm"), (30, "10 to 30 mm"), (50, "30 to 50 mm"), (9999, "over 50 mm")]
    for item in items:
        folder = SUBJECTS[by_case[item.case_id]][0]
        raw = nib.as_closest_canonical(nib.load(LESIONS / folder / "mask.nii.gz"))
        spacing = float(raw.header.get_zooms()[0])
        ev = item.evidence[0]
        cut = np.asarray(raw.dataobj)[:, :, ev.slice_index] > 0
        feret = max(r.feret_diameter_max for r in regionprops(cut.astype(np.uint8))) * spacing
        assert item.answer == next(label for bound, label in bands if feret < bound), (feret, item.answer)
        assert set(item.options) == {label for _, label in bands}
        assert f"spans {round(raw.shape[0] * spacing)} mm" in item.context, item.context
