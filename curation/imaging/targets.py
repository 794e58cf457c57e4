"""Where each target of a series lies, and which planes its acquisition can show.

``locate`` fits the template to a normalized series (``anatomy.fit_template``), maps the landmarks of
``landmarks.yaml`` into the series' voxel grid, and finds the lesion against the series' own grey and white matter.
``refused_planes`` is the acquisition QC: a plane is not reformatted from a series sampled coarser than
``max_reformat_spacing_mm`` along one of the plane's axes, except the plane it was acquired in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from curation.params import NormalizeParams

PLANE_NORMAL = {"sagittal": 0, "coronal": 1, "axial": 2}
AXIS_NAME = "xyz"
MIN_SCALE, MAX_SCALE = 0.7, 1.4  # an adult head is within these of the MNI152 template along every axis
LESION_GRID_MM = 2.0  # lesions are searched on a 2 mm copy of the 1 mm volume (cheap; a 40 mm3 lesion is 5 voxels)


def sampling_mm(affine: np.ndarray) -> tuple[float, float, float]:
    """The source's sampling distance along each RAS world axis: the spacing of the voxel axis closest to it."""
    a = np.asarray(affine, dtype=np.float64)[:3, :3]
    zooms = np.sqrt((a**2).sum(axis=0))
    out = []
    for k in range(3):
        j = int(np.argmax(np.abs(a[k]) / np.maximum(zooms, 1e-9)))
        out.append(round(float(zooms[j]), 4))
    return out[0], out[1], out[2]


def refused_planes(sampling: tuple[float, float, float], max_mm: float) -> dict[str, str]:
    """Planes (axial, coronal, sagittal) the acquisition cannot show, each with its one-line reason."""
    coarse = [k for k in range(3) if sampling[k] > max_mm + 1e-6]
    if not coarse:
        return {}
    native = int(np.argmax(sampling))  # the slice axis of a thick-slice acquisition
    out = {}
    for plane, normal in PLANE_NORMAL.items():
        if normal == native:
            continue
        bad = [k for k in coarse if k != normal]
        if bad:
            out[plane] = "; ".join(f"{sampling[k]:g} mm between samples along {AXIS_NAME[k]} > {max_mm:g} mm"
                                   for k in bad)
    return out


def slice_position(affine: np.ndarray, shape: tuple[int, ...], axis: int, index: int) -> float:
    """World (RAS mm) coordinate along ``axis`` of slice ``index``, at the centre of the slice."""
    centre = [(n - 1) / 2 for n in shape[:3]]
    centre[axis] = index
    return round(float((affine @ np.append(centre, 1.0))[axis]), 3)


def slice_index(affine: np.ndarray, shape: tuple[int, ...], axis: int, point_mm: np.ndarray) -> int | None:
    """The slice along ``axis`` through the world point, or None when it lies outside the volume."""
    vox = np.linalg.inv(affine) @ np.append(np.asarray(point_mm, dtype=np.float64), 1.0)
    idx = int(round(float(vox[axis])))
    return idx if 0 <= idx < shape[axis] else None


def locate(data: np.ndarray, affine: np.ndarray, sequence: str | None, p: NormalizeParams) -> dict[str, Any]:
    """``_locate``; an odd volume that breaks it loses its targets (reason recorded), never its other renders."""
    try:
        return _locate(data, affine, sequence, p)
    except Exception as exc:  # numpy/scipy/ITK raise many types on degenerate volumes
        return {"targets": [], "anatomy": {"fit": "failed", "not_located": {
            t: f"target location failed ({type(exc).__name__}: {str(exc)[:200]})" for t in sorted(p.targets)}}}


