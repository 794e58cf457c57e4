"""Per-item licence terms and provenance in a release, the licence-filtered subset, and the Croissant responsible-AI
properties read back by mlcroissant, on a release built here from items of four sources."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.params import ReleaseParams
from curation.release import read
from curation.release.build import run as build
from curation.release.terms import licence_class, spdx_of
from curation.release.verify import verify_release
from curation.schema import Generator, Verdict

from .factories import item, project_params, without_git, write_items

MEDPIX_TERMS = "MedPix terms: free for education and research, no licence stated (U.S. National Library of Medicine)"


def params(**kw) -> ReleaseParams:
    return project_params().release.model_copy(update={"arrow_copy": False, **kw})


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("terms")
    old = Path.cwd()
    os.chdir(root)
    try:
        items = [item(0, attribution="Case courtesy of A. Author, Radiopaedia.org, rID: 123"),
                 item(1, source="case-reports", template="cr", attribution="A. Author. J Case Rep. doi:10.1/x",
                      generator=Generator(kind="llm", model="local-vlm", prompt_hash="ab" * 16)),
                 item(2, source="medpix", template="mp", license=MEDPIX_TERMS,
                      attribution="MedPix teaching case MPX1001, U.S. National Library of Medicine"),
                 item(3, source="adni", template="ad", attribution="Data used ... ADNI database (adni.loni.usc.edu).")]
        items[0].origin = "https://radiopaedia.org/cases/123"
        items[2].origin = "MedPix MPX1001"
        items[0].quality.verifier = Verdict(model="judge", passed=True, reason="fine")
        # two articles under CC BY-NC-ND: one whose figure de-identification masked (a derivative), one untouched
        nd = dict(source="case-reports", template="nd", license="CC BY-NC-ND 4.0", attribution="B. Author. J. doi:1/y")
        items += [item(4, pixels_altered=True, **nd), item(5, **nd)]
        write_items(root / "review", items)
        with without_git():
            build(params(), root / "review", root / "releases", report_path=root / "build.json")
            build(params(name="nd-excluded", no_derivatives="exclude"), root / "review", root / "releases")
            build(params(licence_filter=["commercial", "no_licence_stated"]), root / "review", root / "releases")
        yield root
    finally:
        os.chdir(old)


@pytest.mark.parametrize(("text", "mode", "spdx", "cls"), [
    ("CC BY 4.0", "pixels", "CC-BY-4.0", "commercial"),
    ("CC BY-NC-SA 3.0", "pixels", "CC-BY-NC-SA-3.0", "non_commercial"),
    ("CC BY-NC-ND 4.0", "pixels", "CC-BY-NC-ND-4.0", "non_commercial"),
    ("CC0", "pixels", "CC0-1.0", "commercial"),
    (MEDPIX_TERMS, "pixels", None, "no_licence_stated"),  # no licence stated: never commercial
    ("see article", "pixels", None, "no_licence_stated"),
    ("CC BY 9.9", "pixels", None, "no_licence_stated"),  # not an SPDX id
    ("ADNI Data Use Agreement (no redistribution of images or data)", "reference", None, "reference_only"),
])
def test_licence_text_to_spdx_and_class(text, mode, spdx, cls):
    assert spdx_of(text) == spdx
    assert licence_class(spdx, mode) == cls


def test_every_row_carries_its_terms_and_provenance(project):
    rows = {r.source: r for r in read.rows(project / "releases" / "neuro-bench-0.1.0") if r.template_id != "nd"}
    assert {s: (r.license_spdx, r.license_class) for s, r in rows.items()} == {
        "radiopaedia": ("CC-BY-NC-SA-3.0", "non_commercial"), "case-reports": ("CC-BY-4.0", "commercial"),
        "medpix": ("", "no_licence_stated"), "adni": ("", "reference_only")}
    assert rows["medpix"].license == MEDPIX_TERMS and "MedPix" in rows["medpix"].attribution
    assert all(r.license and r.attribution for r in rows.values())
    # the source's own address where it has one; for a cohort whose ids name a participant, the keyed hash (case_id)
    assert {s: r.origin for s, r in rows.items()} == {
        "radiopaedia": "https://radiopaedia.org/cases/123", "case-reports": "case-01", "medpix": "MedPix MPX1001",
        "adni": "case-03"}
    assert json.loads(rows["case-reports"].generator) == {"kind": "llm", "model": "local-vlm",
                                                          "prompt_hash": "ab" * 16, "augmentations": []}
    assert json.loads(rows["radiopaedia"].generator)["template_id"] == "tpl"
    assert json.loads(rows["radiopaedia"].gates)["verifier"]["passed"] is True
    card = (project / "releases" / "neuro-bench-0.1.0" / "README.md").read_text()
    assert "| medpix | 1 | " + MEDPIX_TERMS + " | none (named terms) | no_licence_stated | pixels |" in card
    assert "| no_licence_stated | 1 |" in card


def test_a_licence_filtered_subset_verifies_like_any_release(project):
    subset = project / "releases" / "neuro-bench-commercial+no_licence_stated-0.1.0"
    assert verify_release(subset) == []
    assert sorted(r.source for r in read.rows(subset)) == ["case-reports", "medpix"]
    assert "licence-filtered subset: only commercial, no_licence_stated items" in (subset / "README.md").read_text()


def test_croissant_carries_the_responsible_ai_properties_mlcroissant_reads_back(project):
    import mlcroissant as mlc

    release = project / "releases" / "neuro-bench-0.1.0"
    meta = mlc.Dataset(jsonld=str(release / "croissant.json")).metadata
    for field in ("data_collection", "data_preprocessing_protocol", "personal_sensitive_information", "data_biases",
                  "data_limitations", "data_use_cases"):
        value = getattr(meta, field)
        assert value and all(str(v).strip() for v in (value if isinstance(value, list) else [value])), field
    assert "https://spdx.org/licenses/CC-BY-4.0.html" in meta.license and MEDPIX_TERMS in meta.license


def test_a_no_derivatives_figure_that_deid_altered_ships_as_a_reference_or_not_at_all(project):
    rows = {r.item_id: r for r in read.rows(project / "releases" / "neuro-bench-0.1.0") if r.template_id == "nd"}
    altered, untouched = rows["itm-nd-04"], rows["itm-nd-05"]
    assert not altered.images and len(altered.image_refs) == 1 and altered.license_class == "reference_only"
    assert len(untouched.images) == 1 and not untouched.image_refs and untouched.license_class == "non_commercial"
    report = json.loads((project / "build.json").read_text())
    assert report["counts"]["no_derivatives:reference"] == 1
    excluded = [r.item_id for r in read.rows(project / "releases" / "nd-excluded-0.1.0") if r.template_id == "nd"]
    assert excluded == ["itm-nd-05"]
