"""A de-identified DICOM series stored as one zip (what the deidentify stage writes, so that DVC hashes one file per
series): built from a real scanner series, it converts to the same volume as the loose files, the verifiers read
inside it and find what is planted there, and a hostile archive is refused or kept inside its temporary folder."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pydicom
import pytest

from curation.deid.compare import verify_against
from curation.deid.dicom import deidentify_file
from curation.deid.verify import verify_dir
from curation.imaging.convert import convert_path, load_volume
from curation.io.dicom import pack_series, unpacked_series
from curation.params import DicomDeidParams
from tests.dicom_cases import FIXTURES

SERIES = FIXTURES / "siemens-xa30" / "10001_gre_field_mapping"
needs_fixtures = pytest.mark.skipif(not SERIES.is_dir(), reason="../shared/fixtures/dicom-real absent")


def _deidentified(tmp_path: Path) -> tuple[Path, list[Path], list[str]]:
    """The real series de-identified slice by slice into a folder, named by position as the stage names them."""
    folder = tmp_path / "out" / "s1"
    folder.mkdir(parents=True)
    sources = sorted(SERIES.glob("*.dcm"))
    names = []
    for n, src in enumerate(sources, 1):
        name = f"{n:05d}.dcm"
        assert deidentify_file(str(src), str(folder / name), DicomDeidParams(), b"k", "p", "adni-aaaaaaaaaaaa").ok
        names.append(name)
    return folder, sources, names


@needs_fixtures
def test_packed_series_converts_like_its_files(tmp_path: Path) -> None:
    folder, _, names = _deidentified(tmp_path)
    loose, _ = load_volume("dicom", [str(folder / n) for n in names])
    pack_series(folder, names, folder.with_name("s1.zip"))
    assert not folder.exists()
    packed, info = load_volume("dicom", [str(folder.with_name("s1.zip"))])
    assert info.n_files == len(names)
    assert np.array_equal(np.asanyarray(loose.dataobj), np.asanyarray(packed.dataobj))
    assert np.allclose(loose.affine, packed.affine)
    again, _ = convert_path(folder.with_name("s1.zip"))  # `curate imaging convert` takes the archive too
    assert np.array_equal(np.asanyarray(again.dataobj), np.asanyarray(packed.dataobj))
    # the same files give the same bytes (the same DVC hash on every rerun)
    other, _, _ = _deidentified(tmp_path / "again")
    pack_series(other, names, other.with_name("s1.zip"))
    assert other.with_name("s1.zip").read_bytes() == folder.with_name("s1.zip").read_bytes()


@needs_fixtures
def test_verifiers_read_inside_the_archive(tmp_path: Path) -> None:
    folder, sources, names = _deidentified(tmp_path)
    archive = folder.with_name("s1.zip")
    pack_series(folder, names, archive)
    out = archive.parent
    assert verify_dir(out) == []
    result = verify_against(out, SERIES, b"k")  # paired with the real inputs by remapped SOP Instance UID
    assert result.findings == [] and result.checked > 0
    # a name planted back into one member is found there, named by archive and member
    with zipfile.ZipFile(archive) as zf:
        members = {m: zf.read(m) for m in zf.namelist()}
    ds = pydicom.dcmread(io.BytesIO(members[names[1]]))
    ds.PatientName = "BOUVIER^JACQUELINE"
    ds.StudyInstanceUID = pydicom.dcmread(sources[1], stop_before_pixels=True).StudyInstanceUID  # the input's own
    buf = io.BytesIO()
    ds.save_as(buf)
    members[names[1]] = buf.getvalue()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    assert ("s1.zip/00002.dcm", "person name present") in {(f.path, f.kind) for f in verify_dir(out)}
    assert any(f.path == "s1.zip/00002.dcm" for f in verify_against(out, SERIES, b"k").findings or [])


@needs_fixtures
def test_hostile_archives(tmp_path: Path) -> None:
    one = next(SERIES.glob("*.dcm")).read_bytes()
    escape = tmp_path / "work" / "escape.zip"
    escape.parent.mkdir()
    with zipfile.ZipFile(escape, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("../../escape.dcm", one)
    with unpacked_series(escape) as paths:  # a member's name is never a path: files are named by position
        assert [Path(p).name for p in paths] == ["00001.dcm"]
        assert all(Path(p).parent != escape.parent for p in paths)
    assert not (tmp_path / "escape.dcm").exists() and sorted(escape.parent.iterdir()) == [escape]
    deflated = tmp_path / "deflated.zip"
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as zf:  # a compressed member could inflate past
        zf.writestr("00001.dcm", one)                                   # any bound: refused unread
    with pytest.raises(ValueError, match="deflated.zip: member '00001.dcm' is not a stored file"):
        load_volume("dicom", [str(deflated)])
    with pytest.raises(ValueError, match="one archive"):
        load_volume("dicom", [str(escape), str(deflated)])
    not_zip = tmp_path / "not.zip"
    not_zip.write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(zipfile.BadZipFile):
        load_volume("dicom", [str(not_zip)])
