"""The release stage on a handful of items built here: rows as the items say (pixels for one source, hash
references for another), manifest counts, verification and what each tampering is reported as, the no-op rebuild
and the refusals, and diff between two versions."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.errors import InputError, VerificationError
from curation.params import ReleaseParams
from curation.release import read
from curation.release.build import run as build
from curation.release.diff import diff
from curation.release.verify import verify_release
from curation.schema import Item, Review, ReviewDecision

from .factories import item, png, project_params, without_git, write_items

NAME = "neuro-bench"


def release_params(**kw) -> ReleaseParams:
    p = project_params().release  # adni: reference, radiopaedia: pixels
    return p.model_copy(update={"arrow_copy": False, **kw})


def v1_items() -> list[Item]:
    accepted = Review(decisions=[ReviewDecision(reviewer="rev-1", verdict="accept")], final_verdict="accept")
    items = [item(n, split="dev" if n == 3 else "test") for n in range(4)]
    items[0] = items[0].model_copy(update={"status": "reviewed", "review": accepted})
    items.append(item(4, source="adni", template="adni_tpl", status="unreviewed"))
    return items


@pytest.fixture(scope="module", autouse=True)
def _no_git() -> Iterator[None]:
    with without_git():
        yield


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A project folder holding the review output (items and their renders) and version 0.1.0 built from it."""
    root = tmp_path_factory.mktemp("release-work")
    old = Path.cwd()
    os.chdir(root)  # image paths are relative to the project root
    try:
        write_items(root / "review", v1_items())
        report = build(release_params(), root / "review", root / "releases")
        (root / "report.json").write_text(json.dumps(report.as_dict()))
        yield root
    finally:
        os.chdir(old)


def rel1(work: Path) -> Path:
    return work / "releases" / f"{NAME}-0.1.0"


def test_rows_carry_the_items_with_pixels_or_references(work: Path) -> None:
    rows = {r.item_id: r for r in read.rows(rel1(work))}
    items = {i.item_id: i for i in v1_items()}
    assert set(rows) == set(items)
    for iid, r in rows.items():
        i = items[iid]
        assert (r.answer, r.options, r.answer_index, r.split) == (i.answer, i.options, i.answer_index, i.split)
        assert r.options[r.answer_index] == r.answer
    pixel = rows["itm-tpl-01"]
    assert [im.path for im in pixel.images] == ["itm-tpl-01_0.png"] and not pixel.image_refs
    assert pixel.images[0].data == (work / "img" / "tpl-01.png").read_bytes()
    ref = rows["itm-adni_tpl-04"]  # ADNI ships no pixels: the hash of the exact render only
    assert ref.images == []
    assert json.loads(ref.image_refs[0]) == {
        "source": "adni", "render": "adni_tpl-04.png",
        "sha256": hashlib.sha256((work / "img" / "adni_tpl-04.png").read_bytes()).hexdigest()}
    assert not (rel1(work) / "images" / "itm-adni_tpl-04_0.png").exists()
    assert rows["itm-tpl-00"].review_status == "reviewed" and rows["itm-tpl-00"].review_verdict == "accept"
    assert rows["itm-tpl-02"].review_status == "kept" and rows["itm-tpl-02"].review_verdict == ""
    assert [r.item_id for r in read.rows(rel1(work), splits=["dev"])] == ["itm-tpl-03"]


def test_manifest_counts_and_the_stage_report(work: Path) -> None:
    manifest = json.loads((rel1(work) / "manifest.json").read_text())
    assert manifest["counts"]["split"] == {"dev": 1, "test": 4}
    assert manifest["counts"]["source"] == {"adni": 1, "radiopaedia": 4}
    assert manifest["reviewed_items"] == 1 and manifest["unreviewed_items"] == 4
    assert manifest["licenses"] == {"ADNI DUA": 1, "CC BY-NC-SA 3.0": 4}
    on_disk = [p.relative_to(rel1(work)).as_posix() for p in rel1(work).rglob("*") if p.is_file()]
    assert sorted(manifest["files"]) == sorted(f for f in on_disk if f != "manifest.json")
    report = json.loads((work / "report.json").read_text())
    assert report["counts"]["redistribution:pixels"] == 4 and report["counts"]["redistribution:reference"] == 1
    assert report["inputs"] == report["outputs"] == 5
    card = (rel1(work) / "README.md").read_text()
    assert manifest["canary"] in card and "4 of 5 items in this release" in card


def _flip_image(root: Path) -> None:
    p = root / "images" / "itm-tpl-01_0.png"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _no_canary(root: Path) -> None:
    card = root / "README.md"
    canary = json.loads((root / "manifest.json").read_text())["canary"]
    card.write_text(card.read_text().replace(canary, "no canary here"))


