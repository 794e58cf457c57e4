"""The lobe map (curation.imaging.lobes): AAL2's regions grouped into lobes on the template's grid, white matter given
the lobe of its nearest cortex. Checked at MNI coordinates named in the literature and atlases, not read off the map;
and the rules that decide whether an item may name a lobe and which lobes it may offer as wrong."""

from __future__ import annotations

import numpy as np
import pytest

from curation.imaging import anatomy, lobes

# MNI mm -> the lobe a neuroanatomist names there
KNOWN = [((-37.0, -21.0, 58.0), "frontal lobe"),  # the left precentral hand knob
         ((45.0, -60.0, 40.0), "parietal lobe"),  # the right angular gyrus
         ((-55.0, -20.0, 5.0), "temporal lobe"),  # the left superior temporal gyrus
         ((10.0, -85.0, 5.0), "occipital lobe"),  # the right calcarine cortex
         ((-38.0, 0.0, 5.0), "insula"),
         ((12.0, -18.0, 8.0), "deep grey matter"),  # the right thalamus
         ((-25.0, -70.0, -35.0), "cerebellum"),
         ((-25.0, 10.0, 35.0), "frontal lobe"),  # centrum semiovale under the frontal cortex (white matter)
         ((28.0, -50.0, 35.0), "parietal lobe"),  # parietal white matter
         ((-22.0, -10.0, 28.0), "frontal lobe")]  # corona radiata beside the body of the ventricle, not the insula


@pytest.mark.parametrize(("mni", "lobe"), KNOWN)
def test_known_places_are_in_their_lobe(mni: tuple[float, float, float], lobe: str) -> None:
    maps = anatomy.template_maps(2.0)
    vox = np.rint(np.linalg.inv(maps.affine) @ np.array([*mni, 1.0]))[:3].astype(int)
    code = int(lobes.lobe_map(2.0)[tuple(vox)])
    assert code and lobes.names()[code - 1] == lobe


def test_the_brain_is_labelled_and_outside_it_almost_nothing() -> None:
    maps = anatomy.template_maps(2.0)
    m = lobes.lobe_map(2.0)
    assert (m[maps.brain > 0.5] > 0).mean() > 0.99
    assert (m[maps.brain < 0.05] > 0).mean() < 0.01  # only the atlas's own rim beyond the template's brain


def test_a_lobe_is_named_only_where_the_slice_and_the_mask_agree() -> None:
    assert lobes.told_lobe({"parietal lobe": 0.76, "occipital lobe": 0.24},
                           {"parietal lobe": 0.55, "occipital lobe": 0.23}) == "parietal lobe"
    assert lobes.told_lobe({"parietal lobe": 0.55, "occipital lobe": 0.45}, {"parietal lobe": 0.6}) is None
    assert lobes.told_lobe({"frontal lobe": 0.9}, {"parietal lobe": 0.5, "frontal lobe": 0.4}) is None
    assert lobes.told_lobe({"cerebellum": 1.0}, {"cerebellum": 1.0}) is None  # not a lobe an answer names
    # a lobe the slice's lesion reaches is no wrong option
    out = lobes.ruled_out({"parietal lobe": 0.76, "occipital lobe": 0.2, "temporal lobe": 0.04}, "parietal lobe")
    assert out == ["frontal lobe", "temporal lobe", "insula"]
