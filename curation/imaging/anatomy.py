"""The labelled template: the MNI152 brain, a head built around it, and its targets.

The template is MNI ICBM152 2009a symmetric (T1 and grey/white matter probability maps), read from the nilearn wheel
without importing nilearn. It is skull-stripped; a head (CSF rim, skull, scalp, face, orbits, neck) is built around
it from distances to the brain, so that a whole-head series can be registered to it and the demo corpus has a face
for defacing to remove. Targets (landmarks and regions) are data: ``landmarks.yaml``. Registering the template to a
series is :mod:`curation.imaging.templatefit`; the face checks are :mod:`curation.imaging.face`, lesion finding
:mod:`curation.imaging.lesions`.
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


def load_on_grid(path: Path, shape: tuple[int, int, int], affine: np.ndarray, order: int = 1) -> np.ndarray:
    """An axis-aligned map in MNI space resampled onto an axis-aligned grid, 0 outside it: linear (``order`` 1), or
    nearest neighbour (0) for a label map."""
    import nibabel as nib
    from scipy import ndimage

    img: Any = nib.load(str(path))
    src = np.asarray(img.dataobj, dtype=np.float32)
    # voxel of the source for each target voxel: src_vox = inv(src_aff) @ aff @ vox (both diagonal)
    scale = np.diag(affine)[:3] / np.diag(img.affine)[:3]
    offset = (affine[:3, 3] - img.affine[:3, 3]) / np.diag(img.affine)[:3]
    return ndimage.affine_transform(src, scale, offset=offset, output_shape=shape, order=order, mode="constant",
                                    cval=0.0)


@functools.lru_cache(maxsize=4)
def template_maps(spacing: float) -> TemplateMaps:
    """The template brain and a head built around it, on the head grid at ``spacing`` mm (cached per process)."""
    shape, aff = head_grid(spacing)
    t1 = load_on_grid(template_file("t1"), shape, aff)
    gm = np.clip(load_on_grid(template_file("gm"), shape, aff) / 255.0, 0, 1)
    wm = np.clip(load_on_grid(template_file("wm"), shape, aff) / 255.0, 0, 1)
    brain = np.clip(t1 / 40.0, 0, 1)  # the skull-stripped T1 is 0 outside the brain; CSF inside it is ~70
    gm, wm = np.minimum(gm, brain), np.minimum(wm, brain)
    labels = _head_labels(brain > 0.5, spacing, aff)
    return TemplateMaps(aff, t1, gm.astype(np.float32), wm.astype(np.float32), brain.astype(np.float32), labels)


# the face of the template head (centre, radii in MNI mm): below the frontal lobes and in front of the temporal lobes
FACE = ((0.0, 62.0, -55.0), (55.0, 42.0, 40.0))
NOSE = ((0.0, 104.0, -46.0), (9.0, 14.0, 18.0))
ORBITS = (((-32.0, 62.0, -34.0), (12.0, 12.0, 11.0)), ((32.0, 62.0, -34.0), (12.0, 12.0, 11.0)))


def ellipsoid(world: tuple[np.ndarray, ...], centre: tuple[float, ...], radii: tuple[float, ...],
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
    neck = ellipsoid(world, (0.0, -25.0, -95.0), (48.0, 50.0, 45.0))
    face = ellipsoid(world, *FACE, power=4)
    nose = ellipsoid(world, *NOSE)
    orbits = ellipsoid(world, *ORBITS[0]) | ellipsoid(world, *ORBITS[1])
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
        inside |= ellipsoid(world, centre, t.region.radii_mm)
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
