"""Demo heads with real anatomy: the MNI152 2009a brain (nilearn's wheel) inside a synthetic head and face.

Arrays are indexed [x, y, z] in RAS+ voxel order on an MNI-aligned 1.5 mm grid (``SHAPE``, ``AFFINE``; world
coordinates of an unmoved head are MNI coordinates). Tissue intensities per sequence come from the template's grey /
white matter probabilities (partial volumes kept); atrophy enlarges the lateral ventricles and shrinks the
hippocampi and the cortex (distance-based morphology on the tissue maps); a lesion is a sphere or an ovoid, and a
case report's figure may add more lesions, oedema, a necrotic core and mass effect (``Pathology``); a head ``Pose``
turns and shifts the head as a patient lies differently at each visit. A ``Subject`` gives each participant a brain
of their own: the shape of another population's brain (``anatomy_warp.npz``: the MNI152 template registered to
pydeface's mean head of real people, made by ``scripts/make_demo_anatomy.py``) to a seeded degree, and a seeded
size, so the anatomy fit meets brains that are not its template. Everything is a pure function of its arguments, so
``ground_truth`` recomputes the voxels of each target for a test.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curation.imaging import anatomy

GRID_MM = 1.5
SHAPE, AFFINE = anatomy.head_grid(GRID_MM)
SPACING = (GRID_MM, GRID_MM, GRID_MM)

# tissue -> intensity per sequence, roughly the contrast of each MR weighting
CONTRAST: dict[str, dict[str, float]] = {
    "T1w": {"bg": 0, "scalp": 135, "skull": 18, "csf": 22, "gm": 78, "wm": 118, "lesion": 55, "face": 120},
    # T1 after gadolinium: an enhancing lesion (a necrotic one enhances as a ring round its dark centre)
    "T1c": {"bg": 0, "scalp": 140, "skull": 18, "csf": 22, "gm": 80, "wm": 118, "lesion": 185, "face": 125},
    "T2w": {"bg": 0, "scalp": 90, "skull": 12, "csf": 175, "gm": 92, "wm": 62, "lesion": 160, "face": 80},
    "FLAIR": {"bg": 0, "scalp": 95, "skull": 10, "csf": 14, "gm": 88, "wm": 66, "lesion": 165, "face": 85},
    "SWI": {"bg": 0, "scalp": 80, "skull": 10, "csf": 110, "gm": 70, "wm": 85, "lesion": 12, "face": 70},
    "DWI": {"bg": 0, "scalp": 30, "skull": 5, "csf": 10, "gm": 60, "wm": 55, "lesion": 170, "face": 25},
}
PIVOT_MM = np.array([0.0, -18.0, 10.0])  # a head turns about the middle of the brain


@dataclass(frozen=True)
class Lesion:
    center: tuple[float, float, float]  # fractional position in the unmoved head's grid, RAS order
    radius_vox: float  # in grid voxels (GRID_MM)
    # an ovoid: the radius scaled along x, y, z (an MS plaque elongated across the ventricle's wall)
    axes: tuple[float, float, float] = (1.0, 1.0, 1.0)

    @staticmethod
    def at_mm(x: float, y: float, z: float, radius_mm: float,
              axes: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> Lesion:
        """A lesion centred at MNI (x, y, z) mm of the unmoved head."""
        vox = np.linalg.inv(AFFINE) @ np.array([x, y, z, 1.0])
        frac = vox[:3] / (np.asarray(SHAPE) - 1)
        return Lesion(tuple(round(float(v), 4) for v in frac), round(radius_mm / GRID_MM, 3), axes)  # type: ignore[arg-type]

    def center_mm(self) -> np.ndarray:
        vox = np.asarray(self.center) * (np.asarray(SHAPE) - 1)
        return (AFFINE @ np.append(vox, 1.0))[:3]

    @property
    def radius_mm(self) -> float:
        return self.radius_vox * GRID_MM


@dataclass(frozen=True)
class Pose:
    """Rigid head pose: rotation (degrees about x, y, z through PIVOT_MM), then translation (mm)."""

    rotation_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    translation_mm: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @staticmethod
    def seeded(seed: int) -> Pose:
        rng = np.random.default_rng(seed)
        rot = rng.uniform(-5.0, 5.0, 3)
        shift = rng.uniform(-6.0, 6.0, 3)
        return Pose(tuple(round(float(v), 2) for v in rot), tuple(round(float(v), 2) for v in shift))  # type: ignore[arg-type]

    def matrix(self) -> np.ndarray:
        """4x4 map from the unmoved head's world (MNI mm) to this head's world."""
        ax, ay, az = np.radians(self.rotation_deg)
        rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
        ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
        rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
        r = rz @ ry @ rx
        m = np.eye(4)
        m[:3, :3] = r
        m[:3, 3] = PIVOT_MM - r @ PIVOT_MM + np.asarray(self.translation_mm)
        return m

    def apply(self, points_mm: np.ndarray) -> np.ndarray:
        m = self.matrix()
        pts = np.atleast_2d(points_mm)
        return (m[:3, :3] @ pts.T).T + m[:3, 3]


IDENTITY = Pose()
WARP = Path(__file__).with_name("anatomy_warp.npz")


@functools.lru_cache(maxsize=1)
def _warp() -> tuple[np.ndarray, np.ndarray, float]:
    """The stored displacement (3, X, Y, Z; mm from a demo-grid point to where the template's anatomy lies), its
    origin and step (mm)."""
    with np.load(WARP) as f:
        return f["displacement_mm"].astype(np.float32), f["origin_mm"].astype(np.float64), float(f["step_mm"])


@dataclass(frozen=True)
class Subject:
    """A participant's own brain: ``shape`` of the stored population difference (0: the template itself) and a
    size per axis (``scale``, about PIVOT_MM)."""

    shape: float = 0.0
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)

    def __post_init__(self) -> None:  # a list or array scale would make the subject unhashable and its == ambiguous
        object.__setattr__(self, "scale", tuple(float(v) for v in self.scale))

    @staticmethod
    def seeded(seed: int) -> Subject:
        rng = np.random.default_rng(seed)
        shape = rng.uniform(0.5, 1.1)
        scale = 1.0 + rng.uniform(-0.05, 0.05, 3)
        return Subject(round(float(shape), 3), tuple(round(float(v), 3) for v in scale))  # type: ignore[arg-type]

    def template_point(self, points_mm: np.ndarray) -> np.ndarray:
        """This subject's (unmoved) RAS points, (3, ...) -> where the template holds their anatomy, (3, ...)."""
        from scipy import ndimage

        pts = np.asarray(points_mm, np.float64)
        pivot = PIVOT_MM.reshape((3,) + (1,) * (pts.ndim - 1))
        scale = np.asarray(self.scale).reshape(pivot.shape)
        y = pivot + (pts - pivot) / scale
        if self.shape == 0.0:
            return y
        disp, origin, step = _warp()
        idx = [(y[k] - origin[k]) / step for k in range(3)]
        return np.stack([y[k] + self.shape * ndimage.map_coordinates(disp[k], idx, order=1, mode="nearest")
                         for k in range(3)])

    def from_template(self, points_mm: np.ndarray) -> np.ndarray:
        """Template RAS points (N, 3) -> this subject's unmoved points (the inverse, by fixed-point iteration)."""
        p = np.atleast_2d(np.asarray(points_mm, np.float64)).T
        y = p.copy()
        for _ in range(30):
            y = y + (p - self.template_point(y))
        return y.T


TEMPLATE = Subject()


@dataclass(frozen=True)
class Tissue:
    gm: np.ndarray
    wm: np.ndarray
    brain: np.ndarray
    hippocampus: np.ndarray
    lateral_ventricles: np.ndarray


@functools.lru_cache(maxsize=4)
def _tissue(atrophy: float) -> Tissue:
    """Grey / white matter maps with atrophy applied on the unmoved grid: ventricles grown by up to 5 mm, the grey
    matter of the hippocampi (by up to 45 %) and of the outer cortex (by up to 30 %) turned to CSF."""
    from scipy import ndimage

    maps = anatomy.template_maps(GRID_MM)
    gm, wm, brain = maps.gm.copy(), maps.wm.copy(), maps.brain
    vent0 = anatomy.region_mask("lateral_ventricles", maps)
    hip0 = anatomy.region_mask("hippocampus", maps)
    if atrophy > 0:
        grow = (ndimage.distance_transform_edt(~vent0, sampling=GRID_MM) <= 5.0 * atrophy) & (brain > 0.5)
        grow &= ~hip0
        gm[grow] = 0.0
        wm[grow] = 0.0
        # grey matter thinned where it is partial (the edges): the thresholded structure shrinks smoothly
        hip_zone = anatomy.region_mask("hippocampus", maps) | (
            ndimage.binary_dilation(hip0, iterations=2) & (gm > 0.2))
        gm[hip_zone] *= 1.0 - 0.45 * atrophy
        # and, past mild atrophy, its top turned to CSF, the way medial temporal atrophy reads on a coronal slice: a
        # lower hippocampus under a wider choroid fissure and temporal horn (thinning alone had left a slightly darker
        # hippocampus that no reader could grade; the review of the demo release, issue 29)
        z = np.arange(hip0.shape[2])[None, None, :]
        top = np.where(hip0, z, -1).max(axis=2, keepdims=True)
        from_top_mm = (top - z) * GRID_MM
        # its top voxel layer from atrophy 0.4, two of its five from 0.7: the height a reader grades lost, not only
        # its signal (one layer had read as MTA 2 where the key said marked; the sixth review, issue 29)
        lowered = hip0 & (from_top_mm < 5.0 * atrophy - 2.0)
        gm[lowered] = 0.0
        wm[lowered] = 0.0
        cortex = (ndimage.distance_transform_edt(brain > 0.5, sampling=GRID_MM) <= 4.0) & ~hip_zone
        gm[cortex] *= 1.0 - 0.3 * atrophy
    hip = anatomy.region_mask("hippocampus", maps, gm=gm, wm=wm)
    vent = anatomy.region_mask("lateral_ventricles", maps, gm=gm, wm=wm)
    return Tissue(gm, wm, brain, hip, vent)


@functools.lru_cache(maxsize=2)
def _source_voxels(pose: Pose, subject: Subject) -> np.ndarray:
    """For each voxel of a placed head: the template-grid voxel it shows (3, X, Y, Z)."""
    world = np.stack(np.broadcast_arrays(*anatomy.template_maps(GRID_MM).world())).astype(np.float64)
    inv = np.linalg.inv(pose.matrix())
    unmoved = np.einsum("ij,j...->i...", inv[:3, :3], world) + inv[:3, 3].reshape(3, 1, 1, 1)
    src = subject.template_point(unmoved)
    ainv = np.linalg.inv(AFFINE)
    return (np.einsum("ij,j...->i...", ainv[:3, :3], src) + ainv[:3, 3].reshape(3, 1, 1, 1)).astype(np.float32)


def _pose_array(arr: np.ndarray, pose: Pose, order: int = 1, subject: Subject = TEMPLATE) -> np.ndarray:
    """``arr`` on the template's unmoved grid, drawn as ``subject``'s brain after the head moved by ``pose``."""
    if pose == IDENTITY and subject == TEMPLATE:
        return arr
    from scipy import ndimage

    if subject == TEMPLATE:  # output voxel -> world -> unmoved world -> input voxel
        m = np.linalg.inv(AFFINE) @ np.linalg.inv(pose.matrix()) @ AFFINE
        return ndimage.affine_transform(arr.astype(np.float32), m[:3, :3], offset=m[:3, 3], output_shape=SHAPE,
                                        order=order, mode="constant", cval=0.0)
    return ndimage.map_coordinates(arr.astype(np.float32), _source_voxels(pose, subject), order=order,
                                   mode="constant", cval=0.0)


def _lesion_distance(lesion: Lesion) -> np.ndarray:
    """Each voxel's distance from the lesion's centre in units of its radius (ovoid axes applied)."""
    world = anatomy.template_maps(GRID_MM).world()
    c = lesion.center_mm()
    d2 = sum(((w - ci) / a) ** 2 for w, ci, a in zip(world, c, lesion.axes, strict=True))
    return np.sqrt(d2) / lesion.radius_mm


def _lesion_mask(lesion: Lesion, brain: np.ndarray) -> np.ndarray:
    return (_lesion_distance(lesion) <= 1.0) & (brain > 0.5)


@dataclass(frozen=True)
class Pathology:
    """What a case report's figure shows besides its principal lesion: more lesions of the same kind, vasogenic
    oedema in the white matter around each (``oedema_mm`` beyond its edge), a necrotic core (inner half of the
    radius), and mass effect (tissue pushed away from the principal lesion by up to ``mass_effect_mm``)."""

    more: tuple[Lesion, ...] = ()
    oedema_mm: float = 0.0
    necrotic: bool = False
    mass_effect_mm: float = 0.0


# oedema and necrosis per sequence: oedema bright on T2 / FLAIR and dark on T1; a necrotic core like fluid
PATHOLOGY_CONTRAST: dict[str, dict[str, float]] = {
    "T1w": {"oedema": 92, "necrosis": 30}, "T1c": {"oedema": 92, "necrosis": 30},
    "T2w": {"oedema": 140, "necrosis": 190},
    "FLAIR": {"oedema": 128, "necrosis": 45}, "SWI": {"oedema": 95, "necrosis": 100},
    "DWI": {"oedema": 70, "necrosis": 20},
}


def _push(vol: np.ndarray, lesion: Lesion, mm: float) -> np.ndarray:
    """Mass effect: the tissue around ``lesion`` displaced outward by up to ``mm`` (most at its edge, fading over
    three radii), so the neighbouring ventricle and sulci are compressed."""
    from scipy import ndimage

    world = np.broadcast_arrays(*anatomy.template_maps(GRID_MM).world())
    c = lesion.center_mm()
    rel = np.stack([w - ci for w, ci in zip(world, c, strict=True)])
    r = np.sqrt((rel**2).sum(axis=0)) + 1e-6
    edge = lesion.radius_mm
    shift = mm * np.exp(-np.clip(r - edge, 0, None) / (1.5 * edge)) * np.clip(r / edge, 0, 1)
    src_world = [w - shift * (rel[k] / r) for k, w in enumerate(world)]
    inv = np.linalg.inv(AFFINE)
    src_vox = [inv[k, 0] * src_world[0] + inv[k, 1] * src_world[1] + inv[k, 2] * src_world[2] + inv[k, 3]
               for k in range(3)]
    return ndimage.map_coordinates(vol, src_vox, order=1, mode="nearest").astype(np.float32)


def head(sequence: str, *, atrophy: float = 0.0, lesion: Lesion | None = None, seed: int = 0,
         pose: Pose = IDENTITY, pathology: Pathology | None = None, subject: Subject = TEMPLATE) -> np.ndarray:
    """A head volume for ``sequence`` (uint16, [x, y, z] on ``SHAPE``); ``atrophy`` in [0, 1]; ``pathology``
    (with a ``lesion``): what else a figure shows (more lesions, oedema, necrosis, mass effect); ``subject``: whose
    brain (the template's own by default)."""
    c = CONTRAST[sequence]
    maps = anatomy.template_maps(GRID_MM)
    t = _tissue(round(float(atrophy), 3))
    csf = np.clip(t.brain - t.gm - t.wm, 0.0, 1.0)
    inside = t.gm * c["gm"] + t.wm * c["wm"] + csf * c["csf"]
    outside = np.zeros(SHAPE, np.float32)
    for name, code in anatomy.LABELS.items():
        if name in ("bg", "brain"):
            continue
        outside[maps.labels == code] = c["csf"] if name in ("csf", "orbit") else c[name]
    outside[maps.labels == anatomy.LABELS["brain"]] = c["csf"]
    vol = inside + (1.0 - t.brain) * outside
    if lesion is not None and pathology is not None:
        vol = _pathology(vol, sequence, lesion, pathology, t)
    elif lesion is not None:
        vol[_lesion_mask(lesion, t.brain)] = c["lesion"]
    vol = _pose_array(vol.astype(np.float32), pose, subject=subject)
    rng = np.random.default_rng(seed)
    x = np.linspace(0, np.pi, SHAPE[0], dtype=np.float32)[:, None, None]
    z = np.linspace(0, np.pi, SHAPE[2], dtype=np.float32)[None, None, :]
    vol = vol * (1.0 + 0.08 * np.sin(x) * np.cos(z))  # smooth low-frequency bias
    vol = np.abs(vol + rng.normal(0, 3.0, size=SHAPE).astype(np.float32))  # Rician-like noise
    return np.clip(vol * 8, 0, 4095).astype(np.uint16)


def _pathology(vol: np.ndarray, sequence: str, lesion: Lesion, p: Pathology, t: Tissue) -> np.ndarray:
    c, pc = CONTRAST[sequence], PATHOLOGY_CONTRAST[sequence]
    brain = t.brain
    if p.mass_effect_mm > 0:
        vol = _push(vol.astype(np.float32), lesion, p.mass_effect_mm)
    lesions = [(les, _lesion_distance(les)) for les in (lesion, *p.more)]
    if p.oedema_mm > 0:  # every rim first, so a neighbour's rim never paints over a lesion
        for les, d in lesions:
            rim = (d > 1.0) & (d <= 1.0 + p.oedema_mm / les.radius_mm) & (t.wm > 0.4) & (brain > 0.5)
            vol[rim] = pc["oedema"]
    for _, d in lesions:
        vol[(d <= 1.0) & (brain > 0.5)] = c["lesion"]
        if p.necrotic:
            vol[(d <= 0.5) & (brain > 0.5)] = pc["necrosis"]
    return vol


def ground_truth(*, atrophy: float = 0.0, lesion: Lesion | None = None, pose: Pose = IDENTITY,
                 subject: Subject = TEMPLATE) -> dict[str, object]:
    """The voxels of each target on ``SHAPE`` (bool), the lesion's centre (world mm) and the volumes (mm3) of the
    head ``head(..., atrophy=, lesion=, pose=, subject=)`` draws."""
    t = _tissue(round(float(atrophy), 3))
    masks = {"hippocampus": t.hippocampus, "lateral_ventricles": t.lateral_ventricles,
             "brain": (t.gm + t.wm) >= 0.5}
    if lesion is not None:
        masks["lesion"] = _lesion_mask(lesion, t.brain)
    voxel = GRID_MM**3
    placed = {k: _pose_array(m.astype(np.float32), pose, subject=subject) >= 0.5 for k, m in masks.items()}
    out: dict[str, object] = dict(placed)
    # volumes of the subject's own brain (its size and shape); a pose does not change them
    if subject == TEMPLATE:
        sized = masks
    elif pose == IDENTITY:
        sized = placed
    else:
        sized = {k: _pose_array(m.astype(np.float32), IDENTITY, subject=subject) >= 0.5 for k, m in masks.items()}
    out["volumes_mm3"] = {k: round(float(m.sum()) * voxel, 1) for k, m in sized.items()}
    if lesion is not None:
        out["lesion_centre_mm"] = pose.apply(subject.from_template(lesion.center_mm()))[0]
        out["lesion_radius_mm"] = lesion.radius_mm
    return out


def brain_mask(atrophy: float = 0.0, pose: Pose = IDENTITY, subject: Subject = TEMPLATE) -> np.ndarray:
    """The voxels of ``head`` that hold brain (the template's brain, ventricles included), as bool [x, y, z]."""
    return _pose_array(_tissue(round(float(atrophy), 3)).brain, pose, subject=subject) >= 0.5


def face_parts() -> dict[str, np.ndarray]:
    """Face tissue in front of the brain, the nose and each orbit on the unmoved grid, for defacing checks."""
    maps = anatomy.template_maps(GRID_MM)
    world = maps.world()
    labels = maps.labels
    front_of_brain = world[1] > 75.0  # the frontal pole of the template lies at y = 73 mm
    nose = anatomy.ellipsoid(world, *anatomy.NOSE) & (labels == anatomy.LABELS["face"])
    orbits = [anatomy.ellipsoid(world, *o) & (labels == anatomy.LABELS["orbit"]) for o in anatomy.ORBITS]
    return {"front": front_of_brain & (labels > anatomy.LABELS["brain"]) & (labels != anatomy.LABELS["brain"]),
            "nose": nose, "orbit_left": orbits[0], "orbit_right": orbits[1]}


def axial_png_array(vol: np.ndarray, z: int, scale: int = 2) -> np.ndarray:
    """A radiological-convention axial slice (patient left on image right, anterior up) as uint8."""
    sl = vol[:, :, z].astype(np.float32)
    img = np.flipud(sl.T)  # rows: anterior at top; columns: x increasing = patient right ... flipped below
    img = np.fliplr(img)  # radiological: patient right on image left
    # the window's top at the brightest tissue, not a percentile of it: a percentile put the brain at white on DWI
    # (bright lesions are a few voxels), and a small lesion barely stood out (a clinical review of the demo)
    hi = float(np.percentile(img, 99.99)) or 1.0
    out = np.clip(img / hi * 255, 0, 255).astype(np.uint8)
    return np.kron(out, np.ones((scale, scale), dtype=np.uint8))
