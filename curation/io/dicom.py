"""DICOM sniffing and checked reads.

A checked read never raises on a bad input: it answers with an :class:`~curation.report.Outcome` whose code is the
quarantine reason (``skipped:not_dicom``, ``dicom_truncated``, ``dicom_inflates_too_large``...).
"""

from __future__ import annotations

import shutil
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from curation.report import Outcome

DICM = b"DICM"
PREAMBLE = 128  # the DICM prefix follows a 128-byte preamble (PS3.10 7.1)
DICOMDIR_UID = "1.2.840.10008.1.3.10"
DEFLATED = "1.2.840.10008.1.2.1.99"
CHUNK = 1 << 20
NOT_DICOM = Outcome.skip("not_dicom", "no DICM preamble")
# a de-identified DICOM series is stored as one uncompressed zip of its instances: DVC hashes and checks one file
# per series instead of one per slice (its documentation's advice for many small files)
SERIES_ARCHIVE = ".zip"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the same files give the same archive bytes, so the same DVC hash


def has_dicm_prefix(head: bytes) -> bool:
    """Whether the first bytes of a file (at least 132) carry the DICM prefix after the preamble."""
    return len(head) >= PREAMBLE + 4 and head[PREAMBLE:PREAMBLE + 4] == DICM


def is_dicom(path: str | Path) -> bool:
    """A DICOM Part 10 file by its preamble (nothing else is read); an unreadable file raises ``OSError``."""
    with Path(path).open("rb") as fh:
        return has_dicm_prefix(fh.read(PREAMBLE + 4))


def default_max_inflated() -> int:
    from curation.params import Bounds

    return int(Bounds.model_fields["max_volume_bytes"].default)


def inflated_size_over(fh: IO[bytes], limit: int) -> int | None:
    """For a Deflated Explicit VR file: its inflated dataset size when over ``limit`` (counted by streaming, nothing
    kept), else None. pydicom inflates such a dataset whole in memory: a few MB on disk can declare GBs."""
    fh.seek(PREAMBLE + 4)
    tag = fh.read(8)
    if len(tag) < 8 or tag[:4] != b"\x02\x00\x00\x00":
        return None  # no group length: pydicom decides
    group_len = struct.unpack("<I", fh.read(4))[0]
    meta = fh.read(group_len)
    if DEFLATED.encode() not in meta:
        return None
    inflater, total = zlib.decompressobj(-zlib.MAX_WBITS), 0
    while not inflater.eof and (chunk := fh.read(CHUNK)):
        while chunk and not inflater.eof and total <= limit:
            total += len(inflater.decompress(chunk, CHUNK))
            chunk = inflater.unconsumed_tail
        if total > limit:
            return total
    return None


@dataclass(frozen=True)
class DicomHeader:
    """The header fields of a usable DICOM image file that ingest groups series by."""

    series_uid: str
    study_date: str
    description: str
    modality: str
    patient_id: str
    position: list[float] | None
    instance: int
    frames: int
    burned_in: str
    sop_class: str


def read_checked(path: str | Path, max_inflated: int | None = None) -> tuple[Any, Outcome[None]]:
    """Read a file once and check it is usable: ``(dataset, ok outcome)`` or ``(None, why not)``. A deflated dataset
    that would inflate past ``max_inflated`` bytes (default ``bounds.max_volume_bytes``) is refused unread."""
    limit = max_inflated if max_inflated is not None else default_max_inflated()
    return _read(path, limit)


def _read(path: str | Path, inflate_limit: int | None) -> tuple[Any, Outcome[None]]:
    """The one DICOM read: preamble, optional inflation bound (None: unchecked), pydicom, then the usability checks.
    A failure keeps the path as its raw input."""
    import pydicom
    from pydicom.errors import InvalidDicomError

    try:
        with Path(path).open("rb") as fh:
            if not has_dicm_prefix(fh.read(PREAMBLE + 4)):
                return None, NOT_DICOM.passed_on(str(path))
            if inflate_limit is not None:
                over = inflated_size_over(fh, inflate_limit)
                if over is not None:
                    return None, Outcome.failure(
                        "dicom_inflates_too_large",
                        f"deflated dataset inflates past {over} bytes (bound {inflate_limit})", str(path))
            fh.seek(0)
            try:
                ds = pydicom.dcmread(fh)
            except InvalidDicomError as exc:
                return None, Outcome.failure("dicom_invalid", str(exc), str(path))
            except Exception as exc:  # pydicom raises many types on broken files
                return None, Outcome.failure("dicom_unreadable", f"{type(exc).__name__}: {exc}", str(path))
    except OSError as exc:
        return None, Outcome.failure("unreadable", str(exc), str(path))
    info = check_dataset(ds)
    return (ds, info) if info.ok else (None, info.passed_on(str(path)))


def read_unbounded(path: str | Path) -> tuple[Any, Outcome[DicomHeader]]:
    """:func:`read_checked` without the inflation bound (ingest's header scan, which has never applied it), with
    the header fields."""
    ds, info = _read(path, None)
    if not info.ok:
        return None, info.passed_on()
    header = dicom_header(ds)
    return (ds, header) if header.ok else (None, header.passed_on(str(path)))


