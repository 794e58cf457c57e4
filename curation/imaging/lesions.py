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


# seeds lie in the template's core white matter (MS plaques, glioma oedema, infarcts all reach it), away from the
# ventricles' walls (ependymal partial volume): the cortex, bright on FLAIR and where a fit is least sure, seeds none
SEED_WHITE = 0.9
SEED_VENTRICLE = 0.3
HISTOGRAM_BINS = 128


@dataclass(frozen=True)
class LesionsFound:
    """Every grown cluster counted (``labels`` 1..n, ``voxels`` per label, largest first) and the axial slice of the
    2 mm grid showing the most of them."""

    labels: np.ndarray
    voxels: list[int]
    slice_k: int
    slice_centroid_vox: tuple[float, float, float]
    polarity: str


def _peak_and_spreads(values: np.ndarray, polarity: str) -> tuple[float, float, float]:
    """The histogram peak of a tissue's values, its spread measured on the side away from lesions (below the peak
    for hyperintense lesions) and on the side towards them: a large tumour or many plaques move a median and inflate
    a MAD (a glioma filling a fifth of the white matter: median 0.13, MAD 1.06 on a z-scored FLAIR; peak -0.42,
    spread 0.40), not the peak. Grey matter's spread away from lesions holds white matter's partial volume (15.5 vs
    10.1 towards them on ms_patient07), so the side towards them says how far grey matter itself reaches."""
    from scipy import ndimage

    lo, hi = np.percentile(values, [1, 99])
    hist, edges = np.histogram(values, bins=HISTOGRAM_BINS, range=(float(lo), float(hi)))
    smooth = ndimage.gaussian_filter1d(hist.astype(np.float64), 2)
    peak = float((edges[:-1] + edges[1:])[int(np.argmax(smooth))] / 2)
    below, above = values[values < peak], values[values > peak]
    clean, towards = (below, above) if polarity == "hyper" else (above, below)

    def spread(side: np.ndarray) -> float:
        return max(1.4826 * float(np.median(np.abs((side if side.size >= 50 else values) - peak))), 1e-6)

    return peak, spread(clean), spread(towards)


def find_lesions(data: np.ndarray, gm: np.ndarray, wm: np.ndarray, brain: np.ndarray, polarity: str, *,
                 seed_z: float, grow_z: float, grey_seed_z: float, grey_grow_z: float, min_voxels: int,
                 small_voxels: int, ventricles: np.ndarray) -> LesionsFound | None:
    """Lesions unlike any normal tissue (FLAIR, DWI hyperintense; SWI hypointense): seeds at least ``seed_z`` out
    in core white matter, each grown while it stays ``grow_z`` out (tissue by tissue: grey matter against its own
    peak and spread). Seeds and grown voxels must also lie ``grey_seed_z`` / ``grey_grow_z`` beyond grey matter's
    peak, in its spread towards lesions: where the fit puts white matter a few mm into the cortex (an atrophied head
    unlike the template), grey matter is several white-matter spreads out on FLAIR and is no lesion. Every grown
    cluster of ``small_voxels`` is counted; None (no lesion target) unless they reach ``min_voxels`` together (many
    small MS plaques, ms_patient07: none reaches 250 mm3 alone)."""
    from scipy import ndimage

    parenchyma = ((gm + wm) >= 0.9) & ~(ventricles > 0.2)
    if parenchyma.sum() < 1000:
        return None
    white = wm >= gm
    region = (brain >= 0.5) & ((gm + wm) >= 0.5) & ~(ventricles >= 0.5)
    sign = 1.0 if polarity == "hyper" else -1.0
    score = np.full(data.shape, -np.inf, np.float32)
    beyond_grey = np.full(data.shape, np.inf, np.float32)  # no grey matter to compare with: no such condition
    for name, cls in (("white", white), ("grey", ~white)):
        sel = parenchyma & cls
        if sel.sum() < 500:  # too few voxels to score a class against itself
            continue
        peak, spread, towards = _peak_and_spreads(data[sel], polarity)
        r = region & cls
        score[r] = sign * (data[r] - peak) / spread
        if name == "grey":
            beyond_grey = sign * (data - peak) / towards
    seeds = (score > seed_z) & (beyond_grey > grey_seed_z) & (wm >= SEED_WHITE) & white
    seeds &= ~ndimage.binary_dilation(ventricles > SEED_VENTRICLE)
    lab, n = ndimage.label(((score > grow_z) & (beyond_grey > grey_grow_z)) | seeds)
    sizes = np.bincount(lab.ravel(), minlength=n + 1)
    seeded = np.unique(lab[seeds])
    kept = sorted((int(k) for k in seeded if k > 0 and sizes[k] >= small_voxels), key=lambda k: -sizes[k])
    if not kept or int(sizes[kept].sum()) < min_voxels:
        return None
    labels = np.zeros(data.shape, np.int32)
    for i, k in enumerate(kept, start=1):
        labels[lab == k] = i
    area = (labels > 0).sum(axis=(0, 1))
    k = int(np.argmax(area))  # the axial slice that shows the most lesion
    ij = np.argwhere(labels[:, :, k] > 0).mean(axis=0)
    return LesionsFound(labels, [int(sizes[x]) for x in kept], k, (float(ij[0]), float(ij[1]), float(k)), polarity)
