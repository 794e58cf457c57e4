"""Check that an Analyze/NIfTI volume is complete, and within bounds, before it is accepted."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curation.io.volumes import VolumeTooLarge, check_volume_header, volume_bytes
from curation.parallel import pmap
from curation.report import Outcome

if TYPE_CHECKING:
    from curation.ingest.base import IngestContext

CHUNK = 1 << 20


@dataclass(frozen=True)
class VolumeInfo:
    """What the check of a complete volume read from its header: its shape and voxel size (mm)."""

    shape: tuple[int, ...]
    zooms: list[float]


def _stream_length(path: Path, cap: int) -> int:
    """Bytes in a file, decompressed when it is gzip, read in chunks and never more than ``cap`` + 1."""
    total = 0
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:  # type: ignore[operator]
        while total <= cap:
            chunk = fh.read(min(CHUNK, cap + 1 - total))
            if not chunk:
                break
            total += len(chunk)
    return total


def inspect_volume(task: str | tuple[str, int | None]) -> Outcome[VolumeInfo]:
    """``task``: a path, or ``(path, max_bytes)``. The header is checked against the bound first; then the data
    stream is read through (bounded memory, capped) to prove the .img / gzip stream is complete. A failure keeps
    the path as its raw input."""
    path, max_bytes = (task, None) if isinstance(task, str) else task
    res = _inspect(path, max_bytes)
    return res if res.ok else res.passed_on(path)


def _inspect(path: str, max_bytes: int | None) -> Outcome[VolumeInfo]:
    import nibabel as nib

    try:
        img: Any = nib.load(path)
        shape = tuple(int(v) for v in img.shape)
        if any(s == 0 for s in shape) or not shape:
            return Outcome.failure("volume_empty", "no voxels")
        try:
            check_volume_header(img, max_bytes)
        except VolumeTooLarge as exc:
            return Outcome.failure("volume_too_large", str(exc))
        need = volume_bytes(img)
        if path.endswith(".hdr"):
            data_file, offset = Path(path).with_suffix(".img"), 0
        else:
            data_file, offset = Path(path), int(img.header.get_data_offset())
        have = _stream_length(data_file, offset + need)
        if have < offset + need:
            return Outcome.failure("volume_unreadable",
                                   f"truncated: {data_file.name} holds {max(0, have - offset)} of {need} data bytes")
        return Outcome.success(VolumeInfo(shape, [float(z) for z in img.header.get_zooms()[:3]]))
    except FileNotFoundError as exc:
        return Outcome.failure("volume_missing_part", str(exc))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        return Outcome.failure("volume_unreadable", f"truncated: {type(exc).__name__}: {exc}")
    except Exception as exc:
        return Outcome.failure("volume_unreadable", f"{type(exc).__name__}: {exc}")


def volumes_by_session(ctx: IngestContext, paths: list[str]) -> dict[str, list[tuple[str, VolumeInfo]]]:
    """Each volume checked (in parallel, within ``bounds.max_volume_bytes``) and counted as an input; the complete
    ones grouped by their session folder (the first part of their path under the raw folder), the rest
    quarantined."""
    by_session: dict[str, list[tuple[str, VolumeInfo]]] = {}
    tasks = [(p, ctx.bounds.max_volume_bytes) for p in paths]
    for path, info in zip(paths, pmap(inspect_volume, tasks, workers=ctx.workers, scheduler=ctx.scheduler),
                          strict=True):
        ctx.report.inputs += 1
        if ctx.report.record(ctx.rel_raw(Path(path)), info):
            by_session.setdefault(Path(path).relative_to(ctx.raw).parts[0], []).append((path, info.value))
    return by_session
