"""Anatomy by template registration: the MNI152 brain, a head around it, its targets, and where they lie in a series.

The template is MNI ICBM152 2009a symmetric (T1 and grey/white matter probability maps), read from the nilearn wheel
without importing nilearn. It is skull-stripped; a head (CSF rim, skull, scalp, face, orbits, neck) is built around
it from distances to the brain, so that a whole-head series can be registered to it and the demo corpus has a face
for defacing to remove. Targets (landmarks and regions) are data: ``landmarks.yaml``.

Registration (ANTs through antspyx, settings in registration.yaml): a top-aligned start, rigid onto the whole series,
then affine and SyN onto the series cut to the brain, on one ITK thread with a fixed seed, so a series gives the same
targets on every run; fits are kept in a content-addressed store (fitcache) and not computed twice.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from curation.imaging import fitcache

VERSION = "1"
LANDMARKS = Path(__file__).with_name("landmarks.yaml")
Tissue = Literal["gm", "wm", "csf", "brain"]
# tissue label -> code in a head label map
LABELS = {"bg": 0, "brain": 1, "csf": 2, "skull": 3, "scalp": 4, "face": 5, "orbit": 6}


class Region(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tissue: Tissue
    min_probability: float = Field(0.5, gt=0, le=1)
    radii_mm: tuple[float, float, float]


class TargetDef(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plane: Literal["axial", "coronal", "sagittal", "montage"]
    landmarks: dict[str, tuple[float, float, float]]
    region: Region


class TemplateFiles(BaseModel):
    model_config = ConfigDict(extra="forbid")
    package: str
    folder: str
    t1: str
    gm: str
    wm: str


class Landmarks(BaseModel):
    model_config = ConfigDict(extra="forbid")
    template: TemplateFiles
    targets: dict[Literal["hippocampus", "lateral_ventricles", "brain"], TargetDef]


class AnatomyError(ValueError):
    """The template is missing or cannot be fitted to a series."""


@functools.lru_cache(maxsize=1)
def landmarks() -> Landmarks:
    return Landmarks.model_validate(yaml.safe_load(LANDMARKS.read_text(encoding="utf-8")))


def template_file(name: Literal["t1", "gm", "wm"]) -> Path:
    """A template file inside its package, found without importing the package (nilearn's import is heavy)."""
    t = landmarks().template
    spec = importlib.util.find_spec(t.package)
    if spec is None or not spec.submodule_search_locations:
        raise AnatomyError(f"package {t.package} is not installed; reinstall the project's dependencies")
    path = Path(next(iter(spec.submodule_search_locations))) / t.folder / getattr(t, name)
    if not path.is_file():
        raise AnatomyError(f"{t.package}: template file {path.name} is missing; reinstall the project's dependencies")
    return path


# ----------------------------------------------------------------------------- template on a grid
# the grid of the demo heads and of the registration template: MNI-aligned, covering a whole head with its face
HEAD_BOX_MM = ((-88.0, 88.0), (-122.0, 116.0), (-85.0, 100.0))


def head_grid(spacing: float) -> tuple[tuple[int, int, int], np.ndarray]:
    """Shape and RAS affine of an MNI-aligned grid at ``spacing`` mm over HEAD_BOX_MM."""
    shape = tuple(int(round((hi - lo) / spacing)) + 1 for lo, hi in HEAD_BOX_MM)
    aff = np.diag([spacing, spacing, spacing, 1.0])
    aff[:3, 3] = [lo for lo, _ in HEAD_BOX_MM]
    return (shape[0], shape[1], shape[2]), aff


@dataclass(frozen=True)
class TemplateMaps:
    """Template maps on a head grid, [x, y, z] RAS voxel order; probabilities in [0, 1]."""

    affine: np.ndarray
    t1: np.ndarray
    gm: np.ndarray
    wm: np.ndarray
    brain: np.ndarray  # float in [0, 1]: the template's (skull-stripped) brain, ventricles included
    labels: np.ndarray  # uint8 head labels (LABELS), brain included

    @property
    def csf(self) -> np.ndarray:
        return np.clip(self.brain - self.gm - self.wm, 0.0, 1.0)

    @property
    def spacing(self) -> float:
        return float(self.affine[0, 0])

    def world(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """RAS mm coordinates of every voxel, one array per axis."""
        shape = self.t1.shape
        return tuple(self.affine[k, k] * np.arange(shape[k], dtype=np.float32)[tuple(  # type: ignore[return-value]
            slice(None) if a == k else None for a in range(3))] + self.affine[k, 3] for k in range(3))


def _load_on_grid(path: Path, shape: tuple[int, int, int], affine: np.ndarray) -> np.ndarray:
    """A 1 mm axis-aligned template map resampled (linear) onto an axis-aligned grid, 0 outside it."""
    import nibabel as nib
    from scipy import ndimage

    img: Any = nib.load(str(path))
    src = np.asarray(img.dataobj, dtype=np.float32)
    # voxel of the source for each target voxel: src_vox = inv(src_aff) @ aff @ vox (both diagonal)
    scale = np.diag(affine)[:3] / np.diag(img.affine)[:3]
    offset = (affine[:3, 3] - img.affine[:3, 3]) / np.diag(img.affine)[:3]
    return ndimage.affine_transform(src, scale, offset=offset, output_shape=shape, order=1, mode="constant", cval=0.0)


@functools.lru_cache(maxsize=4)
def template_maps(spacing: float) -> TemplateMaps:
    """The template brain and a head built around it, on the head grid at ``spacing`` mm (cached per process)."""
    shape, aff = head_grid(spacing)
    t1 = _load_on_grid(template_file("t1"), shape, aff)
    gm = np.clip(_load_on_grid(template_file("gm"), shape, aff) / 255.0, 0, 1)
    wm = np.clip(_load_on_grid(template_file("wm"), shape, aff) / 255.0, 0, 1)
    brain = np.clip(t1 / 40.0, 0, 1)  # the skull-stripped T1 is 0 outside the brain; CSF inside it is ~70
    gm, wm = np.minimum(gm, brain), np.minimum(wm, brain)
    labels = _head_labels(brain > 0.5, spacing, aff)
    return TemplateMaps(aff, t1, gm.astype(np.float32), wm.astype(np.float32), brain.astype(np.float32), labels)


# the face of the template head (centre, radii in MNI mm): below the frontal lobes and in front of the temporal lobes
FACE = ((0.0, 62.0, -55.0), (55.0, 42.0, 40.0))
NOSE = ((0.0, 104.0, -46.0), (9.0, 14.0, 18.0))
ORBITS = (((-32.0, 62.0, -34.0), (12.0, 12.0, 11.0)), ((32.0, 62.0, -34.0), (12.0, 12.0, 11.0)))


def _ellipsoid(world: tuple[np.ndarray, ...], centre: tuple[float, ...], radii: tuple[float, ...],
               power: int = 2) -> np.ndarray:
    acc: Any = 0.0
    for g, c, r in zip(world, centre, radii, strict=True):
        acc = acc + np.abs((g - c) / r) ** power
    return np.asarray(acc <= 1.0)


def _head_labels(brain: np.ndarray, spacing: float, aff: np.ndarray) -> np.ndarray:
    """CSF rim, skull and scalp as shells around the brain's smoothed hull; face, orbits, nose and neck in front of
    and below it, so the head has the outline (and the face) of a real head."""
    from scipy import ndimage

    shape = brain.shape
    world = tuple(aff[k, k] * np.arange(shape[k], dtype=np.float32)[tuple(
        slice(None) if a == k else None for a in range(3))] + aff[k, 3] for k in range(3))
    # hull: the brain with its sulci and the notch under the frontal lobes closed (downsampled closing, cheap)
    step = max(1, int(round(4.0 / spacing)))
    small = brain[::step, ::step, ::step]
    hull_small = ndimage.binary_closing(small, structure=ndimage.generate_binary_structure(3, 1), iterations=3,
                                        border_value=0) | small
    hull_small = ndimage.binary_fill_holes(hull_small)
    hull = np.zeros(shape, bool)
    up = np.repeat(np.repeat(np.repeat(hull_small, step, 0), step, 1), step, 2)[:shape[0], :shape[1], :shape[2]]
    hull[:up.shape[0], :up.shape[1], :up.shape[2]] = up
    hull |= brain
    dist = ndimage.distance_transform_edt(~hull, sampling=spacing)
    z = world[2]
    labels = np.zeros(shape, np.uint8)
    neck = _ellipsoid(world, (0.0, -25.0, -95.0), (48.0, 50.0, 45.0))
    face = _ellipsoid(world, *FACE, power=4)
    nose = _ellipsoid(world, *NOSE)
    orbits = _ellipsoid(world, *ORBITS[0]) | _ellipsoid(world, *ORBITS[1])
    soft = face | nose | neck
    labels[soft] = LABELS["face"]
    labels[(dist <= 14.0) & (z > -75.0)] = LABELS["scalp"]
    labels[(dist <= 9.0) & (z > -75.0)] = LABELS["skull"]
    labels[(dist <= 3.0) & (z > -75.0)] = LABELS["csf"]
    labels[orbits & (labels != LABELS["csf"])] = LABELS["orbit"]
    labels[soft & (labels == LABELS["bg"])] = LABELS["face"]
    labels[brain] = LABELS["brain"]
    return labels


def region_mask(target: str, maps: TemplateMaps, *, gm: np.ndarray | None = None, wm: np.ndarray | None = None,
                brain: np.ndarray | None = None) -> np.ndarray:
    """The voxels of ``target`` on the maps' grid (per landmarks.yaml); tissue maps may be given (an atrophied
    head), else the template's own."""
    t = landmarks().targets[target]  # type: ignore[index]
    gm = maps.gm if gm is None else gm
    wm = maps.wm if wm is None else wm
    brain = maps.brain if brain is None else brain
    prob = {"gm": gm, "wm": wm, "csf": np.clip(brain - gm - wm, 0, 1), "brain": brain}[t.region.tissue]
    world = maps.world()
    inside = np.zeros(prob.shape, bool)
    for centre in t.landmarks.values():
        inside |= _ellipsoid(world, centre, t.region.radii_mm)
    return inside & (prob >= t.region.min_probability)


def template_head(spacing: float) -> np.ndarray:
    """A T1-like head on the head grid: the template's own T1 inside the brain, shells and face outside."""
    maps = template_maps(spacing)
    out = maps.t1.copy()
    # outside the brain, T1-like values on the template's scale (CSF ~70, grey ~165, white ~220)
    values = {"csf": 30.0, "skull": 15.0, "scalp": 200.0, "face": 170.0, "orbit": 40.0}
    outside = maps.brain < 0.5
    for name, v in values.items():
        out[(maps.labels == LABELS[name]) & outside] = v
    return out.astype(np.float32)


# ----------------------------------------------------------------------------- registration to a series
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


def _ants() -> Any:
    """antspyx, with ITK on one thread unless the caller chose (the pipeline runs one volume per process; one
    thread and a fixed seed give the same fit on every run)."""
    import os

    os.environ.setdefault("ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS", "1")
    import ants

    ants.config._random_seed = registration_presets().seed  # what ants.registration passes as --random-seed
    return ants


def to_ants(data: np.ndarray, affine: np.ndarray) -> Any:
    """An [x, y, z] array with its RAS affine as an ANTs image (ITK's LPS world)."""
    ants = _ants()
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


def head_mask(data: np.ndarray) -> np.ndarray:
    """The head (or brain) of a volume: voxels above half the Otsu threshold, largest connected part."""
    from scipy import ndimage

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

        ants = _ants()
        pts = np.atleast_2d(np.asarray(points_mm, dtype=np.float64)) @ _LPS
        frame = pd.DataFrame(pts, columns=["x", "y", "z"])
        invert = [True] + [False] * (len(self._inv) - 1)
        out = ants.apply_transforms_to_points(3, frame, self._inv, whichtoinvert=invert)
        return out[["x", "y", "z"]].to_numpy(dtype=np.float64) @ _LPS

    def on_series(self, arrays: list[np.ndarray], maps: TemplateMaps, shape: tuple[int, ...],
                  affine: np.ndarray) -> list[np.ndarray]:
        """Template-grid ``arrays`` resampled (linear) onto a series grid (``shape`` with its RAS ``affine``)."""
        ants = _ants()
        ref = to_ants(np.zeros(tuple(shape[:3]), np.float32), affine)
        return [ants.apply_transforms(fixed=ref, moving=to_ants(a, maps.affine), transformlist=self._fwd,
                                      interpolator="linear").numpy().astype(np.float32) for a in arrays]

    def record(self) -> dict[str, Any]:
        """What the fit was, for the series' provenance (the linear part; the deformation is not written)."""
        p = registration_presets()
        return {"library": "antspyx", "presets": f"registration.yaml v{p.version}", "series_kind": self.kind,
                "template_to_series_ras": [[round(float(v), 5) for v in row] for row in self.matrix]}


def _linear_ras(path: str) -> np.ndarray:
    """An ANTs affine transform file (series LPS -> template LPS) as a RAS 4x4 matrix, template -> series."""
    ants = _ants()
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

    return fitcache.fingerprint([Path(__file__), REGISTRATION, LANDMARKS],
                                [template_file(n) for n in ("t1", "gm", "wm")], [f"antspyx {version('antspyx')}"])


def _fit(data: np.ndarray, affine: np.ndarray, sequence: str | None, work: Any) -> Fit:
    """fit_template's registration, its transform files written into ``work`` (a TemporaryDirectory)."""
    from scipy import ndimage

    ants = _ants()
    p = registration_presets()
    series = ants.resample_image(to_ants(data, affine), (p.grid_mm,) * 3, use_voxels=False, interp_type=0)
    moving = _template(sequence, p.grid_mm)
    arr = series.numpy()
    litres = float((arr > arr.min() + 1e-6).sum()) * p.grid_mm**3 / 1e6
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
    cut = ants.crop_indices(series, lo, hi).new_image_like(arr * placed)
    final = ants.registration(fixed=cut, moving=moving, initial_transform=rigid["fwdtransforms"],
                              outprefix=f"{work.name}/final_", **p.deformable.kwargs())
    fwd, inv = list(final["fwdtransforms"]), list(final["invtransforms"])
    linear = next(f for f in fwd if f.endswith(".mat"))
    warped = final["warpedmovout"].numpy()
    inside = placed & (warped > 0)
    metric = float(np.corrcoef(warped[inside], arr[inside])[0, 1]) if inside.sum() > 10 else 0.0
    return Fit(_linear_ras(linear), metric, kind, fwd, inv, work)


MIN_FACE_IN_VIEW = 0.05  # of the template's face region: less inside the field of view, and the face is not there
MAX_FACE_TISSUE = 0.02   # of the face region in view: less holding tissue, and the volume has no face to remove


@functools.lru_cache(maxsize=2)
def face_region(spacing: float) -> np.ndarray:
    """The template's face (FACE, NOSE and ORBITS in MNI mm) on the head grid, less the brain grown by 6 mm: what a
    head has in front of and below its frontal lobes, and a brain without its head has not."""
    from scipy import ndimage

    maps = template_maps(spacing)
    world = maps.world()
    face = _ellipsoid(world, *FACE, power=4) | _ellipsoid(world, *NOSE)
    for centre, radii in ORBITS:
        face |= _ellipsoid(world, centre, radii)
    grown = ndimage.binary_dilation(maps.brain > 0.1, iterations=max(1, int(round(6.0 / spacing))))
    return (face & ~grown).astype(np.float32)


def face_tissue(fit: Fit, data: np.ndarray, affine: np.ndarray) -> tuple[float, float]:
    """(share of the template's face region inside the series' field of view, share of that part holding tissue)."""
    p = registration_presets()
    series = _ants().resample_image(to_ants(data, affine), (p.grid_mm,) * 3, use_voxels=False, interp_type=0)
    grid = series.numpy()
    maps = template_maps(p.grid_mm)
    region = face_region(p.grid_mm)
    ref_aff = _ras_affine(series)
    on_series = fit.on_series([region], maps, grid.shape, ref_aff)[0] >= 0.5
    total = float(region.sum()) * (maps.spacing / p.grid_mm) ** 3
    in_view = float(on_series.sum()) / max(total, 1.0)
    tissue = float((head_mask(grid) & on_series).sum()) / max(int(on_series.sum()), 1)
    return round(min(in_view, 1.0), 4), round(tissue, 4)


def _ras_affine(img: Any) -> np.ndarray:
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


# ----------------------------------------------------------------------------- lesions
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
