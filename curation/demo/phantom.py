"""Brain-like head phantoms: scalp, skull, grey/white matter, ventricles, a face and a lesion.

Arrays are indexed [x, y, z] in RAS+ voxel order (x to the right, y anterior, z superior).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPE = (72, 88, 64)
SPACING = (2.4, 2.4, 2.8)

# tissue -> intensity per sequence, roughly the contrast of each MR weighting
CONTRAST: dict[str, dict[str, float]] = {
    "T1w": {"bg": 0, "scalp": 135, "skull": 18, "csf": 22, "gm": 78, "wm": 118, "lesion": 55, "face": 120},
    "T2w": {"bg": 0, "scalp": 90, "skull": 12, "csf": 175, "gm": 92, "wm": 62, "lesion": 160, "face": 80},
    "FLAIR": {"bg": 0, "scalp": 95, "skull": 10, "csf": 14, "gm": 88, "wm": 66, "lesion": 165, "face": 85},
    "SWI": {"bg": 0, "scalp": 80, "skull": 10, "csf": 110, "gm": 70, "wm": 85, "lesion": 12, "face": 70},
    "DWI": {"bg": 0, "scalp": 30, "skull": 5, "csf": 10, "gm": 60, "wm": 55, "lesion": 170, "face": 25},
}


@dataclass(frozen=True)
class Lesion:
    center: tuple[float, float, float]  # fractional position in the volume, RAS order
    radius_vox: float


def _ellipsoid(grid: tuple[np.ndarray, ...], center: tuple[float, ...], radii: tuple[float, ...]) -> np.ndarray:
    acc = np.zeros(grid[0].shape, dtype=np.float32)
    for g, c, r in zip(grid, center, radii, strict=True):
        acc += ((g - c) / r) ** 2
    return acc <= 1.0


def head(
    sequence: str,
    *,
    atrophy: float = 0.0,
    lesion: Lesion | None = None,
    seed: int = 0,
    shape: tuple[int, int, int] = SHAPE,
) -> np.ndarray:
    """A head volume for ``sequence``; ``atrophy`` in [0, 1] widens ventricles and sulci."""
    c = CONTRAST[sequence]
    nx, ny, nz = shape
    grid = np.meshgrid(
        np.arange(nx, dtype=np.float32),
        np.arange(ny, dtype=np.float32),
        np.arange(nz, dtype=np.float32),
        indexing="ij",
    )
    (cx, cy, cz), (rx, ry, rz) = _geometry(shape)
    vol = np.full(shape, c["bg"], dtype=np.float32)
    scalp = _ellipsoid(grid, (cx, cy, cz), (rx, ry, rz))
    skull = _ellipsoid(grid, (cx, cy, cz), (rx - 2, ry - 2, rz - 2))
    brain_r = (rx - 4, ry - 4, rz - 4)
    fossa = _fossa(grid, shape)
    brain = _ellipsoid(grid, (cx, cy, cz), brain_r) & ~fossa
    shrink = 1.0 - 0.12 * atrophy
    wm = _ellipsoid(grid, (cx, cy, cz), tuple(r * 0.72 * shrink for r in brain_r))
    vent_scale = 1.0 + 1.6 * atrophy
    vent_l = _ellipsoid(grid, (cx - 4, cy, cz + 1), (2.2 * vent_scale, 11 * (1 + 0.3 * atrophy), 4 * vent_scale))
    vent_r = _ellipsoid(grid, (cx + 4, cy, cz + 1), (2.2 * vent_scale, 11 * (1 + 0.3 * atrophy), 4 * vent_scale))
    # face, orbits, nose and neck in front of and below the cranium, so defacing has something to remove
    face = _ellipsoid(grid, (cx, cy + 0.3 * ny, 0.3 * nz), (0.3 * nx, 0.18 * ny, 0.2 * nz))
    neck = _ellipsoid(grid, (cx, cy + 0.05 * ny, 0.1 * nz), (0.25 * nx, 0.25 * ny, 0.22 * nz))
    nose = _ellipsoid(grid, (cx, cy + 0.5 * ny, 0.33 * nz), (3.0, 4.0, 6.0))
    orbits = (_ellipsoid(grid, (cx - 0.15 * nx, cy + 0.38 * ny, 0.4 * nz), (3.0, 3.0, 3.0))
              | _ellipsoid(grid, (cx + 0.15 * nx, cy + 0.38 * ny, 0.4 * nz), (3.0, 3.0, 3.0)))
    vol[scalp] = c["scalp"]
    vol[skull] = c["skull"]
    vol[brain] = c["csf"]
    cortex = _ellipsoid(grid, (cx, cy, cz), tuple(r * (1 - 0.05 * atrophy) for r in brain_r))
    vol[cortex & ~fossa] = c["gm"]
    vol[wm & ~fossa] = c["wm"]
    vol[vent_l | vent_r] = c["csf"]
    vol[skull & fossa] = c["skull"]
    soft = ((face | neck | nose) & ~scalp) | (skull & fossa & face)
    vol[soft] = c["face"]
    vol[orbits & soft] = c["csf"]
    if lesion is not None:
        centre = tuple(f * (n - 1) for f, n in zip(lesion.center, shape, strict=True))
        les = _ellipsoid(grid, centre, (lesion.radius_vox,) * 3) & brain
        vol[les] = c["lesion"]
    rng = np.random.default_rng(seed)
    # smooth low-frequency bias plus Rician-like noise
    bias = 1.0 + 0.08 * np.sin(grid[0] / nx * np.pi) * np.cos(grid[2] / nz * np.pi)
    vol = vol * bias
    noise = rng.normal(0, 3.0, size=shape).astype(np.float32)
    vol = np.abs(vol + noise)
    return np.clip(vol * 8, 0, 4095).astype(np.uint16)


def brain_mask(shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """The voxels of ``head`` that hold brain (inside the skull), as bool [x, y, z]."""
    grid = np.meshgrid(*(np.arange(n, dtype=np.float32) for n in shape), indexing="ij")
    (cx, cy, cz), (rx, ry, rz) = _geometry(shape)
    return _ellipsoid(grid, (cx, cy, cz), (rx - 4, ry - 4, rz - 4)) & ~_fossa(grid, shape)


def _fossa(grid: tuple[np.ndarray, ...], shape: tuple[int, int, int]) -> np.ndarray:
    """The front-bottom corner of the cranium, below the frontal lobes, where orbits and sinuses sit."""
    (_, cy, cz), (_, ry, rz) = _geometry(shape)
    return (grid[1] - cy) / ry - (grid[2] - cz) / rz > 0.7


def _geometry(shape: tuple[int, int, int]) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    nx, ny, nz = shape
    return ((nx - 1) / 2, (ny - 1) / 2 - 0.06 * ny, (nz - 1) * 0.62), (nx * 0.42, ny * 0.4, nz * 0.36)


def axial_png_array(vol: np.ndarray, z: int, scale: int = 3) -> np.ndarray:
    """A radiological-convention axial slice (patient left on image right, anterior up) as uint8."""
    sl = vol[:, :, z].astype(np.float32)
    img = np.flipud(sl.T)  # rows: anterior at top; columns: x increasing = patient right ... flipped below
    img = np.fliplr(img)  # radiological: patient right on image left
    hi = np.percentile(img, 99.5) or 1.0
    out = np.clip(img / hi * 255, 0, 255).astype(np.uint8)
    return np.kron(out, np.ones((scale, scale), dtype=np.uint8))
