"""The two real MS pairs of ../shared/fixtures/lesions laid out as a BIDS dataset (raw sessions with their dates in
sessions.tsv, the expert change masks under derivatives/), through ingest (pybids), de-identification, normalize
and generation: each pair gives a lesion-change item whose two renders are the baseline and the registered
follow-up at the change, and the change lies on the expert's mask (within 3 mm), found without reading it.
Skipped when ../shared is absent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .factories import project_params, through_generate
from .test_change_real import WITHIN_MM, _distance_to_mask

LESIONS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "lesions"
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not (LESIONS / "README.md").is_file(),
                                                  reason="../shared/fixtures/lesions absent")]
PAIRS = {"01": "ms_long_patient01", "03": "ms_long_patient03"}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bids") / "ms-longitudinal"
    root.mkdir()
    (root / "dataset_description.json").write_text(json.dumps({
        "Name": "Longitudinal MS lesion change", "BIDSVersion": "1.8.0", "License": "CC-BY",
        "Authors": ["Lesjak Z", "Pernus F", "Likar B", "Spiclin Z"], "DatasetDOI": "10.1007/s12021-016-9301-1"}))
    (root / "participants.tsv").write_text("participant_id\tage\tsex\nsub-01\t35\tF\nsub-03\tn/a\tM\n")
    for sub, folder in PAIRS.items():
        src = LESIONS / folder
        days = {"1": "2010-03-02", "2": "2010-11-15"}
        (root / f"sub-{sub}").mkdir()
        (root / f"sub-{sub}" / f"sub-{sub}_sessions.tsv").write_text(
            "session_id\tacq_time\n" + "".join(f"ses-{s}\t{d}T10:00:00\n" for s, d in days.items()))
        for ses in days:
            anat = root / f"sub-{sub}" / f"ses-{ses}" / "anat"
            anat.mkdir(parents=True)
            shutil.copy(src / f"study{ses}_FLAIR.nii.gz", anat / f"sub-{sub}_ses-{ses}_FLAIR.nii.gz")
        deriv = root / "derivatives" / "experts" / f"sub-{sub}" / "anat"
        deriv.mkdir(parents=True)
        shutil.copy(src / "gt.nii.gz", deriv / f"sub-{sub}_desc-lesionchange_mask.nii.gz")
    return root


@pytest.fixture(scope="module")
def curated(dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    p = project_params()
    p.ingest.copy_files = True  # the dataset lies outside the work folder
    p.normalize.targets = []  # the change needs no anatomy fit
    return through_generate(p, "bids", dataset, tmp_path_factory.mktemp("bids-work"))


def test_a_bids_dataset_is_a_source_with_its_sessions_credit_and_derivatives_counted(curated: dict) -> None:
    cases = curated["ingested"]
    assert len(cases) == 2 and all(c.source.value == "bids" for c in cases)
    assert all([v.days_from_baseline for v in c.visits] == [0, 258] for c in cases)
    assert all(c.license == "CC-BY" and c.origin == "https://doi.org/10.1007/s12021-016-9301-1" for c in cases)
    assert all("Lesjak Z" in (c.attribution or "") and "Longitudinal MS" in (c.attribution or "") for c in cases)
    assert {(c.patient.sex, c.patient.age) for c in cases} == {("F", 35.0), ("M", None)}
    skipped = curated["reports"]["ingest"]["skipped_by_reason"]
    assert skipped.get("skipped:derivative_not_read") == 2, skipped
    assert not curated["reports"]["deid"]["failures_by_reason"], curated["reports"]["deid"]


def test_each_real_pair_gives_a_change_item_on_the_experts_change_mask(curated: dict) -> None:
    items = [i for i in curated["items"] if i.template_id == "lesion_change"]
    assert len(items) == 2, [i.template_id for i in curated["items"]]
    by_case = {c.case_id: c for c in curated["cases"]}
    for item in items:
        assert item.answer in ("a new lesion", "an enlarging lesion") and all(curated["images"][item.item_id])
        baseline, followup = item.evidence
        assert (baseline.position_mm, baseline.slice_index) == (followup.position_mm, followup.slice_index)
        case = by_case[item.case_id]
        series = next(s for s in case.all_series() if s.series_id == followup.series_id)
        change = series.qc.change
        patient = PAIRS["01" if case.patient.sex == "F" else "03"]
        assert change is not None and _distance_to_mask(change.centre_mm, patient) <= WITHIN_MM, change
