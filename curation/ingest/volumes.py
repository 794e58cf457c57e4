"""Check that an Analyze/NIfTI volume is complete, and within bounds, before it is accepted."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


class VolumeTooLarge(ValueError):
    """A volume whose header promises more decoded bytes than ``bounds.max_volume_bytes``."""


def volume_bytes(img: Any) -> int:
    """Decoded voxel bytes of a nibabel image, from its header alone (nothing is read)."""
    import numpy as np

    shape = tuple(int(v) for v in img.header.get_data_shape())
    return int(np.prod(shape, dtype=np.float64)) * int(img.header.get_data_dtype().itemsize)


def check_volume_header(img: Any, max_bytes: int | None) -> None:
    if max_bytes is None:
        return
    n = volume_bytes(img)
    if n > max_bytes:
        raise VolumeTooLarge(f"header promises {n} decoded bytes (shape {tuple(img.header.get_data_shape())}), "
                             f"over bounds.max_volume_bytes {max_bytes}")


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


def inspect_volume(task: str | tuple[str, int | None]) -> dict[str, Any]:
    """``task``: a path, or ``(path, max_bytes)``. The header is checked against the bound first; then the data
    stream is read through (bounded memory, capped) to prove the .img / gzip stream is complete."""
    import nibabel as nib

    path, max_bytes = (task, None) if isinstance(task, str) else task
    try:
        img: Any = nib.load(path)
        shape = tuple(int(v) for v in img.shape)
        if any(s == 0 for s in shape) or not shape:
            return {"ok": False, "reason": "volume_empty", "detail": "no voxels"}
        try:
            check_volume_header(img, max_bytes)
        except VolumeTooLarge as exc:
            return {"ok": False, "reason": "volume_too_large", "detail": str(exc)}
        need = volume_bytes(img)
        if path.endswith(".hdr"):
            data_file, offset = Path(path).with_suffix(".img"), 0
        else:
            data_file, offset = Path(path), int(img.header.get_data_offset())
        have = _stream_length(data_file, offset + need)
        if have < offset + need:
            return {"ok": False, "reason": "volume_unreadable",
                    "detail": f"truncated: {data_file.name} holds {max(0, have - offset)} of {need} data bytes"}
        return {"ok": True, "shape": shape, "zooms": [float(z) for z in img.header.get_zooms()[:3]]}
    except FileNotFoundError as exc:
        return {"ok": False, "reason": "volume_missing_part", "detail": str(exc)}
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        return {"ok": False, "reason": "volume_unreadable", "detail": f"truncated: {type(exc).__name__}: {exc}"}
    except Exception as exc:
        return {"ok": False, "reason": "volume_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
