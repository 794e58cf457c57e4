"""Heavy stages on a Dask cluster give exactly what they give locally (a LocalCluster started by the test)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from curation.params import load_params

from .conftest import ROOT, demo_subset


@pytest.fixture(scope="module")
def cluster():
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as c:
        yield c.scheduler_address


def digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.suffix in (".json", ".jsonl"):
                data = data.replace(str(root).encode(), b"OUT")
            out[p.relative_to(root).as_posix()] = hashlib.sha256(data).hexdigest()
    return out


def test_deid_dicom_on_dask_matches_local(cluster, demo_raw, tmp_path):
    from curation.deid.stage import deid_dicom_dir

    p = load_params(ROOT / "params.yaml").deidentify.dicom
    # one participant's download (two visits, their series and slices): the same work spread the same way as the six
    src = min(d for d in (demo_raw / "adni" / "ADNI").iterdir() if d.is_dir())
    local = deid_dicom_dir(p, src, tmp_path / "local")
    remote = deid_dicom_dir(p, src, tmp_path / "dask", scheduler=cluster)
    assert remote.outputs == local.outputs == sum(1 for _ in src.rglob("*.dcm"))  # every demo file, none dropped
    assert digest(tmp_path / "dask") == digest(tmp_path / "local")


def test_normalize_on_dask_matches_local(cluster, pipeline, tmp_path, monkeypatch):
    from curation.imaging.normalize import run

    src = demo_subset(pipeline, "deid", tmp_path / "project")  # a case of each kind: volumes, visits, figures
    monkeypatch.chdir(tmp_path / "project")
    p = load_params(ROOT / "params.yaml").normalize
    a = tmp_path / "a" / "out"
    b = tmp_path / "b" / "out"
    run(p, src, a, workers=2)  # local processes (one volume each, as the Dask workers run them)
    report = run(p, src, b, scheduler=cluster)
    # 6 volumes and 6 figures, none lost: a figure deidentify held for pixel-text review is counted, not rendered
    held = report.counts.get("figures_held_for_pixel_review", 0)
    assert report.inputs == report.outputs and report.inputs + held >= 12
    assert digest(a) == digest(b)
