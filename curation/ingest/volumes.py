"""Check that an Analyze/NIfTI volume is complete before it is accepted."""

from __future__ import annotations

from typing import Any


def inspect_volume(path: str) -> dict[str, Any]:
    import nibabel as nib
    import numpy as np

    try:
        img = nib.load(path)
        shape = tuple(int(v) for v in img.shape)
        # reading the data proves the .img / gzip stream is complete; volumes here are small
        # enough (a few volumes at a time) for bounded memory
        arr = np.asanyarray(img.dataobj)
        if arr.size == 0:
            return {"ok": False, "reason": "volume_empty", "detail": "no voxels"}
        return {"ok": True, "shape": shape, "zooms": [float(z) for z in img.header.get_zooms()[:3]]}
    except FileNotFoundError as exc:
        return {"ok": False, "reason": "volume_missing_part", "detail": str(exc)}
    except Exception as exc:
        return {"ok": False, "reason": "volume_unreadable", "detail": f"{type(exc).__name__}: {exc}"}