def _locate(data: np.ndarray, affine: np.ndarray, sequence: str | None, p: NormalizeParams) -> dict[str, Any]:
    """Target placements for a normalized series: ``{"targets": [...], "anatomy": {...}}``. Each target is
    ``{target, plane, slice_index, position_mm, located_by}`` (the brain montage has ``slices`` instead); a target
    that cannot be placed is left out and its reason listed in ``anatomy["not_located"]``."""
    from curation.imaging import anatomy

    shape = data.shape
    out: dict[str, Any] = {"targets": [], "anatomy": {"template": "MNI152 2009a sym (nilearn)",
                                                      "version": anatomy.VERSION, "not_located": {}}}
    wanted = set(p.targets)
    if not wanted:
        return out
    try:
        fit = anatomy.fit_template(data, affine)
    except Exception as exc:  # ITK raises on degenerate images
        out["anatomy"]["fit"] = "failed"
        out["anatomy"]["not_located"] = {t: f"template registration failed ({type(exc).__name__})"
                                         for t in sorted(wanted)}
        return out
    maps = anatomy.template_maps(2.0)
    # the lesion search grid: the volume decimated to about LESION_GRID_MM, with its own affine
    step = max(1, int(round(LESION_GRID_MM / float(np.sqrt((affine[:3, 0] ** 2).sum())))))
    small = np.ascontiguousarray(data[::step, ::step, ::step])
    small_aff = affine.copy()
    small_aff[:3, :3] = affine[:3, :3] * step
    regions = {n: anatomy.region_mask(n, maps).astype(np.float32) for n in ("hippocampus", "lateral_ventricles")}
    gm, wm, vent, brain, *warped = anatomy.template_on_series(
        fit, small.shape, small_aff, maps,
        [maps.gm, maps.wm, maps.csf * (maps.brain > 0.5), maps.brain, *regions.values()])
    region_on_series = dict(zip(regions, warped, strict=True))

    def fraction(mask: np.ndarray, axis: int, point: np.ndarray) -> float | None:
        """Target area / brain area in the slice through ``point`` (on the 2 mm copy): how small the target is."""
        k = slice_index(small_aff, small.shape, axis, point)
        if k is None:
            return None
        b = int((np.take(brain, k, axis=axis) >= 0.5).sum())
        return round(float((np.take(mask, k, axis=axis) >= 0.5).sum()) / b, 4) if b else None

    scale = np.linalg.svd(fit.matrix[:3, :3])[1]
    check = _anatomy_check(small, gm, wm, vent)
    if check is None and not (MIN_SCALE <= scale.min() and scale.max() <= MAX_SCALE):
        check = (f"the template fit is implausible (scaled {scale.min():.2f}..{scale.max():.2f}, outside "
                 f"{MIN_SCALE}..{MAX_SCALE})")
    out["anatomy"].update({"fit": "ok" if check is None else "refused", "metric": round(fit.metric, 4),
                           "scale": [round(float(v), 3) for v in scale]})
    if check is not None:
        out["anatomy"]["fit_reason"] = check
        out["anatomy"]["not_located"] = {t: check for t in sorted(wanted)}
        return out
    targets = anatomy.landmarks().targets
    for name in ("hippocampus", "lateral_ventricles"):
        if name not in wanted:
            continue
        t = targets[name]  # type: ignore[index]
        point = fit.to_series(np.array(list(t.landmarks.values()))).mean(axis=0)
        axis = PLANE_NORMAL[t.plane]
        idx = slice_index(affine, shape, axis, point)
        if idx is None:
            out["anatomy"]["not_located"][name] = "the landmark lies outside the volume's field of view"
            continue
        out["targets"].append({"target": name, "plane": t.plane, "slice_index": idx,
                               "position_mm": slice_position(affine, shape, axis, idx),
                               "located_by": "atlas_registration",
                               "target_fraction": fraction(region_on_series[name], axis, point)})
    if "brain" in wanted:
        t = targets["brain"]
        lo, hi = fit.to_series(np.array([t.landmarks["inferior"], t.landmarks["superior"]]))
        found_idx = [slice_index(affine, shape, 2, lo + f * (hi - lo)) for f in np.linspace(0.0, 1.0, 9)]
        idxs = [i for i in found_idx if i is not None]
        if len(idxs) < len(found_idx):
            out["anatomy"]["not_located"]["brain"] = "the brain is not wholly inside the volume's field of view"
        else:
            out["targets"].append({"target": "brain", "plane": "montage", "slices": idxs,
                                   "positions_mm": [slice_position(affine, shape, 2, i) for i in idxs],
                                   "located_by": "atlas_registration"})
    if "lesion" in wanted:
        polarity = p.lesion_polarity.get(sequence or "")
        if polarity is None:
            out["anatomy"]["not_located"]["lesion"] = f"no lesion contrast configured for sequence {sequence}"
        else:
            voxel_mm3 = float(abs(np.linalg.det(small_aff[:3, :3])))
            found = anatomy.find_lesion(small, gm, wm, polarity, z=p.lesion_z,
                                        min_voxels=max(2, int(np.ceil(p.lesion_min_mm3 / voxel_mm3))),
                                        exclude=vent > 0.2, deep_white_only=sequence in ("T1w", "T2w"))
            if found is None:
                out["anatomy"]["not_located"]["lesion"] = "no cluster of outlying voxels reaches the minimum size"
            else:
                centre = small_aff @ np.append(found.centroid_vox, 1.0)
                idx = slice_index(affine, shape, 2, centre[:3])
                if idx is not None:
                    out["targets"].append({"target": "lesion", "plane": "axial", "slice_index": idx,
                                           "position_mm": slice_position(affine, shape, 2, idx),
                                           "located_by": f"intensity_outlier:{polarity}",
                                           "volume_mm3": round(found.voxels * voxel_mm3, 1),
                                           "target_fraction": fraction(found.mask.astype(np.float32), 2, centre[:3]),
                                           "centre_mm": [round(float(v), 2) for v in centre[:3]]})
    return out


def _anatomy_check(data: np.ndarray, gm: np.ndarray, wm: np.ndarray, vent: np.ndarray) -> str | None:
    """Why the fitted template cannot be trusted, or None: the series must show the template's tissue contrast
    where the template puts grey matter, white matter and the ventricles (a uniform object, or a fit that missed
    the brain, shows none)."""
    regions = {"grey matter": gm >= 0.7, "white matter": wm >= 0.9, "ventricles": vent >= 0.7}
    meds, spread = {}, []
    for name, sel in regions.items():
        if sel.sum() < 20:
            return f"the fitted template's {name} falls outside the volume"
        vals = data[sel]
        meds[name] = float(np.median(vals))
        spread.append(1.4826 * float(np.median(np.abs(vals - meds[name]))))
    sigma = max(float(np.median(spread)), 1e-6)
    contrast = max(abs(a - b) for a in meds.values() for b in meds.values()) / sigma
    if contrast < 2.0:
        return (f"no brain anatomy where the registered template expects it (tissue contrast {contrast:.2f} "
                "robust SDs < 2); not a brain, or the fit failed")
    return None
