"""The anatomy-fit store (curation.imaging.fitcache): a fit is read back only for the same voxels, affine, sequence
and code; entries are written whole or not at all; a broken entry is a miss, not a crash; the store stays under its
size; ``off`` turns it off. One real head is fitted to show a fit read back gives the same targets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from curation.imaging import fitcache

ROOT = Path(__file__).resolve().parents[1]
HEADS = ROOT.parent / "shared" / "fixtures" / "heads"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CURATION_FIT_CACHE", str(tmp_path / "store"))
    return tmp_path / "store"


def _entry(tmp_path: Path) -> tuple[fitcache.Entry, dict[str, str]]:
    warp = tmp_path / "final_1Warp.nii.gz"
    warp.write_bytes(os.urandom(2000))
    mat = tmp_path / "final_0GenericAffine.mat"
    mat.write_bytes(b"affine")
    entry = fitcache.Entry(np.eye(4).tolist(), 0.61, "head", [warp.name, mat.name], [mat.name, "final_1InverseWarp"])
    (tmp_path / "final_1InverseWarp").write_bytes(b"inverse")
    return entry, {n: str(tmp_path / n) for n in {*entry.fwd, *entry.inv}}


def test_key_follows_voxels_affine_sequence_and_code() -> None:
    data = np.random.default_rng(0).random((8, 9, 10), dtype=np.float32)
    aff = np.diag([1.0, 1.0, 1.2, 1.0])
    k = fitcache.key(data, aff, "T1w", [b"code"])
    assert k == fitcache.key(data.astype(np.float64), aff.copy(), "T1w", [b"code"])
    moved = data.copy()
    moved[4, 4, 4] += 1e-3
    others = {fitcache.key(moved, aff, "T1w", [b"code"]), fitcache.key(data, aff * 1.01, "T1w", [b"code"]),
              fitcache.key(data, aff, "T2w", [b"code"]), fitcache.key(data, aff, "T1w", [b"code2"]),
              fitcache.key(data.reshape(9, 8, 10), aff, "T1w", [b"code"])}
    assert k not in others and len(others) == 5


def test_stored_entry_reads_back_with_its_files(store: Path, tmp_path: Path) -> None:
    entry, files = _entry(tmp_path)
    k = "ab" + "0" * 62
    assert fitcache.load(k, tmp_path) is None
    fitcache.store(k, entry, files)
    into = tmp_path / "into"
    into.mkdir()
    got = fitcache.load(k, into)
    assert got == entry
    assert {p.name: p.read_bytes() for p in into.iterdir()} == {n: Path(f).read_bytes() for n, f in files.items()}
    assert not [p for p in (store / "ab").iterdir() if p.name.startswith(".")], "no temporary folder is left"


def test_a_fit_being_made_is_waited_for_not_made_again(store: Path, tmp_path: Path) -> None:
    """Two runs needing the same fit at once: the second waits for the first's claim and reads its fit back."""
    import threading
    import time

    entry, files = _entry(tmp_path)
    k = "cd" + "0" * 62
    made: list[str] = []

    def fit(name: str) -> None:
        into = tmp_path / name
        into.mkdir()
        with fitcache.claimed(k):
            if fitcache.load(k, into) is None:
                time.sleep(0.5)  # a fit in the making
                made.append(name)
                fitcache.store(k, entry, files)

    runs = [threading.Thread(target=fit, args=(name,)) for name in ("first", "second")]
    for r in runs:
        r.start()
        time.sleep(0.1)
    for r in runs:
        r.join(timeout=30)
    assert made == ["first"]
    assert {p.name for p in (tmp_path / "second").iterdir()} == set(files), "the second run read the first's fit"


def test_broken_entry_is_a_miss_and_is_replaced(store: Path, tmp_path: Path) -> None:
    entry, files = _entry(tmp_path)
    k = "cd" + "1" * 62
    folder = store / "cd" / k
    into = tmp_path / "into"
    into.mkdir()
    meta = json.loads(json.dumps(entry.__dict__))
    meta["fwd"] = ["../../escape"]  # a name that is a path is never followed
    for corrupt in (lambda: (folder / entry.fwd[0]).unlink(), lambda: (folder / fitcache.ENTRY).write_text("{not"),
                    lambda: (folder / fitcache.ENTRY).write_text(json.dumps(meta))):
        fitcache.store(k, entry, files)
        corrupt()
        assert fitcache.load(k, into) is None
        assert not folder.exists(), "a broken entry is removed, so that the fit is stored afresh"
    fitcache.store(k, entry, files)
    assert fitcache.load(k, into) == entry


