"""Resampling geometry and N4 bias-field correction."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from nibabel.processing import resample_to_output

from curation.imaging.steps.n4 import n4_correct
from curation.imaging.steps.resampling import resample_to_spacing

from .conftest import demo_subset


def _centre(img: nib.Nifti1Image, thr: float) -> np.ndarray:
    d = np.asarray(img.dataobj)
    idx = np.array(np.nonzero(d > thr)).mean(axis=1)
    return (img.affine @ np.append(idx, 1))[:3]


def test_resample_agrees_with_an_independent_reader_in_world_coordinates():
    aff = np.diag([1.2, 0.9, 2.0, 1.0])
    aff[:3, 3] = [-40, -50, -30]
    data = np.zeros((60, 80, 40), np.float32)
    data[20:30, 30:50, 10:20] = 100
    img = nib.Nifti1Image(data, aff)
    ours = resample_to_spacing(img, (1.0, 1.0, 1.0))
    ref = resample_to_output(img, voxel_sizes=(1, 1, 1), order=1)
    assert np.allclose(np.sqrt((ours.affine[:3, :3] ** 2).sum(axis=0)), 1.0)
    assert np.allclose(ours.affine[:3, 3], ref.affine[:3, 3])
    assert np.linalg.norm(_centre(ours, 50) - _centre(ref, 50)) < 0.6
    assert np.linalg.norm(_centre(ours, 50) - _centre(img, 50)) < 0.6


def test_n4_removes_a_smooth_bias_field():
    shape = (64, 64, 48)
    zz, yy, xx = np.meshgrid(*(np.linspace(-1, 1, n) for n in shape), indexing="ij")
    sphere = (zz**2 + yy**2 + xx**2) < 0.6
    bias = 1.0 + 0.4 * zz + 0.2 * yy  # smooth multiplicative field
    rng = np.random.default_rng(0)
    data = np.where(sphere, 500.0 * bias, 5.0) + rng.normal(0, 3, shape)
    img = nib.Nifti1Image(data.astype(np.float32), np.diag([2.0, 2.0, 2.0, 1.0]))
    out = np.asarray(n4_correct(img).dataobj)
    inner = (zz**2 + yy**2 + xx**2) < 0.4

    def cv(a: np.ndarray) -> float:
        return float(a[inner].std() / a[inner].mean())

    assert cv(out) < 0.5 * cv(data), (cv(data), cv(out))


@pytest.mark.integration  # ANTs registration
def test_register_series_lines_up_a_displaced_sequence(tmp_path):
    from curation.demo.phantom import CONTRAST, Lesion, head
    from curation.imaging.register import RegisterTask, register_series
    from curation.params import NormalizeParams

    aff = np.diag([1.0, 1.0, 1.0, 1.0])
    lesion = Lesion((0.36, 0.52, 0.58), 5.0)
    # padded, so the roll below shifts the whole head instead of wrapping its scalp round the field of view
    t1 = np.pad(head("T1w", atrophy=0.2, lesion=lesion, seed=1).astype(np.float32), 8)
    flair = np.pad(head("FLAIR", atrophy=0.2, lesion=lesion, seed=2).astype(np.float32), 8)
    moved = np.roll(flair, shift=(5, -4, 3), axis=(0, 1, 2))  # the patient moved between sequences
    fixed_p, moving_p = tmp_path / "t1" / "volume.nii.gz", tmp_path / "flair" / "volume.nii.gz"
    for path, data in ((fixed_p, t1), (moving_p, moved)):
        path.parent.mkdir()
        nib.save(nib.Nifti1Image(data, aff), str(path))
    task = RegisterTask(NormalizeParams(), str(fixed_p), str(moving_p), str(moving_p.parent), str(moving_p.parent),
                        reference="T1")
    res = register_series(task)
    assert res.ok, res
    out = np.asarray(nib.load(str(moving_p)).dataobj)
    thr = 0.8 * 8 * CONTRAST["FLAIR"]["lesion"]  # the lesion is the brightest thing on FLAIR (scalp is 95)
    before = np.array(np.nonzero(moved > thr)).mean(axis=1)
    after = np.array(np.nonzero(out > thr)).mean(axis=1)
    truth = np.array(np.nonzero(flair > thr)).mean(axis=1)
    assert np.linalg.norm(before - truth) > 6 and np.linalg.norm(after - truth) < 1.5, (before, after, truth)
    assert res.value.step.name == "register_rigid" and res.value.renders
    # deterministic: the same inputs give byte-identical renders
    first = {p.name: p.read_bytes() for p in moving_p.parent.glob("*.png")}
    nib.save(nib.Nifti1Image(moved, aff), str(moving_p))
    register_series(task)
    assert {p.name: p.read_bytes() for p in moving_p.parent.glob("*.png")} == first


def test_normalize_stage_registers_each_visit_to_its_t1(pipeline, tmp_path, monkeypatch):
    from curation.imaging.normalize import run
    from curation.jsonio import read_jsonl
    from curation.params import NormalizeParams
    from curation.schema import Case

    src = demo_subset(pipeline, "deid", tmp_path / "project")  # an ADNI participant: T1w and FLAIR at two visits
    monkeypatch.chdir(tmp_path / "project")
    report = run(NormalizeParams(register_to_t1=True), src, tmp_path / "norm", workers=2)
    cases = list(read_jsonl(tmp_path / "norm" / "cases.jsonl", Case))
    expected = [s for c in cases for v in c.visits if any(x.sequence == "T1w" for x in v.series)
                for s in v.series if s.sequence != "T1w" and s.nifti]
    assert expected and report.counts["series_registered"] == len(expected)
    for s in expected:
        # the last step that moved it (a lesion-change comparison with another visit comes after, moving nothing)
        moved = [st.name for st in s.provenance if st.name != "lesion_change"]
        assert moved[-1] == "register_rigid" and s.qc.registered_to
        assert all(Path(r.path).exists() for r in s.renders)


def test_process_series_sets_the_thread_count_and_restores_it(tmp_path):
    """A task's SimpleITK thread count holds while its steps run and is put back after (process-wide state)."""
    import SimpleITK as sitk

    from curation.demo.phantom import head
    from curation.imaging import normalize, steps
    from curation.imaging.steps.base import SeriesTask
    from curation.params import NormalizeParams

    path = tmp_path / "t1.nii.gz"
    nib.save(nib.Nifti1Image(head("T1w", seed=4).astype(np.float32), np.eye(4)), str(path))
    before = sitk.ProcessObject.GetGlobalDefaultNumberOfThreads()
    seen = []

    def spy(img, ctx):
        seen.append(sitk.ProcessObject.GetGlobalDefaultNumberOfThreads())
        return img, None

    task = SeriesTask("nifti", [str(path)], NormalizeParams(deface=False, key_slices=False),
                     str(tmp_path / "out"), str(tmp_path / "out"), "T1w", threads=before + 1)
    original = steps.STEPS
    steps.STEPS = (*original[:3], spy, *original[3:])
    try:
        res = normalize.process_series(task)
    finally:
        steps.STEPS = original
    assert res.ok, res
    assert seen == [before + 1] and sitk.ProcessObject.GetGlobalDefaultNumberOfThreads() == before
    assert [st.name for st in res.value.steps][0] == "to_canonical_ras"
    # a refusing step answers with its outcome, and the count is restored all the same
    bad = normalize.process_series(SeriesTask("nifti", [str(tmp_path / "none.nii.gz")], task.params,
                                              task.out_dir, task.final_dir, threads=before + 1))
    assert not bad.ok and bad.reason == "convert_failed"
    assert sitk.ProcessObject.GetGlobalDefaultNumberOfThreads() == before
