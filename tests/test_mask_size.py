"""A source mask's lesion size in its slice, as a reader measures it: the largest in-plane diameter (outer edges of
its pixels) of the one lesion in the slice, the field of view that gives the scale, and a size band only where the
diameter is clear of the band's bounds."""

from __future__ import annotations

import numpy as np

from curation.generate.values import clear_grade_of
from curation.imaging.targets import _in_plane_size

BANDS = [[10, "under 10 mm"], [30, "10 to 30 mm"], [50, "30 to 50 mm"], [9999, "over 50 mm"]]


def _disc(shape: tuple[int, int], centre: tuple[float, float], radius_px: float) -> np.ndarray:
    i, j = np.mgrid[: shape[0], : shape[1]]
    return (i - centre[0]) ** 2 + (j - centre[1]) ** 2 <= radius_px**2


def test_a_disc_measures_its_diameter_on_any_voxel_size_and_orientation() -> None:
    cut = _disc((200, 200), (100.0, 100.0), 20.0)  # 41 pixels across
    for spacing in (0.5, 1.0, 1.2):
        affine = np.diag([spacing, spacing, 3.0, 1.0])
        fov, diameter = _in_plane_size(cut, affine, (200, 200, 40))
        assert fov == round(200 * spacing, 1)
        assert diameter is not None and abs(diameter - 41 * spacing) <= spacing, (spacing, diameter)
    turn = np.eye(4)
    c, s = np.cos(0.5), np.sin(0.5)
    turn[:2, :2] = [[c, -s], [s, c]]
    _, diameter = _in_plane_size(cut, turn @ np.diag([1.0, 1.0, 3.0, 1.0]), (200, 200, 40))
    assert diameter is not None and abs(diameter - 41) <= 1.0, diameter


def test_an_ellipse_measures_its_long_axis() -> None:
    i, j = np.mgrid[:200, :200]
    cut = ((i - 100) / 40.0) ** 2 + ((j - 100) / 10.0) ** 2 <= 1.0  # 81 by 21 pixels
    _, diameter = _in_plane_size(cut, np.eye(4), (200, 200, 10))
    assert diameter is not None and abs(diameter - 81) <= 1.0


def test_a_slice_with_two_lesions_gets_no_size() -> None:
    cut = _disc((200, 200), (50.0, 50.0), 15.0) | _disc((200, 200), (150.0, 150.0), 12.0)
    assert _in_plane_size(cut, np.eye(4), (200, 200, 10))[1] is None
    speck = _disc((200, 200), (50.0, 50.0), 15.0)
    speck[150, 150] = True  # a pixel apart is no second lesion
    assert _in_plane_size(speck, np.eye(4), (200, 200, 10))[1] is not None


def test_a_size_near_a_band_bound_is_not_asked() -> None:
    assert clear_grade_of(70.0, BANDS, 1.25) == "over 50 mm"
    assert clear_grade_of(20.0, BANDS, 1.25) == "10 to 30 mm"
    assert clear_grade_of(55.0, BANDS, 1.25) is None  # within 25% of 50 mm
    assert clear_grade_of(9.0, BANDS, 1.25) is None
    assert clear_grade_of(5.0, BANDS, 1.25) == "under 10 mm"
    assert clear_grade_of(None, BANDS, 1.25) is None
