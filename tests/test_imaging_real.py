"""Real scanner files: a Philips Enhanced MR multi-frame MPRAGE and a Siemens diffusion mosaic, both from the test
data that ships inside the nibabel wheel. Each must convert with the same world geometry and voxel values as an
independent converter (the dcm2niix binary). Their distributor blanked the pixels, so each is converted twice: as
shipped (geometry, straight from the .gz through the command line) and with its pixel data filled with known random
values, which must land in the same voxels as dcm2niix puts them (tile order, frame order, flips)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from typer.testing import CliRunner

from curation.cli import app

DATA = Path(nib.__file__).parent / "nicom" / "tests" / "data"
FILES = {"enhanced": DATA / "philips_mprage.dcm.gz", "mosaic": DATA / "siemens_dwi_1000.dcm.gz"}
pytestmark = [pytest.mark.integration,  # dcm2niix in a subprocess
              pytest.mark.skipif(not all(p.exists() for p in FILES.values()),
                                 reason="this nibabel wheel ships no DICOM test files")]


def _dcm2niix(dcm: Path, out: Path) -> nib.Nifti1Image:
    exe = shutil.which("dcm2niix") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "dcm2niix")
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([exe, "-z", "y", "-b", "n", "-f", "ref", "-o", str(out), str(dcm)], check=True,
                   capture_output=True, timeout=300)
    (nii,) = sorted(out.glob("ref*.nii.gz"))
    return nib.load(nii)


def _same_world(ours: nib.Nifti1Image, ref: nib.Nifti1Image) -> np.ndarray:
    """Our voxels reordered into the reference's voxel grid; asserts the grids are the same points in space."""
    m = np.linalg.inv(ref.affine) @ ours.affine
    perm = np.round(m[:3, :3])
    assert np.allclose(m[:3, :3], perm, atol=1e-3), m  # a signed permutation: same spacing and axes
    assert np.allclose(m[:3, 3], np.round(m[:3, 3]), atol=0.05), m  # voxel centres coincide
    data = np.asarray(ours.dataobj, dtype=np.float64)
    axes = [int(np.argmax(np.abs(perm[r]))) for r in range(3)]
    data = data.transpose(axes)
    for r in range(3):
        if perm[r, axes[r]] < 0:
            data = np.flip(data, axis=r)
    assert data.shape == ref.shape[:3]
    return data


@pytest.mark.parametrize("filled", [False, True], ids=["as-shipped", "filled"])
@pytest.mark.parametrize("kind", ["enhanced", "mosaic"])
def test_real_file_converts_like_dcm2niix(kind: str, filled: bool, tmp_path: Path) -> None:
    import pydicom

    dcm = tmp_path / "in.dcm"
    with gzip.open(FILES[kind], "rb") as fin, dcm.open("wb") as fout:
        shutil.copyfileobj(fin, fout)
    src = FILES[kind]
    if filled:
        ds = pydicom.dcmread(dcm)
        shape = ds.pixel_array.shape
        ds.PixelData = np.random.default_rng(7).integers(1, 4000, size=shape, dtype=np.uint16).tobytes()
        ds.save_as(dcm)
        src = dcm
    ref = _dcm2niix(dcm, tmp_path / "dcm2niix")
    out = tmp_path / "ours.nii.gz"
    res = CliRunner().invoke(app, ["imaging", "convert", str(src), str(out)])
    assert res.exit_code == 0, res.output
    ours = nib.load(out)
    assert "".join(nib.aff2axcodes(ours.affine)) == "RAS"
    mine = _same_world(ours, ref)
    theirs = np.asarray(ref.dataobj, dtype=np.float64)
    if theirs.ndim == 4:
        theirs = theirs[..., 0]
    if filled:  # same values in the same voxels (up to a rescale slope one reader applies and the other stores)
        assert mine.std() > 0 and np.corrcoef(mine.ravel(), theirs.ravel())[0, 1] > 0.99999
    else:
        assert not theirs.any() and not mine.any()
    if kind == "mosaic":
        assert ours.shape == (128, 128, 48)
        assert np.allclose(ours.header.get_zooms()[:3], (1.796875, 1.796875, 3.0), atol=0.01)
    else:
        assert sorted(ours.shape) == [176, 256, 256]
