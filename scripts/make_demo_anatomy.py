"""Build ``curation/demo/anatomy_warp.npz``: how another population's brain differs from the fit's template.

The demo heads are drawn from the MNI152 2009a tissue maps, the same template the anatomy fit registers; drawn as
they are, the demo would be its own answer key. This script registers that template to an independent one, the mean
head that pydeface ships (an average of real heads of another cohort, made with another method), with bare antspyx at
settings of its own (not the project's registration.yaml): an affine of the two heads finds the mean head's brain,
then the template's brain goes onto that brain with SyN and cross-correlation, down to 3 mm. It keeps the
displacement: for each point of the demo grid, where the MNI template holds that point's anatomy.
``phantom.Subject`` scales it per participant, so each demo brain has that population's shape to a different degree,
with a size of its own.

Removed: the rigid part (where the mean head lies in its scanner space) and the mean shift of the brain; affine and
deformable differences are kept, smoothed over 9 mm. Stored at 4.5 mm in float16 (about 0.5 MB): data derived from
two public templates, not from any patient. Run: ``python scripts/make_demo_anatomy.py`` (minutes on two cores).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curation.imaging import anatomy, templatefit  # noqa: E402

OUT = ROOT / "curation" / "demo" / "anatomy_warp.npz"
STEP = 3  # field grid = every third voxel of the 1.5 mm demo grid (4.5 mm)
GRID = 1.5


def _pydeface_head() -> Path:
    spec = importlib.util.find_spec("pydeface")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "mean_reg2mean.nii.gz"


def _rigid_part(m: np.ndarray) -> np.ndarray:
    """The rotation and translation of a 4x4 affine (polar decomposition of its linear part)."""
    u, _s, vt = np.linalg.svd(m[:3, :3])
    r = u @ vt
    out = np.eye(4)
    out[:3, :3] = r
    out[:3, 3] = m[:3, 3]
    return out


def main() -> int:
    import ants
    import nibabel as nib
    from scipy import ndimage

    maps = anatomy.template_maps(GRID)
    img = nib.load(str(_pydeface_head()))
    fixed = templatefit.to_ants(np.asarray(img.dataobj, dtype=np.float32), img.affine)
    fixed = ants.resample_image(fixed, (GRID,) * 3, use_voxels=False, interp_type=0)
    linear = {"aff_iterations": (200, 100), "aff_shrink_factors": (4, 2), "aff_smoothing_sigmas": (2, 1),
              "random_seed": 5, "verbose": False}
    # 1. the template head (brain inside a synthetic head) onto the mean head, affine: where the mean head's brain is
    head = ants.registration(fixed=fixed, moving=templatefit.to_ants(anatomy.template_head(GRID), maps.affine),
                             type_of_transform="Affine", **linear)
    placed = ants.apply_transforms(fixed=fixed, moving=templatefit.to_ants(maps.brain, maps.affine),
                                   transformlist=head["fwdtransforms"]).numpy() > 0.5
    cut = fixed.new_image_like(fixed.numpy() * ndimage.binary_dilation(placed, iterations=4))
    # 2. brain to brain: the template's brain onto the mean head cut to its brain (grown by 6 mm), SyN with CC; a
    #    whole-head registration stretches the brain at the skull base, where the template's synthetic head differs
    brain = templatefit.to_ants(maps.t1 * (maps.brain > 0.5), maps.affine)
    reg = ants.registration(fixed=cut, moving=brain, type_of_transform="SyN", syn_metric="CC", syn_sampling=3,
                            initial_transform=head["fwdtransforms"], reg_iterations=(80, 40, 0), **linear)
    fwd = list(reg["fwdtransforms"])
    linear = next(f for f in fwd if f.endswith(".mat"))
    rigid = _rigid_part(templatefit._linear_ras(linear))  # template mm -> mean-head mm, its rotation and shift
    # the demo grid placed in the mean head's space by that rigid part; each voxel's template point, pulled back
    # through the whole registration, is read from coordinate maps of the template grid
    shape, aff = anatomy.head_grid(GRID)
    ref = templatefit.to_ants(np.zeros(shape, np.float32), rigid @ aff)
    coords = maps.world()
    full = np.broadcast_arrays(*coords)
    pulled = [ants.apply_transforms(fixed=ref, moving=templatefit.to_ants(np.ascontiguousarray(c, np.float32),
                                                                    maps.affine),
                                    transformlist=fwd, interpolator="linear").numpy() for c in full]
    # outside the template grid the coordinate maps read 0, which shows as a displacement of over 40 mm (nothing
    # real moves that far; the head box reaches 88 mm or more from 0 on every axis): there the displacement is
    # taken from the nearest voxel inside
    disp = np.stack([p - c for p, c in zip(pulled, full, strict=True)])
    valid = np.ones(shape, bool)
    for p, c in zip(pulled, full, strict=True):
        valid &= np.abs(p - c) < 40.0
    idx = ndimage.distance_transform_edt(~valid, return_distances=False, return_indices=True)
    disp = disp[:, idx[0], idx[1], idx[2]]
    brain = maps.brain > 0.5
    # a shift of the whole brain is where a head lies, not its shape (the demo's Pose moves heads): removed
    disp -= np.array([d[brain].mean() for d in disp]).reshape(3, 1, 1, 1)
    # smoothed over 9 mm: the shape of a brain, not the local stretch a whole-head registration makes at the skull base
    disp = np.stack([ndimage.gaussian_filter(d, 6.0, mode="nearest") for d in disp])
    coarse = disp[:, ::STEP, ::STEP, ::STEP].astype(np.float16)
    mag = np.sqrt((disp**2).sum(axis=0))[brain]
    print(f"displacement in the brain: median {np.median(mag):.1f} mm, 95th {np.percentile(mag, 95):.1f} mm, "
          f"max {mag.max():.1f} mm; rigid part removed: {np.round(rigid, 3).tolist()}")
    for name, t in anatomy.landmarks().targets.items():
        for side, pt in t.landmarks.items():
            v = np.round(np.linalg.inv(aff) @ np.append(pt, 1.0)).astype(int)[:3]
            print(f"  {name} {side}: template point lies {np.round(disp[:, v[0], v[1], v[2]], 1).tolist()} mm away")
    np.savez_compressed(OUT, displacement_mm=coarse, step_mm=np.float32(GRID * STEP),
                        origin_mm=np.asarray(aff[:3, 3], np.float32))
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
