"""Where each target of a series lies, and which planes its acquisition can show.

``locate`` fits the template to a normalized series (``templatefit.fit_template``), maps the landmarks of
``landmarks.yaml`` into the series' voxel grid, and finds the lesion against the series' own grey and white matter.
``refused_planes`` is the acquisition QC: a plane is not reformatted from a series sampled coarser than
``max_reformat_spacing_mm`` along one of the plane's axes, except the plane it was acquired in, and except an
isotropic 3D series sampled up to ``max_isotropic_reformat_mm``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Literal

import numpy as np
from nibabel.affines import voxel_sizes

from curation.params import NormalizeParams
from curation.schema import MASK_LOCATED, Anatomy, Placement, PlaneFallback, VentricleMeasures

PLANE_NORMAL = {"sagittal": 0, "coronal": 1, "axial": 2}
AXIS_NAME = "xyz"
MIN_SCALE, MAX_SCALE = 0.7, 1.4  # an adult head is within these of the MNI152 template along every axis
FLUID_LIKE = ("T1w", "T2w")  # lesions there look like CSF: only deep white matter, away from fluid (find_lesion)
ISOTROPIC_RATIO = 1.1  # a series whose coarsest sampling is within this of its finest is isotropic
LESION_GRID_MM = 2.0  # lesions are searched on a 2 mm copy of the 1 mm volume (cheap; a 40 mm3 lesion is 5 voxels)


@dataclasses.dataclass
class Located:
    """Where a series' targets lie: the placed targets (the brain montage with ``slices``) and what the anatomy fit
    found (``not_located``: why each target that is not placed is not; the fit's metric and measures), both as the
    series' QC records them."""

    targets: list[Placement] = dataclasses.field(default_factory=list)
    anatomy: Anatomy = dataclasses.field(default_factory=Anatomy)


def sampling_mm(affine: np.ndarray) -> tuple[float, float, float]:
    """The source's sampling distance along each RAS world axis: the spacing of the voxel axis closest to it."""
    a = np.asarray(affine, dtype=np.float64)[:3, :3]
    zooms = np.sqrt((a**2).sum(axis=0))
    out = []
    for k in range(3):
        j = int(np.argmax(np.abs(a[k]) / np.maximum(zooms, 1e-9)))
        out.append(round(float(zooms[j]), 4))
    return out[0], out[1], out[2]


def refused_planes(sampling: tuple[float, float, float], max_mm: float,
                   isotropic_mm: float = 0.0) -> dict[str, str]:
    """Planes (axial, coronal, sagittal) the acquisition cannot show, each with its one-line reason. An isotropic
    series up to ``isotropic_mm`` shows all three: a reformat is as sharp as the native plane."""
    coarse = [k for k in range(3) if sampling[k] > max_mm + 1e-6]
    if not coarse or (max(sampling) <= isotropic_mm + 1e-6 and max(sampling) <= ISOTROPIC_RATIO * min(sampling)):
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


def slice_position(affine: np.ndarray, shape: tuple[int, ...], axis: int, index: int,
                   at_mm: np.ndarray | None = None) -> float:
    """World (RAS mm) coordinate along ``axis`` of slice ``index``: where the slice passes through the world point
    ``at_mm`` (a target's centre) when given, else at the centre of the slice. On a volume whose voxel axes are
    tilted from the world's the two differ; the target's is the one a landmark is compared with."""
    if at_mm is None:
        vox = [(n - 1) / 2 for n in shape[:3]]
    else:
        vox = list((np.linalg.inv(affine) @ np.append(np.asarray(at_mm, dtype=np.float64), 1.0))[:3])
    vox[axis] = index
    return round(float((affine @ np.append(vox, 1.0))[axis]), 3)


def slice_index(affine: np.ndarray, shape: tuple[int, ...], axis: int, point_mm: np.ndarray) -> int | None:
    """The slice along ``axis`` through the world point, or None when it lies outside the volume."""
    vox = np.linalg.inv(affine) @ np.append(np.asarray(point_mm, dtype=np.float64), 1.0)
    idx = int(round(float(vox[axis])))
    return idx if 0 <= idx < shape[axis] else None


def locate(data: np.ndarray, affine: np.ndarray, sequence: str | None, p: NormalizeParams,
           refused: dict[str, str] | None = None, fit: Any = None, mask: np.ndarray | None = None) -> Located:
    """``_locate``; an odd volume that breaks it loses its targets (reason recorded), never its other renders.
    ``fit`` is the series' anatomy fit when an earlier step made it (one registration per volume); ``mask`` the
    source's lesion mask on the series' grid, which places the lesion instead of the finder."""
    try:
        with contextlib.ExitStack() as made:  # a fit made here is removed when location is done
            return _locate(data, affine, sequence, p, refused or {}, fit, mask, made)
    except Exception as exc:  # numpy/scipy/ITK raise many types on degenerate volumes
        return Located(anatomy=Anatomy(fit="failed", not_located={
            t: f"target location failed ({type(exc).__name__}: {str(exc)[:200]})" for t in sorted(p.targets)}))


def shown_plane(plane: str, refused: dict[str, str]) -> str | None:
    """``plane``, or where the acquisition cannot show it, the first plane it can (a thick-slice axial series shows
    the hippocampus in its own axial slices rather than in a blurred coronal reformat)."""
    if plane not in refused:
        return plane
    return next((q for q in ("axial", "coronal", "sagittal") if q not in refused), None)


CARRIED = ("hippocampus", "lateral_ventricles")  # point targets a visit's T1w places for its other sequences
CARRY_MAX_OFFSET_MM = 20.0  # a carried target this far from the series' own placement means a failed registration


def carry_targets(reference_targets: list[Placement], to_series: np.ndarray, affine: np.ndarray,
                  shape: tuple[int, ...], refused: dict[str, str],
                  located_by: str) -> tuple[list[Placement], dict[str, str]]:
    """The point targets of the visit's T1w placed on another sequence of the same visit: each centre mapped by
    ``to_series`` (the within-visit rigid registration, T1w mm -> series mm) and its slice taken on the series' own
    grid, in the plane its acquisition can show. The template is a T1w and fits a T1w best; a FLAIR's or T2w's own
    fit lands some mm off on an atrophic or posed head. Returns (placed, not placed: reason)."""
    placed: list[Placement] = []
    missed: dict[str, str] = {}
    for t in reference_targets:
        name = t.target
        if name not in CARRIED or not t.centre_mm:
            continue
        wanted = (t.instead_of.plane if t.instead_of else None) or t.plane
        plane = shown_plane(wanted, refused)
        if plane is None:
            missed[name] = f"no plane of this acquisition can show it ({refused[wanted]})"
            continue
        axis = PLANE_NORMAL[plane]
        centre = (to_series @ np.append(np.asarray(t.centre_mm, dtype=np.float64), 1.0))[:3]
        idx = slice_index(affine, shape, axis, centre)
        if idx is None:
            missed[name] = "the landmark lies outside the volume's field of view"
            continue
        out = Placement(target=name, plane=plane, slice_index=idx,
                        position_mm=slice_position(affine, shape, axis, idx, centre), located_by=located_by,
                        centre_mm=[round(float(v), 2) for v in centre])
        if plane != wanted:
            out.instead_of = PlaneFallback(plane=wanted, reason=refused[wanted])
        elif "target_fraction" in t.model_fields_set:  # area over brain area in the same plane through the same anatomy
            out.target_fraction = t.target_fraction
        placed.append(out)
    return placed, missed


def _small_step(affine: np.ndarray) -> int:
    """The decimation that brings a grid to about LESION_GRID_MM."""
    return max(1, int(round(LESION_GRID_MM / float(voxel_sizes(affine)[0]))))


def _small(data: np.ndarray, affine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The volume decimated to about LESION_GRID_MM, with its own affine (the grid tissue maps are checked on)."""
    step = _small_step(affine)
    small = np.ascontiguousarray(data[::step, ::step, ::step])
    small_aff = affine.copy()
    small_aff[:3, :3] = affine[:3, :3] * step
    return small, small_aff


def brain_check(data: np.ndarray, affine: np.ndarray, fit: Any, exclude: np.ndarray | None = None) -> str | None:
    """Why the series shows no brain where ``fit`` puts the template's (see _anatomy_check), or None. ``exclude``:
    voxels (a known lesion, on the series' grid) left out of the tissues compared, with 6 mm around them."""
    from scipy import ndimage

    from curation.imaging import anatomy

    maps = anatomy.template_maps(2.0)
    small, small_aff = _small(data, affine)
    gm, wm, vent = fit.on_series([maps.gm, maps.wm, maps.csf * (maps.brain > 0.5)], maps, small.shape, small_aff)
    if exclude is not None:
        keep = ~ndimage.binary_dilation(_small(exclude, affine)[0], iterations=3)
        gm, wm, vent = gm * keep, wm * keep, vent * keep
    return _anatomy_check(small, gm, wm, vent, float(np.linalg.norm(small_aff[:3, 0])))


@dataclasses.dataclass
class _OnSeries:
    """The template's maps carried onto a series' 2 mm copy (the lesion search grid) through its fit."""

    small: np.ndarray
    small_aff: np.ndarray
    gm: np.ndarray
    wm: np.ndarray
    vent: np.ndarray
    brain: np.ndarray
    regions: dict[str, np.ndarray]  # hippocampus, lateral_ventricles

    def fraction(self, mask: np.ndarray, axis: int, point: np.ndarray) -> float | None:
        """Target area / brain area in the slice through ``point`` (on the 2 mm copy): how small the target is."""
        k = slice_index(self.small_aff, self.small.shape, axis, point)
        if k is None:
            return None
        b = int((np.take(self.brain, k, axis=axis) >= 0.5).sum())
        return round(float((np.take(mask, k, axis=axis) >= 0.5).sum()) / b, 4) if b else None


def _locate(data: np.ndarray, affine: np.ndarray, sequence: str | None, p: NormalizeParams,
            refused: dict[str, str], fit: Any, mask: np.ndarray | None,
            made: contextlib.ExitStack) -> Located:
    """Target placements for a normalized series. Each target is
    ``{target, plane, slice_index, position_mm, located_by}`` (the brain montage has ``slices`` instead); a target
    that cannot be placed is left out and its reason listed in ``anatomy.not_located``."""
    from curation.imaging import anatomy, templatefit

    out = Located(anatomy=Anatomy(template="MNI152 2009a sym (nilearn)", registration="antspyx",
                                  version=anatomy.VERSION, not_located={}))
    wanted: set[str] = set(p.targets)
    if mask is not None and "lesion" in wanted:  # the source's mask is the truth: no finder, and no fit for it
        wanted.discard("lesion")
        placed, why = place_mask_lesion(mask, data, affine, p.lesion_small_mm3)
        if placed is None:
            out.anatomy.not_located["lesion"] = why
        else:
            out.targets.append(placed)
    if not wanted:
        return out
    try:
        if fit is None:
            fit = templatefit.fit_template(data, affine, sequence)
            made.callback(fit.close)
    except Exception as exc:  # ITK raises on degenerate images
        out.anatomy.fit = "failed"
        out.anatomy.not_located = {t: f"template registration failed ({type(exc).__name__})"
                                   for t in sorted(wanted)}
        return out
    on = _maps_on_series(data, affine, fit)
    wanted = _judge_fit(out, wanted, fit, on)
    if "lateral_ventricles" in wanted:  # their volume, for a table's volume to be checked against
        from curation.imaging import ventricles

        ml, how = ventricles.measure(on.small, on.small_aff, sequence, fit)
        out.anatomy.measures = (VentricleMeasures(lateral_ventricles_ml=ml, how=how) if ml is not None
                                else VentricleMeasures(not_measured={"lateral_ventricles": how}))
    _place_landmark_targets(out, wanted, fit, on, refused, affine, data.shape)
    if "brain" in wanted:
        _place_brain_montage(out, fit, affine, data.shape)
    if "lesion" in wanted:
        polarity = p.lesion_polarity.get(sequence or "")
        if polarity is None:
            out.anatomy.not_located["lesion"] = f"no lesion contrast configured for sequence {sequence}"
        elif sequence not in FLUID_LIKE:
            _place_lesions(out, on.small, on.small_aff, on.gm, on.wm, on.brain, on.vent, polarity, p, affine,
                           data.shape, on.fraction)
        else:
            _place_fluid_lesion(out, on, polarity, p, affine, data.shape)
    return out


def _maps_on_series(data: np.ndarray, affine: np.ndarray, fit: Any) -> _OnSeries:
    from curation.imaging import anatomy, templatefit

    maps = anatomy.template_maps(2.0)
    small, small_aff = _small(data, affine)  # the lesion search grid
    regions = {n: anatomy.region_mask(n, maps).astype(np.float32) for n in ("hippocampus", "lateral_ventricles")}
    gm, wm, vent, brain, *warped = templatefit.template_on_series(
        fit, small.shape, small_aff, maps,
        [maps.gm, maps.wm, maps.csf * (maps.brain > 0.5), maps.brain, *regions.values()])
    return _OnSeries(small, small_aff, gm, wm, vent, brain, dict(zip(regions, warped, strict=True)))


def _judge_fit(out: Located, wanted: set[str], fit: Any, on: _OnSeries) -> set[str]:
    """Record whether the fit can be trusted (the series' tissues where it puts the template's, a plausible scale);
    the targets still to place: all wanted, only the lesion where the scale alone is off, none where the tissues
    are."""
    scale = np.linalg.svd(fit.matrix[:3, :3])[1]
    tissue = _anatomy_check(on.small, on.gm, on.wm, on.vent, float(np.linalg.norm(on.small_aff[:3, 0])))
    check = tissue
    if check is None and not (MIN_SCALE <= scale.min() and scale.max() <= MAX_SCALE):
        check = (f"the template fit is implausible (scaled {scale.min():.2f}..{scale.max():.2f}, outside "
                 f"{MIN_SCALE}..{MAX_SCALE})")
    a, made = out.anatomy, fit.record()
    a.fit = "ok" if check is None else "refused"
    a.metric, a.scale = round(fit.metric, 4), [round(float(v), 3) for v in scale]
    a.library, a.presets, a.series_kind = made.library, made.presets, made.series_kind
    a.template_to_series_ras = made.template_to_series_ras
    if check is None:
        return wanted
    out.anatomy.fit_reason = check
    out.anatomy.not_located = {t: check for t in sorted(wanted)}
    if tissue is not None or "lesion" not in wanted:
        return set()
    # the landmarks cannot be trusted, but the series' own tissues lie where the fit puts them (the check above):
    # the lesion, found against those tissues, still can (a glioma's mass effect strains the fit's scale)
    del out.anatomy.not_located["lesion"]
    return {"lesion"}


def _place_landmark_targets(out: Located, wanted: set[str], fit: Any, on: _OnSeries, refused: dict[str, str],
                            affine: np.ndarray, shape: tuple[int, ...]) -> None:
    """The hippocampus and lateral ventricle renders: the plane through the fit's landmarks, in a plane the
    acquisition can show, and only where that slice cuts the target's region."""
    from curation.imaging import anatomy

    targets = anatomy.landmarks().targets
    for name in ("hippocampus", "lateral_ventricles"):
        if name not in wanted:
            continue
        t = targets[name]  # type: ignore[index]
        plane = shown_plane(t.plane, refused)
        if plane is None:
            out.anatomy.not_located[name] = f"no plane of this acquisition can show it ({refused[t.plane]})"
            continue
        axis = PLANE_NORMAL[plane]
        point = _through_one_side(fit.to_series(np.array(list(t.landmarks.values()))), axis,
                                  lambda q, a=axis, n=name: on.fraction(on.regions[n], a, q) or 0.0)
        idx = slice_index(affine, shape, axis, point)
        if idx is None:
            out.anatomy.not_located[name] = "the landmark lies outside the volume's field of view"
            continue
        shown = on.fraction(on.regions[name], axis, point)
        if shown == 0:  # the slice misses the target's region: a render of it would not show it
            out.anatomy.not_located[name] = f"the {plane} slice through it does not cut its region"
            continue
        placed = Placement(target=name, plane=plane, slice_index=idx,
                           position_mm=slice_position(affine, shape, axis, idx, point),
                           located_by="atlas_registration", target_fraction=shown,
                           centre_mm=[round(float(v), 2) for v in point])
        if plane != t.plane:
            placed.instead_of = PlaneFallback(plane=t.plane, reason=refused[t.plane])
        out.targets.append(placed)


def _place_brain_montage(out: Located, fit: Any, affine: np.ndarray, shape: tuple[int, ...]) -> None:
    """Nine axial slices from the brain's lowest to its highest landmark, where all lie in the field of view."""
    from curation.imaging import anatomy

    t = anatomy.landmarks().targets["brain"]
    lo, hi = fit.to_series(np.array([t.landmarks["inferior"], t.landmarks["superior"]]))
    found_idx = [slice_index(affine, shape, 2, lo + f * (hi - lo)) for f in np.linspace(0.0, 1.0, 9)]
    idxs = [i for i in found_idx if i is not None]
    if len(idxs) < len(found_idx):
        out.anatomy.not_located["brain"] = "the brain is not wholly inside the volume's field of view"
    else:
        out.targets.append(Placement(target="brain", plane="montage", slices=idxs,
                                     positions_mm=[slice_position(affine, shape, 2, i) for i in idxs],
                                     located_by="atlas_registration"))


def _place_fluid_lesion(out: Located, on: _OnSeries, polarity: str, p: NormalizeParams, affine: np.ndarray,
                        shape: tuple[int, ...]) -> None:
    """The lesion target of a fluid-like sequence (lesions.find_lesion: one cluster in the deep white matter)."""
    from curation.imaging import lesions

    voxel_mm3 = float(abs(np.linalg.det(on.small_aff[:3, :3])))
    found = lesions.find_lesion(on.small, on.gm, on.wm, polarity, z=p.lesion_z,
                                min_voxels=max(2, int(np.ceil(p.lesion_min_mm3 / voxel_mm3))),
                                exclude=on.vent > 0.2, deep_white_only=True)
    if found is None:
        out.anatomy.not_located["lesion"] = "no cluster of outlying voxels reaches the minimum size"
        return
    centre = on.small_aff @ np.append(found.centroid_vox, 1.0)
    idx = slice_index(affine, shape, 2, centre[:3])
    if idx is not None:
        out.targets.append(Placement(target="lesion", plane="axial", slice_index=idx,
                                     position_mm=slice_position(affine, shape, 2, idx, centre[:3]),
                                     located_by=f"intensity_outlier:{polarity}",
                                     volume_mm3=round(found.voxels * voxel_mm3, 1),
                                     target_fraction=on.fraction(found.mask.astype(np.float32), 2, centre[:3]),
                                     centre_mm=[round(float(v), 2) for v in centre[:3]]))


ONE_SIDE_SHARE = 0.9  # a slice's lesion lies on one side where at least this share of its area does ...
BOTH_SIDES_SHARE = 0.2  # ... and on both where each side holds at least this share (else no side is told)


def place_mask_lesion(mask: np.ndarray, data: np.ndarray, affine: np.ndarray,
                      small_mm3: float) -> tuple[Placement | None, str]:
    """The lesion target as the source's mask gives it (on the series' grid): the axial slice showing the most
    lesion, the count of lesions (26-connected parts of at least ``small_mm3``), the largest and smallest of them,
    the mask's whole volume, and the side of the brain the slice's lesion lies on (the brain's midline in that
    slice: the middle of the imaged object's left-right extent). None, with why, where the mask holds no lesion of
    that size."""
    from scipy import ndimage

    from curation.imaging.templatefit import head_mask

    voxel_mm3 = float(abs(np.linalg.det(affine[:3, :3])))
    labels, n = ndimage.label(mask, structure=np.ones((3, 3, 3), bool))
    sizes = np.bincount(labels.ravel(), minlength=n + 1)[1:]
    kept = [k + 1 for k in np.argsort(-sizes, kind="stable") if sizes[k] * voxel_mm3 >= small_mm3]
    if not kept:
        return None, f"the source's lesion mask holds no lesion of {small_mm3:g} mm3 or more"
    lesion = np.isin(labels, kept)
    idx = int(np.argmax(lesion.sum(axis=(0, 1))))
    cut = np.argwhere(lesion[:, :, idx])
    ij = cut.mean(axis=0)
    centre = (affine @ np.array([ij[0], ij[1], idx, 1.0]))[:3]
    body = ndimage.binary_fill_holes(head_mask(data)[:, :, idx])
    inside = np.argwhere(body | lesion[:, :, idx])
    world_x = lambda vox: (affine @ np.c_[vox, np.full(len(vox), idx), np.ones(len(vox))].T)[0]  # noqa: E731
    xs = world_x(inside)
    midline = (np.percentile(xs, 1) + np.percentile(xs, 99)) / 2.0
    right = float((world_x(cut) > midline).mean())  # RAS: x grows to the patient's right
    side: Literal["left", "right", "bilateral"] | None = (
        "right" if right >= ONE_SIDE_SHARE else "left" if right <= 1 - ONE_SIDE_SHARE
        else "bilateral" if min(right, 1 - right) >= BOTH_SIDES_SHARE else None)
    largest = labels == kept[0]
    placed = Placement(
        target="lesion", plane="axial", slice_index=idx,
        position_mm=slice_position(affine, data.shape, 2, idx, centre), located_by=MASK_LOCATED,
        volume_mm3=round(float(sizes[kept[0] - 1]) * voxel_mm3, 1), count=len(kept),
        largest_mm3=round(float(sizes[kept[0] - 1]) * voxel_mm3, 1),
        smallest_mm3=round(float(sizes[kept[-1] - 1]) * voxel_mm3, 1),
        total_mm3=round(float(sizes.sum()) * voxel_mm3, 1),  # the whole mask: its lesion load
        largest_centre_mm=[round(float(v), 2) for v in (affine @ np.append(np.argwhere(largest).mean(axis=0),
                                                                            1.0))[:3]],
        target_fraction=round(float(len(cut)) / max(int(body.sum()), 1), 4),
        centre_mm=[round(float(v), 2) for v in centre])
    if side is not None:
        placed.laterality = side
    placed.fov_mm, diameter = _in_plane_size(lesion[:, :, idx], affine, data.shape)
    if diameter is not None:
        placed.diameter_mm = diameter
    return placed, ""


ONE_PART_SHARE = 0.9  # a slice's lesion is one lesion where its largest in-plane part holds this share of its area


def _in_plane_size(cut: np.ndarray, affine: np.ndarray, shape: tuple[int, ...]) -> tuple[float, float | None]:
    """The width of the axial slice's field of view (left to right, mm) and, where the slice's lesion is one part
    (``ONE_PART_SHARE``), its largest in-plane diameter (mm, between the outer edges of its pixels): what a reader
    measures on the slice, given the field of view."""
    from scipy import ndimage
    from scipy.spatial import ConvexHull, QhullError

    spacing = voxel_sizes(affine)
    fov = round(float(shape[0] * spacing[0]), 1)
    parts, n = ndimage.label(cut, structure=np.ones((3, 3), bool))
    areas = np.bincount(parts.ravel(), minlength=n + 1)[1:]
    if n == 0 or areas.max() < ONE_PART_SHARE * areas.sum():
        return fov, None
    basis = np.linalg.qr(affine[:3, :2])[0]  # the slice's plane, orthonormal: distances kept in 2 coordinates
    pts = np.argwhere(parts == int(np.argmax(areas)) + 1) @ affine[:3, :2].T @ basis
    try:
        pts = pts[ConvexHull(pts).vertices]
    except (QhullError, ValueError):  # a line or a point: every pixel is a hull point
        pass
    far = float(np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=-1)).max()) if len(pts) > 1 else 0.0
    return fov, round(far + float(spacing[:2].mean()), 1)


def tell_mask_lobe(placed: Placement, mask: np.ndarray, data: np.ndarray, affine: np.ndarray, fit: Any) -> None:
    """Add to a mask-placed lesion the lobes its voxels lie in (the AAL2 lobes of lobes.yaml carried onto the series
    by its anatomy fit): ``lobes_in_slice`` and ``lobes`` (shares of the shown slice's lesion and of the whole mask)
    and ``lobe`` where lobes.told_lobe names one, with the lobes the image rules out (``lobes_ruled_out``)."""
    from curation.imaging import anatomy, lobes

    maps = anatomy.template_maps(2.0)
    small, small_aff = _small(data, affine)
    on_small = fit.on_series([lobes.lobe_map(2.0).astype(np.float32)], maps, small.shape, small_aff,
                             interpolator="genericLabel")[0]
    step = _small_step(affine)
    codes = np.rint(on_small).astype(np.int64)

    def lobe_codes(voxels: np.ndarray) -> np.ndarray:  # the 2 mm grid's code at each full-grid voxel
        near = np.minimum(np.rint(voxels / step).astype(np.int64), np.array(codes.shape) - 1)
        return codes[tuple(near.T)]

    whole = np.argwhere(mask > 0)
    in_slice = whole[whole[:, 2] == placed.slice_index]
    placed.lobes_in_slice = lobes.lobe_shares(lobe_codes(in_slice))
    placed.lobes = lobes.lobe_shares(lobe_codes(whole))
    lobe = lobes.told_lobe(placed.lobes_in_slice, placed.lobes)
    if lobe is not None:
        placed.lobe = lobe
        placed.lobes_ruled_out = lobes.ruled_out(placed.lobes_in_slice, lobe)


def _through_one_side(points: np.ndarray, axis: int, shown: Any) -> np.ndarray:
    """Where a bilateral target's slice passes: the mean of its landmarks, except in a plane whose normal separates
    them (a sagittal fallback), where the mean is the midline, between the two structures and through neither; there,
    the one landmark whose slice shows more of its region (``shown``: point -> target fraction)."""
    mean = points.mean(axis=0)
    if len(points) < 2 or np.ptp(points[:, axis]) < 10.0:
        return mean
    return max(points, key=lambda q: shown(q))


def _place_lesions(out: Located, small: np.ndarray, small_aff: np.ndarray, gm: np.ndarray, wm: np.ndarray,
                   brain: np.ndarray, vent: np.ndarray, polarity: str, p: NormalizeParams, affine: np.ndarray,
                   shape: tuple[int, ...], fraction: Any) -> None:
    """The lesion target of a sequence where lesions are unlike any normal tissue (lesions.find_lesions): the axial
    slice showing the most lesion, with the count, largest and smallest lesion; none where the finder cannot decide."""
    from curation.imaging import lesions

    voxel_mm3 = float(abs(np.linalg.det(small_aff[:3, :3])))
    found = lesions.find_lesions(small, gm, wm, brain, polarity, seed_z=p.lesion_seed_z, grow_z=p.lesion_grow_z,
                                 grey_seed_z=p.lesion_grey_seed_z, grey_grow_z=p.lesion_grey_grow_z,
                                 min_voxels=max(2, int(np.ceil(p.lesion_min_mm3 / voxel_mm3))),
                                 small_voxels=max(2, int(np.ceil(p.lesion_small_mm3 / voxel_mm3))),
                                 ventricles=vent)
    if found is None:
        out.anatomy.not_located["lesion"] = "the grown clusters of outlying voxels do not reach the minimum size"
        return
    centre = (small_aff @ np.append(found.slice_centroid_vox, 1.0))[:3]
    idx = slice_index(affine, shape, 2, centre)
    if idx is None:
        out.anatomy.not_located["lesion"] = "the lesion lies outside the volume's field of view"
        return
    largest = (small_aff @ np.append(np.argwhere(found.labels == 1).mean(axis=0), 1.0))[:3]
    out.targets.append(Placement(target="lesion", plane="axial", slice_index=idx,
                                 position_mm=slice_position(affine, shape, 2, idx, centre),
                                 located_by=f"intensity_outlier:{polarity}",
                                 volume_mm3=round(found.voxels[0] * voxel_mm3, 1),
                                 count=len(found.voxels),
                                 largest_mm3=round(found.voxels[0] * voxel_mm3, 1),
                                 smallest_mm3=round(found.voxels[-1] * voxel_mm3, 1),
                                 total_mm3=round(sum(found.voxels) * voxel_mm3, 1),
                                 largest_centre_mm=[round(float(v), 2) for v in largest],
                                 target_fraction=fraction((found.labels > 0).astype(np.float32), 2, centre),
                                 centre_mm=[round(float(v), 2) for v in centre]))


def _separation(a: np.ndarray, b: np.ndarray) -> float:
    """How well intensity tells two tissues apart, 0 (the same distribution) to 1 (no overlap), either way round:
    |2 AUC - 1| of their voxel values, robust to bias fields and to any contrast."""
    from scipy.stats import rankdata

    rng = np.random.default_rng(0)
    a = a if len(a) <= 20000 else rng.choice(a, 20000, replace=False)
    b = b if len(b) <= 20000 else rng.choice(b, 20000, replace=False)
    ranks = rankdata(np.concatenate([a, b]))
    auc = (ranks[:len(a)].sum() - len(a) * (len(a) + 1) / 2) / (len(a) * len(b))
    return abs(2.0 * float(auc) - 1.0)


# a brain's tissues stand apart from their neighbours by at least this: ventricles from the white matter around them,
# or grey matter from the white matter beside it, compared within 6 mm so that a bias field (which a QA bottle shows
# as large-scale shading) cannot pass for tissue. Measured: real T1, T2, FLAIR, PD heads 0.32-0.94; a real Siemens
# QA bottle 0.05, a uniform cylinder 0.02
MIN_SEPARATION = 0.15
NEIGHBOUR_MM = 6.0


def _anatomy_check(data: np.ndarray, gm: np.ndarray, wm: np.ndarray, vent: np.ndarray,
                   voxel_mm: float = LESION_GRID_MM) -> str | None:
    """Why the fitted template cannot be trusted, or None: where the template puts the ventricles, the series must
    differ from the white matter around them, or where it puts grey matter from the white matter beside it (in any
    contrast: T1 and T2 order them oppositely). A uniform object, a phantom, or a fit that missed the brain, shows
    no such local difference."""
    from scipy import ndimage

    from curation.imaging.templatefit import head_mask

    # only what lies inside the object counts: a template tissue that the fit put on the background would
    # "separate" from the rest on any object at all (a bottle's edge)
    inside = ndimage.binary_fill_holes(head_mask(data))
    regions = {"grey matter": gm >= 0.7, "white matter": wm >= 0.9, "ventricles": vent >= 0.7}
    for name, sel in regions.items():
        if sel.sum() < 20:
            return f"the fitted template's {name} falls outside the volume"
        if (sel & inside).sum() < 0.5 * sel.sum():
            return f"the fitted template's {name} falls outside the imaged object; not a brain, or the fit failed"
        regions[name] = sel & inside
    grey, white, ventricles = regions["grey matter"], regions["white matter"], regions["ventricles"]
    near = max(1, int(round(NEIGHBOUR_MM / voxel_mm)))
    pairs = [(ventricles, ndimage.binary_dilation(ventricles, iterations=near) & white & ~ventricles),
             (ndimage.binary_dilation(white, iterations=near) & grey,
              ndimage.binary_dilation(grey, iterations=near) & white)]
    best = max((_separation(data[a], data[b]) for a, b in pairs if a.sum() >= 20 and b.sum() >= 20), default=0.0)
    if best < MIN_SEPARATION:
        return (f"no brain anatomy where the registered template expects it (ventricles, grey and white matter differ "
                f"from their neighbours by {best:.2f} < {MIN_SEPARATION}); not a brain, or the fit failed")
    return None
