"""A lesion in a series: the largest cluster unusually bright or dark against the series' own grey and white
matter, tissue by tissue (the registered template's probability maps say which voxel is which)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# T1 / T2: a cluster whose like-valued voxels run on outside the brain tissue the template expects (into a ventricle, a
# sulcus, a temporal horn the fit placed a few mm off) is fluid, not a lesion, when more than this share lies outside
MAX_SHARE_OUTSIDE_TISSUE = 0.25


def _isolated(data: np.ndarray, cand: np.ndarray, lab: np.ndarray, n: int, white: tuple[float, float] | None,
              tissue: np.ndarray, polarity: str, z: float) -> np.ndarray:
    """Per cluster of ``lab`` (1..n): True where the voxels as bright (dark) as it against the white matter
    (``white``: its median and MAD; None where the volume has none, and each cluster is judged on its own voxels),
    grown from it over the whole volume, stay mostly inside the template's brain tissue; False where they run on
    into fluid."""
    from scipy import ndimage

    if white is None:
        like = np.zeros(data.shape, bool)
    else:
        med, mad = white
        every = (data - med) / mad
        like = (every > z) if polarity == "hyper" else (every < -z)
    grown, m = ndimage.label(like | cand)  # a (connected) cluster lies inside one grown component
    total = np.bincount(grown.ravel(), minlength=m + 1)
    outside = np.bincount(grown[~tissue], minlength=m + 1)
    first = ndimage.labeled_comprehension(grown, lab, np.arange(1, n + 1), lambda v: v[0], np.int64, 0)
    return outside[first] / np.maximum(total[first], 1) <= MAX_SHARE_OUTSIDE_TISSUE


@dataclass(frozen=True)
class LesionFound:
    mask: np.ndarray
    voxels: int
    centroid_vox: tuple[float, float, float]
    z_threshold: float
    polarity: str


def find_lesion(data: np.ndarray, gm: np.ndarray, wm: np.ndarray, polarity: str, *, z: float, min_voxels: int,
                exclude: np.ndarray | None = None, deep_white_only: bool = False) -> LesionFound | None:
    """The largest connected cluster of voxels unusually bright (``hyper``) or dark (``hypo``) against the series'
    own grey and white matter, compared tissue by tissue (robust z: median and MAD of each tissue's voxels, from the
    registered template's probability maps), or None when none reaches ``min_voxels``."""
    from scipy import ndimage

    parenchyma = (gm + wm) >= 0.9
    if deep_white_only:  # T1 and T2 lesions look like CSF: only deep white matter, away from the ventricles
        parenchyma &= wm >= 0.95
    if exclude is not None:
        if deep_white_only:
            exclude = ndimage.binary_dilation(exclude, iterations=2)
        parenchyma &= ~exclude
    if parenchyma.sum() < 1000:
        return None
    white = wm >= gm
    score = np.zeros(data.shape, np.float32)
    robust: list[tuple[float, float] | None] = []  # median and MAD of white, then of grey matter (None: none there)
    for cls in (white, ~white):
        sel = parenchyma & cls
        if not sel.any():
            robust.append(None)
            continue
        vals = data[sel]
        med = float(np.median(vals))
        mad = 1.4826 * float(np.median(np.abs(vals - med))) or 1e-6
        robust.append((med, mad))
        if sel.sum() >= 500:  # too few voxels to score a class against itself
            score[sel] = (data[sel] - med) / mad
    cand = score > z if polarity == "hyper" else score < -z
    cand = ndimage.binary_opening(cand, structure=ndimage.generate_binary_structure(3, 1))
    lab, n = ndimage.label(cand)
    if n == 0:
        return None
    sizes = np.bincount(lab.ravel())[1:]
    if deep_white_only:  # lesions that look like CSF: drop the edges of misplaced fluid
        sizes[~_isolated(data, cand, lab, n, robust[0], (gm + wm) >= 0.5, polarity, z)] = 0
    best = int(np.argmax(sizes)) + 1
    if sizes[best - 1] < min_voxels:
        return None
    mask = lab == best
    c = np.argwhere(mask).mean(axis=0)
    return LesionFound(mask, int(sizes[best - 1]), (float(c[0]), float(c[1]), float(c[2])), z, polarity)
