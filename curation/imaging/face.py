"""Whether a series has a face to remove: the template's face region carried onto the series by its fit."""

from __future__ import annotations

import functools

import numpy as np

from curation.imaging.anatomy import FACE, NOSE, ORBITS, ellipsoid, template_maps
from curation.imaging.templatefit import Fit, head_mask, load_ants, ras_affine, registration_presets, to_ants

MIN_FACE_IN_VIEW = 0.05  # of the template's face region: less inside the field of view, and the face is not there
MAX_FACE_TISSUE = 0.02   # of the face region in view: less holding tissue, and the volume has no face to remove


@functools.lru_cache(maxsize=2)
def face_region(spacing: float) -> np.ndarray:
    """The template's face (FACE, NOSE and ORBITS in MNI mm) on the head grid, less the brain grown by 6 mm: what a
    head has in front of and below its frontal lobes, and a brain without its head has not."""
    from scipy import ndimage

    maps = template_maps(spacing)
    world = maps.world()
    face = ellipsoid(world, *FACE, power=4) | ellipsoid(world, *NOSE)
    for centre, radii in ORBITS:
        face |= ellipsoid(world, centre, radii)
    grown = ndimage.binary_dilation(maps.brain > 0.1, iterations=max(1, int(round(6.0 / spacing))))
    return (face & ~grown).astype(np.float32)


def face_tissue(fit: Fit, data: np.ndarray, affine: np.ndarray) -> tuple[float, float]:
    """(share of the template's face region inside the series' field of view, share of that part holding tissue).

    The region is carried by the fit's linear part (``Fit.matrix``): the face lies in front of and below the brain,
    where the deformation adds little, and a check of a few per cent needs no more (the deformable fit through ANTs
    cost more than the defacing registration itself)."""
    from scipy import ndimage

    p = registration_presets()
    series = load_ants().resample_image(to_ants(data, affine), (p.grid_mm,) * 3, use_voxels=False, interp_type=0)
    grid = series.numpy()
    maps = template_maps(p.grid_mm)
    region = face_region(p.grid_mm)
    # series voxel -> series mm -> template mm -> template voxel
    to_template = np.linalg.inv(maps.affine) @ np.linalg.inv(fit.matrix) @ ras_affine(series)
    on_series = ndimage.affine_transform(region, to_template[:3, :3], offset=to_template[:3, 3],
                                         output_shape=grid.shape, order=1, mode="constant", cval=0.0) >= 0.5
    total = float(region.sum()) * (maps.spacing / p.grid_mm) ** 3
    in_view = float(on_series.sum()) / max(total, 1.0)
    tissue = float((head_mask(grid) & on_series).sum()) / max(int(on_series.sum()), 1)
    return round(min(in_view, 1.0), 4), round(tissue, 4)
