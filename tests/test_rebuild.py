"""Reference-only items: the release names no participant, yet a holder of the source rebuilds every image."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation.jsonio import sha256_file

from .conftest import ROOT


@pytest.fixture(scope="module")
def rebuilt(pipeline: Path, demo_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, object]:
    from curation.params import load_params
    from curation.release.rebuild import run

    release = pipeline / "releases" / "neuro-bench-0.1.0"
    out = tmp_path_factory.mktemp("rebuilt")
    p = load_params(ROOT / "params.yaml")
    raw = {s: demo_raw / s for s in ("adni", "oasis1")}  # oasis3 left out on purpose
    report = run(p, release, raw, out, workers=2)
    return release, out, report


def _refs(release: Path) -> list[tuple[str, int, dict[str, str]]]:
    rows = [r for f in sorted((release / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return [(r["item_id"], n, json.loads(ref)) for r in rows for n, ref in enumerate(r["image_refs"] or [])]


def test_references_name_no_participant(pipeline: Path) -> None:
    release = pipeline / "releases" / "neuro-bench-0.1.0"
    refs = _refs(release)
    # OASIS-1 gives no item since the nWBV atrophy grade was retired (not visible on the montage; issue 29)
    assert refs and {r["source"] for _, _, r in refs} == {"adni", "oasis3"}
    id_maps = [row for f in (pipeline / "ingest").glob("*/private/id_map.jsonl")
               for row in map(json.loads, f.read_text().splitlines())]
    source_ids = {row["source_id"] for row in id_maps} | {row["case_id"] for row in id_maps}
    for _, _, r in refs:
        assert set(r) == {"source", "render", "sha256"}
        assert not any(sid in json.dumps(r) for sid in source_ids)
    ref_items = {item for item, _, _ in refs}
    shipped = {p.name.rsplit("_", 1)[0] for p in (release / "images").iterdir()}
    assert shipped and not shipped & ref_items  # no pixels of a reference-only source ship


def test_rebuild_from_own_copy_gives_the_released_renders(rebuilt: tuple[Path, Path, object]) -> None:
    release, out, report = rebuilt
    refs = _refs(release)
    summary = json.loads((out / "rebuild.json").read_text())
    given = [(i, n, r) for i, n, r in refs if r["source"] in ("adni", "oasis1")]
    assert summary["rebuilt"] == len(given) > 0
    for item_id, n, r in given:
        assert sha256_file(out / "images" / f"{item_id}_{n}.png") == r["sha256"]
    not_given = [u for u in summary["unmatched"] if u["source"] == "oasis3"]
    assert len(not_given) == len(refs) - len(given) > 0
    assert all(u["reason"] == "source_not_given" for u in summary["unmatched"])


def test_evaluation_uses_rebuilt_images(rebuilt: tuple[Path, Path, object]) -> None:
    from curation.evaluate.run import load_release

    release, out, _ = rebuilt
    plain, skipped = load_release(release, [])
    with_images, skipped2 = load_release(release, [], rebuilt=out / "images")
    assert skipped["no_pixels:reference_only_source"] > 0
    gained = len(with_images) - len(plain)
    key = "no_pixels:reference_only_source"
    assert gained > 0 and skipped2[key] == skipped[key] - gained
    # a tampered rebuilt image is not used
    victim = next((out / "images").glob("*.png"))
    victim.write_bytes(victim.read_bytes() + b"x")
    again, skipped3 = load_release(release, [], rebuilt=out / "images")
    assert len(again) < len(with_images) and skipped3["rebuilt_image_mismatch"] >= 1
