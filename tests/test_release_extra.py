"""Release extras: Croissant validated by mlcroissant, the card's plot, diff between releases, exports."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from curation.cli import app
from curation.jsonio import read_jsonl
from curation.params import ReleaseParams
from curation.release.build import run as build
from curation.release.diff import diff
from curation.release.verify import verify_release
from curation.schema import Item


@pytest.fixture(autouse=True)
def _in_pipeline(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline)


def release(pipeline: Path) -> Path:
    return pipeline / "releases" / "neuro-bench-0.1.0"


def test_croissant_validates_and_reads_every_item(pipeline):
    import mlcroissant as mlc

    root = release(pipeline)
    ds = mlc.Dataset(jsonld=str(root / "croissant.json"))
    errors = [str(e) for e in ds.metadata.issues.errors]
    assert errors == []
    manifest = json.loads((root / "manifest.json").read_text())
    records = list(ds.records("items"))
    assert len(records) == sum(manifest["counts"]["split"].values())
    ids = {r["items/item_id"].decode() for r in records}
    assert len(ids) == len(records)


def test_card_has_distribution_plot_and_croissant_is_checked(pipeline, tmp_path):
    root = release(pipeline)
    card = (root / "README.md").read_text()
    assert "![Items per task type and per dimension](assets/distribution.png)" in card
    with Image.open(root / "assets" / "distribution.png") as im:
        assert im.size[0] >= 800
    copy = tmp_path / "rel"
    shutil.copytree(root, copy)
    (copy / "croissant.json").unlink()
    assert "croissant.json: missing" in verify_release(copy)


def test_diff_counts_added_removed_and_changed(pipeline, tmp_path):
    items = list(read_jsonl(pipeline / "review" / "items.jsonl", Item))
    dropped, edited = items[0], items[1]
    edited.question = "Edited: " + edited.question
    src = tmp_path / "review2"
    src.mkdir()
    (src / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in items[1:]))
    releases = tmp_path / "releases"
    build(ReleaseParams(version="0.2.0", redistribution={"adni": "reference", "oasis1": "reference",
                                                          "oasis3": "reference"}), src, releases)
    d = diff(release(pipeline), releases / "neuro-bench-0.2.0")
    assert d["counts"]["removed"] == 1 and d["removed"] == [dropped.item_id]
    assert d["counts"]["added"] == 0
    assert [c["fields"] for c in d["changed"]] == [["question"]]
    assert d["per_dimension"]["removed"][f"task_type:{dropped.task_type.value}"] == 1
    r = CliRunner().invoke(app, ["release", "diff", str(release(pipeline)), str(releases / "neuro-bench-0.2.0")])
    assert r.exit_code == 0 and "0 added, 1 removed, 1 changed" in r.output


def test_export_neural_medbench_layout(pipeline, tmp_path):
    out = tmp_path / "nmb.json"
    r = CliRunner().invoke(app, ["release", "export", str(release(pipeline)), str(out), "--format", "neural-medbench"])
    assert r.exit_code == 0, r.output
    cases = json.loads(out.read_text())
    manifest = json.loads((release(pipeline) / "manifest.json").read_text())
    assert sum(len(c["questions"]) for c in cases) == sum(manifest["counts"]["split"].values())
    with_images = [c for c in cases if c["images"]]
    assert with_images and all(u.startswith("data:image/png;base64,") for c in with_images for u in c["images"])
    assert {"case_id", "text", "images", "questions"} <= set(cases[0])
    r = CliRunner().invoke(app, ["release", "export", str(release(pipeline)), str(out), "--format", "mmmu"])
    assert r.exit_code == 2 and "unknown export format" in r.output


def test_release_opens_with_load_from_disk_offline(pipeline):
    from datasets import load_from_disk

    root = release(pipeline)
    dd = load_from_disk(str(root / "hf"))
    manifest = json.loads((root / "manifest.json").read_text())
    assert {k: len(v) for k, v in dd.items()} == manifest["counts"]["split"]
    row = next(r for r in dd["test"] if r["images"])
    assert row["images"][0].size[0] > 32 and row["question"]


def test_rebuilding_the_same_content_is_a_no_op(pipeline, tmp_path):
    from curation.params import load_params

    from .conftest import ROOT

    releases = tmp_path / "releases"
    shutil.copytree(pipeline / "releases", releases)
    before = {p.relative_to(releases): p.stat().st_mtime_ns for p in releases.rglob("*") if p.is_file()}
    report = build(load_params(ROOT / "params.yaml").release, pipeline / "review", releases,
                   params_file=ROOT / "params.yaml")
    assert report.counts["unchanged_existing_release"] == 1
    assert {p.relative_to(releases): p.stat().st_mtime_ns for p in releases.rglob("*") if p.is_file()} == before
