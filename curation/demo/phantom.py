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
    cx, cy, cz = (nx - 1) / 2, (ny - 1) / 2 - 2, (nz - 1) / 2 + 2
    rx, ry, rz = nx * 0.42, ny * 0.42, nz * 0.42
    vol = np.full(shape, c["bg"], dtype=np.float32)
    scalp = _ellipsoid(grid, (cx, cy, cz), (rx, ry, rz))
    skull = _ellipsoid(grid, (cx, cy, cz), (rx - 2, ry - 2, rz - 2))
    brain_r = (rx - 4, ry - 4, rz - 4)
    brain = _ellipsoid(grid, (cx, cy, cz), brain_r)
    shrink = 1.0 - 0.12 * atrophy
    wm = _ellipsoid(grid, (cx, cy, cz), tuple(r * 0.72 * shrink for r in brain_r))
    vent_scale = 1.0 + 1.6 * atrophy
    vent_l = _ellipsoid(grid, (cx - 4, cy, cz + 1), (2.2 * vent_scale, 11 * (1 + 0.3 * atrophy), 4 * vent_scale))
    vent_r = _ellipsoid(grid, (cx + 4, cy, cz + 1), (2.2 * vent_scale, 11 * (1 + 0.3 * atrophy), 4 * vent_scale))
    # face: nose and orbits in front of the lower head, so defacing has something to remove
    nose = _ellipsoid(grid, (cx, cy + ry - 1, cz - rz * 0.45), (3.0, 5.0, 6.0))
    chin = _ellipsoid(grid, (cx, cy + ry * 0.7, cz - rz * 0.85), (rx * 0.45, 6.0, 4.0))
    vol[scalp] = c["scalp"]
    vol[skull] = c["skull"]
    vol[brain] = c["csf"]
    cortex = _ellipsoid(grid, (cx, cy, cz), tuple(r * (1 - 0.05 * atrophy) for r in brain_r))
    vol[cortex] = c["gm"]
    vol[wm] = c["wm"]
    vol[vent_l | vent_r] = c["csf"]
    vol[(nose | chin) & ~scalp] = c["face"]
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


def axial_png_array(vol: np.ndarray, z: int, scale: int = 3) -> np.ndarray:
    """A radiological-convention axial slice (patient left on image right, anterior up) as uint8."""
    sl = vol[:, :, z].astype(np.float32)
    img = np.flipud(sl.T)  # rows: anterior at top; columns: x increasing = patient right ... flipped below
    img = np.fliplr(img)  # radiological: patient right on image left
    hi = np.percentile(img, 99.5) or 1.0
    out = np.clip(img / hi * 255, 0, 255).astype(np.uint8)
    return np.kron(out, np.ones((scale, scale), dtype=np.uint8))
