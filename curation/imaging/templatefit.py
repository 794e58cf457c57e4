"""The template registered to a series (ANTs through antspyx, settings in registration.yaml).

A top-aligned start, rigid onto the whole series, then affine and SyN onto the series cut to the brain, on one ITK
thread with a fixed seed, so a series gives the same targets on every run; fits are kept in a content-addressed
store (fitcache) and not computed twice. One fit serves a series' anatomy targets and its defacing check.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from curation.imaging import fitcache
from curation.imaging.anatomy import LANDMARKS, AnatomyError, TemplateMaps, template_file, template_maps
from curation.schema import FitRecord

REGISTRATION = Path(__file__).with_name("registration.yaml")


class _Stage(BaseModel):
    """Keyword arguments of one ``ants.registration`` call."""

    model_config = ConfigDict(extra="forbid")
    type_of_transform: Literal["Rigid", "Similarity", "Affine", "SyN", "SyNOnly"]
    aff_metric: Literal["mattes", "GC", "meansquares"] = "mattes"
    syn_metric: Literal["mattes", "CC", "meansquares"] | None = None
    aff_random_sampling_rate: float = Field(0.2, gt=0, le=1)
    aff_iterations: tuple[int, ...]
    aff_shrink_factors: tuple[int, ...]
    aff_smoothing_sigmas: tuple[float, ...]
    reg_iterations: tuple[int, ...] | None = None

    def kwargs(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class Registration(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str
    grid_mm: float = Field(gt=0.5, le=4)
    seed: int
    max_brain_litres: float = Field(gt=0)
    scalp_above_brain_mm: float = Field(ge=0)
    top_depth_mm: float = Field(gt=0)
    rigid: _Stage
    brain_margin_mm: float = Field(ge=0)
    deformable: _Stage
    contrasts: dict[str, tuple[float, float, float]]


@functools.lru_cache(maxsize=1)
def registration_presets() -> Registration:
    return Registration.model_validate(yaml.safe_load(REGISTRATION.read_text(encoding="utf-8")))


_LPS = np.diag([-1.0, -1.0, 1.0])


def load_ants() -> Any:
    """antspyx, with ITK on one thread unless the caller chose (the pipeline runs one volume per process; one
    thread and a fixed seed give the same fit on every run)."""
    import os

    os.environ.setdefault("ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS", "1")
    import ants

    ants.config._random_seed = registration_presets().seed  # what ants.registration passes as --random-seed
    return ants


def to_ants(data: np.ndarray, affine: np.ndarray) -> Any:
    """An [x, y, z] array with its RAS affine as an ANTs image (ITK's LPS world)."""
    ants = load_ants()
    a = np.asarray(affine, dtype=np.float64)
    m = _LPS @ a[:3, :3]
    spacing = np.sqrt((m**2).sum(axis=0))
    origin = tuple(float(v) for v in _LPS @ a[:3, 3])
    return ants.from_numpy(np.ascontiguousarray(data, dtype=np.float32), origin=origin,
                           spacing=tuple(float(v) for v in spacing), direction=m / spacing)


def _world_lps(img: Any) -> np.ndarray:
    """LPS mm of every voxel of an ANTs image, shape (n, 3), in the array's C order."""
    d = np.asarray(img.direction) * np.asarray(img.spacing)
    idx = np.indices(img.shape, dtype=np.float32).reshape(3, -1).T
    return idx @ d.T.astype(np.float32) + np.asarray(img.origin, dtype=np.float32)


def _otsu(values: np.ndarray) -> float:
    hist, edges = np.histogram(values, bins=256)
    centres = (edges[:-1] + edges[1:]) / 2
    w = np.cumsum(hist)
    mu = np.cumsum(hist * centres)
    between = (mu[-1] * w - mu * w[-1]) ** 2 / np.maximum(w * (w[-1] - w), 1)
    return float(centres[int(np.argmax(between))])


# a volume whose border is this uniform holds its object on a constant background (a skull-stripped, masked or
# normalised brain: BraTS, ISLES, MSSEG, OpenNeuro derivatives); a head's border holds noise, or air zeroed in part
MIN_CONSTANT_BORDER = 0.95


def constant_background(data: np.ndarray) -> float | None:
    """The value that fills the volume around its object, or None when the border is not one constant value.

    A brain extracted and then rescaled (z-scored, a float scaling) keeps its background exactly constant but not
    necessarily at zero, nor below the brain's values (BraTS: -3.6 in a brain of mean 0); Otsu's threshold on such a
    volume cuts the brain, not the background."""
    faces = [data[0], data[-1], data[:, 0], data[:, -1], data[:, :, 0], data[:, :, -1]]
    border = np.concatenate([f.ravel() for f in faces])
    border = border[np.isfinite(border)]
    if border.size == 0:
        return None
    values, counts = np.unique(border, return_counts=True)
    k = int(np.argmax(counts))
    if counts[k] < MIN_CONSTANT_BORDER * border.size:
        return None
    return float(values[k])


def object_mask(data: np.ndarray, background: float | None) -> np.ndarray:
    """Voxels that differ from a constant ``background`` (up to float rounding of a resampled copy)."""
    finite = data[np.isfinite(data)]
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    return np.abs(data - np.float32(background)) > max(1e-4 * span, 1e-6)


def head_mask(data: np.ndarray) -> np.ndarray:
    """The head (or brain) of a volume, largest connected part: on a constant background every voxel that differs
    from it (constant_background), else the voxels above half the Otsu threshold."""
    from scipy import ndimage

    background = constant_background(data)
    if background is not None:
        fg = ndimage.binary_opening(object_mask(data, background))
    else:
        fg = data > 0.5 * _otsu(data[np.isfinite(data)])
    lab, n = ndimage.label(fg)
    if n > 1:
        sizes = np.bincount(lab.ravel())
        sizes[0] = 0
        fg = lab == int(np.argmax(sizes))
    return fg


def _top(img: Any, depth: float) -> np.ndarray:
    """LPS point at the top of the head: its z the head's highest (99.5th percentile), x and y the centre of the
    head's voxels within ``depth`` mm of it."""
    fg = head_mask(img.numpy()).ravel()
    pts = _world_lps(img)[fg]
    if len(pts) == 0:
        raise AnatomyError("the volume has no foreground to register")
    top = float(np.percentile(pts[:, 2], 99.5))
    c = pts[pts[:, 2] > top - depth].mean(axis=0).astype(np.float64)
    c[2] = top
    return c


@functools.lru_cache(maxsize=8)
def _template(sequence: str | None, spacing: float) -> Any:
    """The registration template for a contrast, as an ANTs image on the head grid."""
    maps = template_maps(spacing)
    weights = registration_presets().contrasts.get(sequence or "")
    if weights is None:
        return to_ants(maps.t1, maps.affine)
    g, w, c = weights
    return to_ants(g * maps.gm + w * maps.wm + c * maps.csf, maps.affine)


@dataclass
class Fit:
    """The template (MNI, RAS mm) registered to a series: ANTs' transform files (in ``_dir``, removed with the
    object), the series' registration grid, and the linear part as a RAS matrix (template mm -> series mm)."""

    matrix: np.ndarray  # 4x4 RAS affine, template mm -> series mm (the linear part of the fit)
    metric: float
    kind: Literal["head", "brain"]  # what the series holds: a whole head, or a brain without its head
    _fwd: list[str]
    _inv: list[str]
    _dir: Any

    def to_series(self, points_mm: np.ndarray) -> np.ndarray:
        """Template RAS points -> series RAS points through the whole fit (linear and deformable)."""
        import pandas as pd

        ants = load_ants()
        pts = np.atleast_2d(np.asarray(points_mm, dtype=np.float64)) @ _LPS
        frame = pd.DataFrame(pts, columns=["x", "y", "z"])
        invert = [True] + [False] * (len(self._inv) - 1)
        out = ants.apply_transforms_to_points(3, frame, self._inv, whichtoinvert=invert)
        return out[["x", "y", "z"]].to_numpy(dtype=np.float64) @ _LPS

    def on_series(self, arrays: list[np.ndarray], maps: TemplateMaps, shape: tuple[int, ...],
                  affine: np.ndarray, interpolator: str = "linear") -> list[np.ndarray]:
        """Template-grid ``arrays`` resampled onto a series grid (``shape`` with its RAS ``affine``): linear, or
        ANTs' ``genericLabel`` for a label map."""
        ants = load_ants()
        ref = to_ants(np.zeros(tuple(shape[:3]), np.float32), affine)
        return [ants.apply_transforms(fixed=ref, moving=to_ants(a, maps.affine), transformlist=self._fwd,
                                      interpolator=interpolator).numpy().astype(np.float32) for a in arrays]

    def close(self) -> None:
        """Remove the transform files now: a pool worker ends by os._exit, which runs no finalizer, so a fit left to
        the garbage collector there would leave its folder in the temp dir."""
        try:
            self._dir.cleanup()
        except OSError:  # a folder that cannot be removed now costs disk, never the series' result
            pass

    def record(self) -> FitRecord:
        """What the fit was, for the series' provenance and QC (the linear part; the deformation is not written)."""
        p = registration_presets()
        return FitRecord(library="antspyx", presets=f"registration.yaml v{p.version}", series_kind=self.kind,
                         template_to_series_ras=[[round(float(v), 5) for v in row] for row in self.matrix])


def _linear_ras(path: str) -> np.ndarray:
    """An ANTs affine transform file (series LPS -> template LPS) as a RAS 4x4 matrix, template -> series."""
    ants = load_ants()
    tx = ants.read_transform(path)
    par, centre = np.asarray(tx.parameters, np.float64), np.asarray(tx.fixed_parameters, np.float64)
    m = np.eye(4)
    m[:3, :3] = par[:9].reshape(3, 3)
    m[:3, 3] = par[9:12] + centre - m[:3, :3] @ centre
    flip = np.diag([-1.0, -1.0, 1.0, 1.0])
    return np.linalg.inv(flip @ m @ flip)


def fit_template(data: np.ndarray, affine: np.ndarray, sequence: str | None = None) -> Fit:
    """Register the template to a series (``data`` [x, y, z] with its RAS ``affine``), per registration.yaml:
    a top-aligned start, rigid onto the whole series, then affine and SyN onto the series cut to the brain.
    A series fitted before with the same code and settings is read back from the fit store (fitcache)."""
    import tempfile

    k = fitcache.key(data, affine, sequence, _fit_code())
    work = tempfile.TemporaryDirectory(prefix="anatomy-fit-")
    with fitcache.claimed(k):
        hit = fitcache.load(k, Path(work.name))
        if hit is not None:
            return Fit(np.asarray(hit.matrix, np.float64), hit.metric, "brain" if hit.kind == "brain" else "head",
                       [f"{work.name}/{n}" for n in hit.fwd], [f"{work.name}/{n}" for n in hit.inv], work)
        fit = _fit(data, affine, sequence, work)
        fitcache.store(k, fitcache.Entry(fit.matrix.tolist(), fit.metric, fit.kind, [Path(f).name for f in fit._fwd],
                                         [Path(f).name for f in fit._inv]),
                       {Path(f).name: f for f in [*fit._fwd, *fit._inv]})
    return fit


@functools.lru_cache(maxsize=1)
def _fit_code() -> tuple[bytes, ...]:
    """What a fit depends on besides the series: this module, its settings, the template and antspyx."""
    from importlib.metadata import version

    from curation.imaging import anatomy

    return fitcache.fingerprint([Path(__file__), Path(anatomy.__file__), REGISTRATION, LANDMARKS],
                                [template_file(n) for n in ("t1", "gm", "wm")], [f"antspyx {version('antspyx')}"])


def _fit(data: np.ndarray, affine: np.ndarray, sequence: str | None, work: Any) -> Fit:
    """fit_template's registration, its transform files written into ``work`` (a TemporaryDirectory)."""
    from scipy import ndimage

    ants = load_ants()
    p = registration_presets()
    series = ants.resample_image(to_ants(data, affine), (p.grid_mm,) * 3, use_voxels=False, interp_type=0)
    moving = _template(sequence, p.grid_mm)
    arr = series.numpy()
    background = constant_background(arr)
    occupied = arr > arr.min() + 1e-6 if background is None else object_mask(arr, background)
    litres = float(occupied.sum()) * p.grid_mm**3 / 1e6
    kind: Literal["head", "brain"] = "brain" if litres < p.max_brain_litres else "head"
    start = _top(moving, p.top_depth_mm) + np.array([0.0, 0.0, p.scalp_above_brain_mm if kind == "head" else 0.0])
    shift = start - _top(series, p.top_depth_mm)
    init = ants.create_ants_transform(transform_type="AffineTransform", dimension=3,
                                      translation=tuple(float(v) for v in shift))
    ants.write_transform(init, f"{work.name}/start.mat")
    rigid = ants.registration(fixed=series, moving=moving, initial_transform=[f"{work.name}/start.mat"],
                              outprefix=f"{work.name}/rigid_", **p.rigid.kwargs())
    brain = to_ants((template_maps(p.grid_mm).brain > 0.5).astype(np.float32), template_maps(p.grid_mm).affine)
    placed = ants.apply_transforms(fixed=series, moving=brain, transformlist=rigid["fwdtransforms"]).numpy() > 0.5
    grow = max(0, int(round(p.brain_margin_mm / p.grid_mm)))
    if grow:
        placed = ndimage.binary_dilation(placed, iterations=grow)
    # the series cut to the placed brain and cropped to its box: the affine and SyN stages register only the
    # voxels they can use (a long neck or shoulders in the field of view cost nothing), and the deformation field
    # covers that box (outside it, which holds no target, the fit is its linear part)
    if not placed.any():
        raise AnatomyError("the rigidly placed template brain lies wholly outside the volume")
    nz = np.nonzero(placed)
    lo, hi = [int(a.min()) for a in nz], [int(a.max()) + 1 for a in nz]
    box = tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))
    placed, arr = placed[box], arr[box]
    # what lies outside the placed brain becomes background: the volume's own where it has one (a z-scored brain's
    # is below zero, and zero there is mid-grey tissue)
    outside = 0.0 if background is None else background
    cut = ants.crop_indices(series, lo, hi).new_image_like(np.where(placed, arr, np.float32(outside)))
    final = ants.registration(fixed=cut, moving=moving, initial_transform=rigid["fwdtransforms"],
                              outprefix=f"{work.name}/final_", **p.deformable.kwargs())
    fwd, inv = list(final["fwdtransforms"]), list(final["invtransforms"])
    linear = next(f for f in fwd if f.endswith(".mat"))
    warped = final["warpedmovout"].numpy()
    inside = placed & (warped > 0)
    metric = float(np.corrcoef(warped[inside], arr[inside])[0, 1]) if inside.sum() > 10 else 0.0
    return Fit(_linear_ras(linear), metric, kind, fwd, inv, work)


def ras_affine(img: Any) -> np.ndarray:
    """The RAS 4x4 affine of an ANTs image."""
    m = np.eye(4)
    d = np.asarray(img.direction) * np.asarray(img.spacing)
    m[:3, :3] = _LPS @ d
    m[:3, 3] = _LPS @ np.asarray(img.origin)
    return m


def template_on_series(fit: Fit, shape: tuple[int, ...], affine: np.ndarray, maps: TemplateMaps,
                       arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Template-grid ``arrays`` resampled (linear) onto a series grid through ``fit``."""
    return fit.on_series(arrays, maps, shape, affine)
