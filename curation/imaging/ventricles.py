"""The lateral ventricles measured on the series itself, so that a volume read from a table (ADNIMERGE's FreeSurfer
``Ventricles``) can be checked against the image it is said to describe.

Where the anatomy fit puts the template's lateral ventricles (frontal horns, bodies and atria: the template's CSF
inside two ellipsoids around the bodies), grown by ``GROW_MM`` so that ventricles larger than the template's are
still inside, the series' voxels are split into fluid and tissue by Otsu's threshold (fluid is the dark class on T1,
the bright class on T2). The fluid connected to the template's ventricles is the measure, in mL of the series' own
space, both sides together, as FreeSurfer reports them. Sulcal fluid outside the region and fluid not connected to
the ventricles do not count.

Precision: one real patient's T1 and T2 (one grid), and the T1 tilted and resampled to 1.6 mm, lie within 20% of
their mean (tests/test_anatomy_real.py); a table's grades are about 50% apart, so a grade two or more away from the
image's is a disagreement, not noise (``generate`` refuses such a key). Other contrasts are not measured.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from nibabel.affines import voxel_sizes

# the sequences the ventricles are measured on, and whether fluid is the dark (-1) or the bright (+1) class there:
# those an anatomy item is shown on. Not FLAIR: its ventricular fluid is dark, but flow artefacts and the bright
# periventricular rim take from it (one real patient: 16 mL on FLAIR, 21 and 24 mL on T2 and T1)
FLUID = {"T1w": -1, "T2w": 1}
# the template's lateral ventricles: its CSF (at least MIN_CSF) inside these ellipsoids (centre, radii; MNI mm), one
# a side around the body landmark, long enough for the frontal horn and the atrium, shallow enough to leave out the
# temporal horn and the fourth ventricle
REGION = [((-14.0, -8.0, 14.0), (16.0, 42.0, 22.0)), ((14.0, -8.0, 14.0), (16.0, 42.0, 22.0))]
MIN_CSF = 0.5
GROW_MM = 4.0  # how far fluid may lie beyond the template's region: enlarged ventricles
MIN_VOXELS = 50  # a region with fewer voxels on the series (a slab that misses the ventricles) is not measured


@functools.lru_cache(maxsize=1)
def template_region(spacing: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """The region searched and the template's own lateral ventricles, as float masks on the template grid."""
    from curation.imaging import anatomy

    maps = anatomy.template_maps(spacing)
    world = maps.world()
    zone = np.zeros(maps.t1.shape, bool)
    for centre, radii in REGION:
        zone |= anatomy.ellipsoid(world, centre, radii)
    vent = zone & (maps.csf * (maps.brain > 0.5) >= MIN_CSF)
    return zone.astype(np.float32), vent.astype(np.float32)


def measure(small: np.ndarray, small_aff: np.ndarray, sequence: str | None, fit: Any) -> tuple[float | None, str]:
    """The lateral ventricles' volume (mL) of a series' 2 mm copy ``small`` through its anatomy fit, and how it
    was measured; (None, why) where it cannot be."""
    from scipy import ndimage
    from skimage.filters import threshold_otsu

    from curation.imaging import anatomy, templatefit

    polarity = FLUID.get(sequence or "")
    if polarity is None:
        return None, f"no fluid contrast configured for sequence {sequence}"
    maps = anatomy.template_maps(2.0)
    zone, vent = templatefit.template_on_series(fit, small.shape, small_aff, maps, list(template_region(2.0)))
    voxel_mm = float(voxel_sizes(small_aff).min())
    zone = ndimage.binary_dilation(zone >= 0.5, iterations=max(1, int(round(GROW_MM / voxel_mm))))
    core = vent >= 0.5
    if zone.sum() < MIN_VOXELS or core.sum() < MIN_VOXELS // 5:
        return None, "the template's ventricles fall outside the volume"
    values = small[zone].astype(np.float64)
    if np.ptp(values) <= 0:
        return None, "no contrast where the ventricles lie"
    cut = float(threshold_otsu(values))
    fluid = zone & ((small < cut) if polarity < 0 else (small > cut))
    labels, _ = ndimage.label(fluid)
    touching = np.unique(labels[core & fluid])
    touching = touching[touching > 0]
    if touching.size == 0:
        return None, "no fluid where the template puts the ventricles"
    volume_ml = float(np.isin(labels, touching).sum()) * abs(float(np.linalg.det(small_aff[:3, :3]))) / 1000.0
    return round(volume_ml, 1), "fluid (Otsu) connected to the fitted template's lateral ventricles"