TAMPERS = {
    "image_changed": (_flip_image, ["images/itm-tpl-01_0.png: checksum mismatch"]),
    "file_added": (lambda r: (r / "images" / "extra.png").write_bytes(b"x"),
                   ["images/extra.png: not listed in manifest"]),
    "canary_removed": (_no_canary, ["README.md: checksum mismatch", "README.md: canary string missing"]),
    "split_deleted": (lambda r: (r / "data" / "dev-00000-of-00001.parquet").unlink(),
                      ["data/dev-00000-of-00001.parquet: listed in manifest but missing",
                       "data: 4 rows but manifest counts 5"]),
    "croissant_renamed": (lambda r: (r / "croissant.json").write_text(json.dumps({"name": "other"})),
                          ["croissant.json: checksum mismatch",
                           "croissant.json: name 'other' does not match the manifest"]),
}


def test_an_untouched_release_verifies(work: Path) -> None:
    assert verify_release(rel1(work)) == []
    digest = hashlib.sha256((rel1(work) / "manifest.json").read_bytes()).hexdigest()
    assert verify_release(rel1(work), digest=digest) == []
    assert verify_release(rel1(work), digest="0" * 64) == [
        f"manifest.json: SHA-256 {digest} is not the pinned digest {'0' * 64}"]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_each_tampering_is_reported(tamper: str, work: Path, tmp_path: Path) -> None:
    copy = tmp_path / "rel"
    shutil.copytree(rel1(work), copy)
    change, expected = TAMPERS[tamper]
    change(copy)
    assert verify_release(copy) == expected


def test_rebuild_of_the_same_items_is_a_no_op_and_other_content_is_refused(
        work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    releases = tmp_path / "releases"
    shutil.copytree(work / "releases", releases)
    before = (releases / f"{NAME}-0.1.0" / "manifest.json").read_bytes()
    report = build(release_params(), work / "review", releases)
    assert report.counts["unchanged_existing_release"] == 1
    assert (releases / f"{NAME}-0.1.0" / "manifest.json").read_bytes() == before
    with pytest.raises(VerificationError, match="already exists with different content; bump release.version"):
        build(release_params(canary="ANOTHER CANARY"), work / "review", releases)
    assert (releases / f"{NAME}-0.1.0" / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in releases.iterdir()) == [f"{NAME}-0.1.0"]  # no staging folder left behind


def test_require_review_refuses_unreviewed_items(work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(work)
    with pytest.raises(VerificationError, match="4 items lack expert review"):
        build(release_params(require_review=True), work / "review", tmp_path / "releases")
    assert not (tmp_path / "releases" / f"{NAME}-0.1.0").exists()
    with pytest.raises(InputError, match="no items.jsonl"):
        build(release_params(), tmp_path / "nothing", tmp_path / "releases")


@pytest.fixture(scope="module")
def v2(work: Path) -> tuple[Path, dict]:
    """Version 0.2.0: item 1 re-keyed, item 3 dropped, item 5 new, ADNI excluded, one image from outside."""
    old = Path.cwd()
    os.chdir(work)
    try:
        items = [i for i in v1_items() if i.item_id != "itm-tpl-03"]
        items[1] = item(1, key=2)
        items.append(item(5, case_id="case-05"))
        outside = work.parent / f"{work.name}-outside.png"
        items.append(item(6, images=[png(outside)]))
        write_items(work / "review-v2", items)
        p = release_params(version="0.2.0", redistribution={"adni": "exclude", "radiopaedia": "pixels"})
        report = build(p, work / "review-v2", work / "releases")
    finally:
        os.chdir(old)
    return work / "releases" / f"{NAME}-0.2.0", report.as_dict()


def test_excluded_sources_and_outside_images_are_counted_not_shipped(v2: tuple[Path, dict]) -> None:
    root, report = v2
    assert report["counts"]["excluded_by_licence:adni"] == 1
    assert report["failures_by_reason"] == {"image_outside_project": 1}
    assert sorted(r.item_id for r in read.rows(root)) == ["itm-tpl-00", "itm-tpl-01", "itm-tpl-02", "itm-tpl-05"]
    assert verify_release(root) == []


def test_diff_reports_added_removed_and_changed_items(work: Path, v2: tuple[Path, dict]) -> None:
    d = diff(rel1(work), v2[0])
    assert d["added"] == ["itm-tpl-05"]
    assert d["removed"] == ["itm-tpl-03", "itm-adni_tpl-04"]  # in key order (case|template)
    assert d["changed"] == [{"key": "case-01|tpl", "from": "itm-tpl-01", "to": "itm-tpl-01",
                             "fields": ["answer", "answer_index"]}]
    assert d["counts"] == {"added": 1, "removed": 2, "changed": 1, "unchanged": 2}
    assert d["per_dimension"]["added"] == {"task_type:lesion_recognition": 1}
    assert diff(rel1(work), rel1(work))["counts"] == {"added": 0, "removed": 0, "changed": 0, "unchanged": 5}


def test_reading_a_folder_without_parquet_files_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no Parquet files under data/"):
        list(read.rows(tmp_path))
    assert read.split_of(Path("data/private_test-00000-of-00001.parquet")) == "private_test"
    assert list(read.features()) == [c for c in read.ReleaseRow.columns()]
