"""The shared Outcome type and how a stage report takes it."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path

import pytest

from curation.paths import OUTSIDE_INPUT, walk_files
from curation.report import Kind, Outcome, Report


@dataclass(frozen=True)
class Shape:
    voxels: tuple[int, ...]


def _volume_outcome(n: int) -> Outcome[Shape]:
    return Outcome.success(Shape((n, n, n))) if n else Outcome.failure("volume_empty", "no voxels", n)


def test_outcome_kinds_and_the_reason_written() -> None:
    assert Outcome.success(Shape((2, 2, 2))).ok and Outcome.success(None).reason == ""
    assert Outcome.failure("dicom_truncated", "pixel data short").reason == "dicom_truncated"
    assert Outcome.skip("not_dicom").reason == "skipped:not_dicom"
    assert Outcome.incomplete("figure_missing").reason == "incomplete:figure_missing"
    # a failure code with a colon is a failure code, not a kind
    odd = Outcome.failure("edit_not_applied:answer_not_in_options")
    assert odd.kind is Kind.failed and odd.reason == "edit_not_applied:answer_not_in_options"


@pytest.mark.integration  # a process pool
def test_outcome_pickles_and_crosses_a_process_pool() -> None:
    from curation.deid.engine import Deidentified

    o = Outcome.success(Deidentified({"00100010": "D"}, values_checked=3))
    assert pickle.loads(pickle.dumps(o)) == o
    with ProcessPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(_volume_outcome, [2, 0]))
    assert got == [Outcome.success(Shape((2, 2, 2))), Outcome.failure("volume_empty", "no voxels", 0)]


def test_report_counts_by_kind_never_by_text() -> None:
    rep = Report(stage="t", inputs=4)
    assert rep.record("a", Outcome.success(None)) is True and not rep.quarantine
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


def test_a_failure_keeps_its_reason_and_input_and_has_no_value() -> None:
    bad = _volume_outcome(0)
    assert (bad.kind, bad.reason, bad.detail, bad.raw_input) == (Kind.failed, "volume_empty", "no voxels", 0)
    with pytest.raises(ValueError, match="volume_empty"):
        _ = bad.value
    # handed on by a step that cannot go on: kind, reason, detail and the first raw input kept
    on = bad.passed_on("the series")
    assert (on.kind, on.reason, on.detail, on.raw_input) == (Kind.failed, "volume_empty", "no voxels", 0)
    skipped = Outcome.skip("not_dicom", "no DICM preamble").passed_on("a.dcm")
    assert (skipped.reason, skipped.raw_input) == ("skipped:not_dicom", "a.dcm")
    assert OUTSIDE_INPUT.kind is Kind.failed and OUTSIDE_INPUT.reason == "outside_input" and not OUTSIDE_INPUT.ok
    with pytest.raises(ValueError, match="ok outcome"):
        _volume_outcome(2).passed_on()
    with pytest.raises(FrozenInstanceError):
        bad.code = "other"  # type: ignore[misc]
    # no dict reading left: an outcome is read by its attributes
    assert not hasattr(Outcome, "__getitem__") and not hasattr(Outcome, "get") and not hasattr(Outcome, "data")


def test_a_success_value_has_the_steps_declared_type(tmp_path: Path) -> None:
    """The producers answer with their own frozen result types; their failures keep the input they failed on."""
    import typing

    import nibabel as nib
    import numpy as np
    from PIL import Image

    from curation.imaging.figures import FigureResult, FigureTask, process_figure
    from curation.ingest.volumes import VolumeInfo, inspect_volume

    assert _volume_outcome(2).value == Shape((2, 2, 2))
    vol = tmp_path / "v.nii.gz"
    nib.save(nib.Nifti1Image(np.ones((4, 5, 6), np.float32), np.diag([2.0, 1.0, 1.0, 1.0])), vol)
    res = inspect_volume(str(vol))
    assert isinstance(res.value, VolumeInfo) and res.value == VolumeInfo((4, 5, 6), [2.0, 1.0, 1.0])
    assert typing.get_type_hints(inspect_volume)["return"] == Outcome[VolumeInfo]
    gone = inspect_volume(str(tmp_path / "none.nii.gz"))
    assert not gone.ok and gone.raw_input == str(tmp_path / "none.nii.gz")
    Image.new("L", (80, 90), 128).save(tmp_path / "f.png")
    task = FigureTask(str(tmp_path / "f.png"), 128, str(tmp_path / "out.png"), "final/out.png")
    fig = process_figure(task)
    assert isinstance(fig.value, FigureResult) and fig.value.qc.passed and fig.value.render.role == "figure"
    (tmp_path / "junk.png").write_bytes(b"not an image")
    junk = FigureTask(str(tmp_path / "junk.png"), 64, str(tmp_path / "j.png"), "final/j.png")
    bad = process_figure(junk)
    assert bad.reason == "image_unreadable" and bad.raw_input == junk


def test_a_dicom_scan_hands_on_the_io_layers_outcome() -> None:
    """ingest's scan answers with its own type (the I/O layer's header and more); a file the I/O layer refuses comes
    back as the I/O layer said, with the file as its raw input."""
    from pydicom.data import get_testdata_file

    from curation.ingest.dicomscan import ScannedDicom, inspect_dicom
    from curation.io.dicom import DicomHeader

    path = str(get_testdata_file("MR_small.dcm"))
    res = inspect_dicom(path)
    assert isinstance(res.value, ScannedDicom) and isinstance(res.value, DicomHeader)
    assert res.value.modality == "MR" and res.value.sop_uid
    not_dicom = inspect_dicom(__file__)
    assert (not_dicom.reason, not_dicom.raw_input) == ("skipped:not_dicom", __file__)


def test_walk_files_says_why_as_an_outcome(tmp_path: Path) -> None:
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "a.txt").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "inside")
    (tmp_path / "gone").symlink_to(tmp_path / "nothing")
    got = {p.name: o for p, o in walk_files(tmp_path)}
    assert got["a.txt"] is None
    assert got["link"].kind is Kind.skipped and got["link"].reason == "skipped:symlinked_folder"
    assert got["gone"].kind is Kind.failed and got["gone"].code == "broken_symlink"