def check_dataset(ds: Any) -> Outcome[None]:
    """Whether a read dataset can be used, or why not (no meta, DICOMDIR, truncated pixels...)."""
    meta = getattr(ds, "file_meta", None)
    if meta is None or "TransferSyntaxUID" not in meta:
        return Outcome.failure("dicom_no_meta", "file meta information missing")
    if str(meta.get("MediaStorageSOPClassUID", "")) == DICOMDIR_UID:
        return Outcome.skip("dicomdir", "DICOMDIR index file")
    try:
        if "PixelData" not in ds:
            return Outcome.skip("no_pixel_data", "no PixelData (not an image)")
        if not meta.TransferSyntaxUID.is_compressed:
            frames = _number(ds, 0x00280008, 1) or 1  # NumberOfFrames
            expected = _number(ds, 0x00280010) * _number(ds, 0x00280011) * _number(ds, 0x00280002, 1) * frames * (
                _number(ds, 0x00280100) // 8
            )  # Rows, Columns, SamplesPerPixel, BitsAllocated
            pixels = ds.get_item("PixelData").value  # as read: the bytes stay undecoded
            if len(pixels) < expected:
                return Outcome.failure("dicom_truncated", f"pixel data has {len(pixels)} of {expected} bytes")
        return Outcome.success(None)
    except Exception as exc:
        return Outcome.failure("dicom_malformed", f"{type(exc).__name__}: {exc}")


def dicom_header(ds: Any) -> Outcome[DicomHeader]:
    """The header fields of a usable dataset, or ``dicom_malformed`` when one cannot be read."""
    try:
        ipp = ds.get("ImagePositionPatient")
        return Outcome.success(DicomHeader(
            series_uid=str(ds.get("SeriesInstanceUID", "")),
            study_date=str(ds.get("StudyDate", "") or ds.get("SeriesDate", "") or ""),
            description=str(ds.get("SeriesDescription", "") or ""),
            modality=str(ds.get("Modality", "") or ""),
            patient_id=str(ds.get("PatientID", "") or ""),
            position=[float(v) for v in ipp] if ipp else None,
            instance=int(ds.get("InstanceNumber", 0) or 0),
            frames=int(ds.get("NumberOfFrames", 1) or 1),
            burned_in=str(ds.get("BurnedInAnnotation", "") or ""),
            sop_class=str(ds.get("SOPClassUID", "")),
        ))
    except Exception as exc:
        return Outcome.failure("dicom_malformed", f"{type(exc).__name__}: {exc}")


def _number(ds: Any, tag: int, default: int | None = None) -> int:
    """A US or IS element's value, read from its bytes as stored when it is still undecoded (the element is then
    written back as it was read). A missing element without a default raises, as a missing attribute does."""
    elem = ds.get_item(tag)
    if elem is None or (elem.is_raw and not elem.value):
        if default is None:
            raise AttributeError(f"missing ({tag >> 16:04X},{tag & 0xFFFF:04X})")
        return default
    if elem.is_raw:
        value = elem.value
        if len(value) == 2 and elem.VR in ("US", None) and tag != 0x00280008:
            return struct.unpack("<H" if elem.is_little_endian else ">H", value)[0]
        if tag == 0x00280008:  # IS: ASCII digits
            return int(value.decode("ascii").strip(" \x00") or default or 0)
    value = ds[tag].value
    return default if value in (None, "") and default is not None else int(value)


def pack_series(folder: Path, names: list[str], archive: Path) -> None:
    """The files ``names`` of ``folder`` (one series) into one stored (uncompressed) zip at ``archive``, in that
    order, and ``folder`` removed (with anything else left in it)."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        for name in names:
            info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
            info.external_attr = 0o644 << 16
            zf.writestr(info, (folder / name).read_bytes())
    shutil.rmtree(folder)


@contextmanager
def unpacked_series(archive: str | Path) -> Iterator[list[str]]:
    """A packed series' files in a private temporary folder, named by position (a member's name is never used as
    a path), removed on exit. Only stored plain files are accepted: what is unpacked is what the archive holds."""
    with zipfile.ZipFile(archive) as zf, tempfile.TemporaryDirectory(prefix="series-") as tmp:
        members = zf.infolist()
        for m in members:
            if m.is_dir() or m.compress_type != zipfile.ZIP_STORED or m.file_size != m.compress_size:
                raise ValueError(f"{Path(archive).name}: member {m.filename!r} is not a stored file")
        if not members:
            raise ValueError(f"{Path(archive).name}: empty series archive")
        paths = []
        for k, m in enumerate(members, 1):
            out = Path(tmp) / f"{k:05d}.dcm"
            with zf.open(m) as src, out.open("wb") as dst:
                while chunk := src.read(CHUNK):
                    dst.write(chunk)
            paths.append(str(out))
        yield paths


def archive_members(archive: str | Path) -> Iterator[tuple[str, IO[bytes]]]:
    """(member name, open member) of each file of a packed series, in order (a reader, nothing written)."""
    with zipfile.ZipFile(archive) as zf:
        for m in zf.infolist():
            if not m.is_dir():
                with zf.open(m) as fh:
                    yield m.filename, fh
