"""Defacing: the face and ears go, the brain stays, the result is the same on every run, bad volumes are refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from typer.testing import CliRunner

import curation.demo.phantom as phantom
from curation.cli import app
from curation.imaging.deface import DefaceError, deface_file

pytestmark = pytest.mark.integration  # the defacing fit: a SimpleITK registration of the template to the head


def _affine() -> np.ndarray:
    return phantom.AFFINE.copy()


@pytest.fixture(scope="module")
def head_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("deface")
    vol = phantom.head("T1w", lesion=phantom.Lesion((0.36, 0.52, 0.58), 4.8), seed=11)
    nib.save(nib.Nifti1Image(vol, _affine()), d / "t1.nii.gz")
    nib.save(nib.Nifti1Image(phantom.brain_mask().astype(np.uint8), _affine()), d / "brain.nii.gz")
    return {"t1": d / "t1.nii.gz", "brain": d / "brain.nii.gz", "dir": d}


def test_face_removed_brain_untouched(head_files: dict[str, Path]) -> None:
    out = head_files["dir"] / "out" / "t1_defaced.nii.gz"
    report = deface_file(head_files["t1"], out, brain_mask=head_files["brain"])
    src, dst = nib.load(head_files["t1"]), nib.load(out)
    v, o = np.asarray(src.dataobj), np.asarray(dst.dataobj)
    assert o.dtype == v.dtype and o.shape == v.shape and np.array_equal(dst.affine, src.affine)
    assert report["brain_check"] == "passed" and report["brain_voxels_removed"] == 0
    assert report["removed_voxels"] >= int(((o == 0) & (v != 0)).sum()) > 0
    brain = phantom.brain_mask()
    assert np.array_equal(o[brain], v[brain])  # not one brain voxel changed
    kept = o != 0
    assert np.array_equal(o[kept], v[kept])  # what is kept is unchanged
    parts = phantom.face_parts()  # the demo head's face: MNI152 brain inside a synthetic head (see phantom.py)
    tissue = v > 0
    z_mm = (phantom.AFFINE @ np.vstack([np.zeros((2, phantom.SHAPE[2])), np.arange(phantom.SHAPE[2]),
                                        np.ones(phantom.SHAPE[2])]))[2]
    lower_face = parts["front"] & (z_mm[None, None, :] < -40.0)  # in front of the brain, below the orbits
    assert (o[lower_face & tissue] == 0).mean() > 0.95  # nose, cheeks, lips, chin
    assert (o[parts["nose"] & tissue] == 0).mean() > 0.85


def test_same_output_on_every_run(head_files: dict[str, Path]) -> None:
    a, b = head_files["dir"] / "a.nii.gz", head_files["dir"] / "b.nii.gz"
    deface_file(head_files["t1"], a)
    deface_file(head_files["t1"], b)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_real_head_template_moved_by_a_known_transform(tmp_path: Path) -> None:
    """A real head (the template itself), turned and shifted and resampled to another grid: the removed region must
    match the template's face mask carried by the same known transform."""
    import SimpleITK as sitk

    from curation.imaging import deface as d

    head, remove, _ = d._template_masks()
    tx = sitk.Euler3DTransform()
    tx.SetCenter(head.TransformContinuousIndexToPhysicalPoint([s / 2 for s in head.GetSize()]))
    tx.SetRotation(0.12, -0.06, 0.08)
    tx.SetTranslation([6.0, -9.0, 4.0])
    ref = sitk.Image([150, 200, 190], sitk.sitkFloat32)
    ref.SetSpacing([1.2, 1.2, 1.2])
    ref.SetOrigin([90.0, 125.0, -120.0])
    ref.SetDirection([-1, 0, 0, 0, -1, 0, 0, 0, 1])
    subject = sitk.Resample(head, ref, tx, sitk.sitkLinear, 0.0)
    truth = d._to_grid(remove, ref, tx, 0.0) >= 0.5
    sitk.WriteImage(subject, str(tmp_path / "subject.nii.gz"))
    report = deface_file(tmp_path / "subject.nii.gz", tmp_path / "out.nii.gz")
    assert report["brain_check"] == "no brain mask given" and report["head_dice"] > 0.9
    o = np.asarray(nib.load(tmp_path / "out.nii.gz").dataobj)
    s = np.asarray(nib.load(tmp_path / "subject.nii.gz").dataobj)
    removed = (o == 0) & (s != 0)
    truth_xyz = truth & (s != 0)
    dice = 2 * (removed & truth_xyz).sum() / (removed.sum() + truth_xyz.sum())
    assert dice > 0.9, dice


def test_refused_when_a_removed_voxel_lies_in_the_brain_mask(head_files: dict[str, Path]) -> None:
    mask = head_files["dir"] / "all_brain.nii.gz"
    nib.save(nib.Nifti1Image(np.ones(phantom.SHAPE, np.uint8), _affine()), mask)
    out = head_files["dir"] / "refused.nii.gz"
    with pytest.raises(DefaceError, match="inside the brain mask"):
        deface_file(head_files["t1"], out, brain_mask=mask)
    assert not out.exists() and not list(head_files["dir"].glob(".refused*"))


def test_cli(head_files: dict[str, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["deid", "deface", str(head_files["t1"]), str(tmp_path / "o.nii.gz"),
                             "--brain-mask", str(head_files["brain"])])
    assert ok.exit_code == 0, ok.output
    assert '"brain_voxels_removed": 0' in ok.output
    bad = tmp_path / "broken.nii.gz"
    bad.write_bytes(b"\x1f\x8b not really gzip")
    res = runner.invoke(app, ["deid", "deface", str(bad), str(tmp_path / "x.nii.gz")])
    assert res.exit_code == 3 and "Traceback" not in res.output
    assert res.output.strip().count("\n") == 0 and str(bad) in res.output
    flat = tmp_path / "flat.nii.gz"
    nib.save(nib.Nifti1Image(np.ones((64, 64, 3), np.float32), np.eye(4)), flat)
    res = runner.invoke(app, ["deid", "deface", str(flat), str(tmp_path / "y.nii.gz")])
    assert res.exit_code == 3 and "not a 3D head volume" in res.output
