"""Analyze and NIfTI volumes: which file names one, its header's size bound, and the one NIfTI writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curation.records import write_bytes

# the file of an Analyze (.hdr, beside its .img) or NIfTI volume that names it
VOLUME_SUFFIXES = (".nii.gz", ".nii", ".hdr")


class VolumeTooLarge(ValueError):
    """A volume whose header promises more decoded bytes than ``bounds.max_volume_bytes``."""


def volume_bytes(img: Any) -> int:
    """Decoded voxel bytes of a nibabel image, from its header alone (nothing is read)."""
    import numpy as np

    shape = tuple(int(v) for v in img.header.get_data_shape())
    return int(np.prod(shape, dtype=np.float64)) * int(img.header.get_data_dtype().itemsize)


def check_volume_header(img: Any, max_bytes: int | None) -> None:
    """Raise :class:`VolumeTooLarge` when the header promises more than ``max_bytes`` decoded bytes."""
    if max_bytes is None:
        return
    n = volume_bytes(img)
    if n > max_bytes:
        raise VolumeTooLarge(f"header promises {n} decoded bytes (shape {tuple(img.header.get_data_shape())}), "
                             f"over bounds.max_volume_bytes {max_bytes}")


def save_nifti(img: Any, path: str | Path) -> None:
    """Write a single-file NIfTI atomically. ``.nii.gz`` is compressed with ISA-L (the gzip format at level 1, about
    8x faster than zlib's level 1 for the same size) and a zero timestamp, so equal volumes give equal bytes."""
    import nibabel as nib
    import numpy as np

    if not isinstance(img, nib.Nifti1Image | nib.Nifti2Image):
        img = nib.Nifti1Image(np.asanyarray(img.dataobj), img.affine)
    raw = img.to_bytes()
    if Path(path).name.endswith(".gz"):
        from isal import igzip

        raw = igzip.compress(raw, compresslevel=1, mtime=0)
    write_bytes(path, raw)