def test_off_and_unwritable_store_change_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry, files = _entry(tmp_path)
    monkeypatch.setenv("CURATION_FIT_CACHE", "off")
    assert fitcache.root() is None
    fitcache.store("ef" + "2" * 62, entry, files)
    assert fitcache.load("ef" + "2" * 62, tmp_path) is None
    blocker = tmp_path / "file"
    blocker.write_text("a file where the store's folder would be")
    monkeypatch.setenv("CURATION_FIT_CACHE", str(blocker))
    fitcache.store("ef" + "2" * 62, entry, files)  # no exception: the run goes on without its cache
    assert fitcache.load("ef" + "2" * 62, tmp_path) is None


def test_store_is_trimmed_least_recently_used_first(store: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    entry, files = _entry(tmp_path)
    keys = [f"{i:02d}" + "3" * 62 for i in range(4)]
    for i, k in enumerate(keys):
        fitcache.store(k, entry, files)
        os.utime(store / k[:2] / k, (1000 + i, 1000 + i))
    size = sum(f.stat().st_size for f in (store / keys[0][:2] / keys[0]).iterdir())
    monkeypatch.setenv("CURATION_FIT_CACHE_GB", str(2.5 * size / 1e9))
    fitcache.store("99" + "3" * 62, entry, files)
    left = {p.name for p in store.glob("??/*")}
    assert left == {keys[3], "99" + "3" * 62}


@pytest.mark.integration  # ANTs registration
@pytest.mark.skipif(not (HEADS / "seg3d_mr.nii.gz").is_file(), reason="../shared/fixtures/heads absent")
def test_a_real_head_fitted_again_is_read_back_with_the_same_targets(store: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import nibabel as nib

    from curation.imaging import anatomy, templatefit

    img = nib.as_closest_canonical(nib.load(HEADS / "seg3d_mr.nii.gz"))
    data, aff = np.asarray(img.dataobj, dtype=np.float32), np.asarray(img.affine, dtype=np.float64)
    first = templatefit.fit_template(data, aff, "T1w")
    assert len(list(store.glob("??/*"))) == 1

    def refit(*_args: object) -> None:
        raise AssertionError("the second fit of the same series should come from the store")

    monkeypatch.setattr(templatefit, "_fit", refit)
    again = templatefit.fit_template(data, aff, "T1w")
    points = np.array([[-25.0, -22.0, -14.0], [0.0, 10.0, 15.0]])
    assert np.array_equal(again.matrix, first.matrix) and again.metric == first.metric and again.kind == first.kind
    assert np.allclose(again.to_series(points), first.to_series(points), atol=1e-6)
    tpl = anatomy.template_maps(templatefit.registration_presets().grid_mm)
    a, b = (f.on_series([tpl.brain], tpl, data.shape, aff)[0] for f in (first, again))
    assert np.array_equal(a, b)


@pytest.mark.integration  # SimpleITK registration
@pytest.mark.skipif(not (HEADS / "stroke_T1.nii.gz").is_file(), reason="../shared/fixtures/heads absent")
def test_a_rigid_registration_is_read_back_for_the_same_pair_only(store: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real scans of one head (the stroke patient's T1 and T2): registered once, read back the second time with
    the same transform and the same resampled bytes; the pair the other way round, or a changed voxel, is a miss."""
    import nibabel as nib
    import SimpleITK as sitk

    from curation.imaging import sitk as sitk_setup

    t1, t2 = (sitk_setup.to_sitk(nib.as_closest_canonical(nib.load(HEADS / f"stroke_{s}.nii.gz")))
              for s in ("T1", "T2"))
    tx, metric, out = sitk_setup.register_rigid(t1, t2, 2.0)
    assert len(list(store.glob("??/*"))) == 1
    with monkeypatch.context() as m:
        m.setattr(sitk_setup, "registration", lambda *a, **k: pytest.fail("the same pair was registered again"))
        tx2, metric2, out2 = sitk_setup.register_rigid(t1, t2, 2.0)
    assert metric2 == metric and np.array_equal(sitk_setup.ras_matrix(tx2), sitk_setup.ras_matrix(tx))
    assert np.array_equal(sitk.GetArrayViewFromImage(out2), sitk.GetArrayViewFromImage(out))
    changed = sitk.Image(t2)
    changed[10, 10, 10] = float(changed[10, 10, 10]) + 1.0
    for fixed, moving in ((t2, t1), (t1, changed)):
        sitk_setup.register_rigid(fixed, moving, 2.0, resample=False)
    assert len(list(store.glob("??/*"))) == 3
