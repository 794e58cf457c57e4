"""A BIDS dataset as a source, on inputs made to break it: an unreadable volume is quarantined with its reason and
the rest kept; a symlink out of the dataset is never read; a malformed description, participants table or
session date leaves the credit, age or interval unknown, never a crash."""

from __future__ import annotations

import json
import os
from pathlib import Path

import nibabel as nib
import numpy as np

from curation.ingest import run
from curation.jsonio import read_jsonl
from curation.params import IngestParams
from curation.schema import Case


def _volume(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.zeros((8, 8, 8), np.int16), np.eye(4)), str(path))


def test_bad_parts_of_a_bids_dataset_are_quarantined_or_left_unknown(tmp_path: Path) -> None:
    raw = tmp_path / "ds"
    _volume(raw / "sub-01" / "ses-a" / "anat" / "sub-01_ses-a_T1w.nii.gz")
    _volume(raw / "sub-01" / "ses-b" / "anat" / "sub-01_ses-b_FLAIR.nii.gz")
    (raw / "sub-01" / "ses-b" / "anat" / "sub-01_ses-b_T2w.nii.gz").write_bytes(b"not a volume")
    outside = tmp_path / "secret.nii.gz"
    _volume(outside)
    (raw / "sub-02" / "anat").mkdir(parents=True)
    os.symlink(outside, raw / "sub-02" / "anat" / "sub-02_T1w.nii.gz")
    (raw / "participants.tsv").write_text("participant_id\tage\tsex\nsub-01\tforty\tF\n")
    (raw / "sub-01" / "sub-01_sessions.tsv").write_text("session_id\tacq_time\nses-a\t2020-01-01\nses-b\tlater\n")
    (raw / "dataset_description.json").write_text(json.dumps({"Name": ["x"], "Authors": "A B", "DatasetDOI": 5}))
    report = run(IngestParams(max_failure_rate=0.9, copy_files=True), "bids", raw, tmp_path / "out").as_dict()
    cases = list(read_jsonl(tmp_path / "out" / "cases.jsonl", Case))
    assert len(cases) == 1
    (case,) = cases
    assert sorted(s.sequence or "" for s in case.all_series()) == ["FLAIR", "T1w"]
    assert case.patient.sex == "F" and case.patient.age is None
    assert [v.days_from_baseline for v in case.visits] == [0, None]
    assert case.origin == "ds" and case.license == "not stated in dataset_description.json"
    assert report["failures_by_reason"] == {"volume_unreadable": 1, "outside_raw": 1}, report
    assert report["skipped_by_reason"] == {"skipped:acq_time_unreadable": 1}, report
