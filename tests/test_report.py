"""The shared Outcome type and how a stage report takes it."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from curation.paths import OUTSIDE_INPUT, walk_files
from curation.report import Kind, Outcome, Report


def _volume_outcome(n: int) -> Outcome:
    return Outcome.success(shape=(n, n, n)) if n else Outcome.failure("volume_empty", "no voxels")


def test_outcome_kinds_and_the_reason_written() -> None:
    assert Outcome.success(shape=(2, 2, 2)).ok and Outcome.success().reason == ""
    assert Outcome.failure("dicom_truncated", "pixel data short").reason == "dicom_truncated"
    assert Outcome.skip("not_dicom").reason == "skipped:not_dicom"
    assert Outcome.incomplete("figure_missing").reason == "incomplete:figure_missing"
    # a failure code with a colon is a failure code, not a kind
    odd = Outcome.failure("edit_not_applied:answer_not_in_options")
    assert odd.kind is Kind.failed and odd.reason == "edit_not_applied:answer_not_in_options"


@pytest.mark.integration  # a process pool
def test_outcome_pickles_and_crosses_a_process_pool() -> None:
    o = Outcome.success(actions={"00100010": "D"}, values_checked=3)
    assert pickle.loads(pickle.dumps(o)) == o
    with ProcessPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(_volume_outcome, [2, 0]))
    assert got == [Outcome.success(shape=(2, 2, 2)), Outcome.failure("volume_empty", "no voxels")]


def test_report_counts_by_kind_never_by_text() -> None:
    rep = Report(stage="t", inputs=4)
    assert rep.record("a", Outcome.success()) is True and not rep.quarantine
    assert rep.record("b", Outcome.failure("edit_not_applied:duplicate_options", "kept as generated")) is False
    rep.record("c", Outcome.skip("not_dicom", "no DICM preamble"))
    rep.record("d", Outcome.incomplete("figure_missing", "no file"))
    rep.fail("e", "unreadable", "x")
    rep.skip("f", "dicomdir")
    d = rep.as_dict()
    assert d["failures_by_reason"] == {"edit_not_applied:duplicate_options": 1, "unreadable": 1}
    assert d["skipped_by_reason"] == {"skipped:dicomdir": 1, "skipped:not_dicom": 1}
    assert d["incomplete_by_reason"] == {"incomplete:figure_missing": 1}
    assert d["failed"] == 2 and d["failure_rate"] == 0.5
    assert "skipped dicomdir=1, not_dicom=1" in rep.summary() and "incomplete figure_missing=1" in rep.summary()
    assert [q.reason for q in rep.quarantine if q.path == "c"] == ["skipped:not_dicom"]


def test_dict_era_readers_still_work() -> None:
    """imaging/normalize.py reads OUTSIDE_INPUT like the dict it was, and answers with dicts that the CLI coerces."""
    assert OUTSIDE_INPUT["ok"] is False and OUTSIDE_INPUT["reason"] == "outside_input" and OUTSIDE_INPUT
    assert Outcome.success(nifti="a.nii.gz")["nifti"] == "a.nii.gz"
    assert Outcome.from_result({"ok": True, "renders": [1]}) == Outcome.success(renders=[1])
    assert Outcome.from_result({"ok": False, "reason": "volume_blank", "detail": "flat"}) == \
        Outcome.failure("volume_blank", "flat")


def test_walk_files_says_why_as_an_outcome(tmp_path: Path) -> None:
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "a.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "inside")
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    got = {p.name: o for p, o in walk_files(tmp_path)}
    assert got["a.txt"] is None
    assert got["link"].kind is Kind.skipped and got["link"].reason == "skipped:symlinked_folder"
    assert got["gone"].kind is Kind.failed and got["gone"].code == "broken_symlink"
