from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from curation.demo.adni import ADNI_SUBJECTS
from curation.jsonio import read_jsonl
from curation.quality.filter import check
from curation.schema import Case, Item, ReasoningDim, VisualDim


@pytest.fixture(autouse=True)
def _in_pipeline(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline)  # record paths are relative to the project root the stages ran in


def test_normalize_canonical_volumes_and_renders(pipeline: Path) -> None:
    cases = list(read_jsonl(pipeline / "normalize" / "cases.jsonl", Case))
    series = [s for c in cases for s in c.all_series()]
    assert len(series) == 4 * len(ADNI_SUBJECTS) + 5 + 8  # ADNI DICOM, OASIS-1 Analyze, OASIS-3 NIfTI
    outcomes: list[str] = []
    for s in series:
        img = nib.load(s.nifti)
        assert "".join(nib.aff2axcodes(img.affine)) == "RAS"
        assert s.spacing == (1.0, 1.0, 1.0)
        assert {r.plane for r in s.renders} >= {"axial", "coronal", "sagittal", "montage"}
        steps = [st.name for st in s.provenance]
        assert steps[:3] == ["to_canonical_ras", "fit_anatomy", "deface"]  # the fit comes first: defacing uses it
        assert steps.index("resample") > steps.index("deface")
        deface = next(st for st in s.provenance if st.name == "deface")
        sidecar = json.loads(Path(s.nifti).with_name("volume.json").read_text())
        outcomes.append(deface.args["outcome"])
        if deface.args["outcome"] == "defaced":
            assert deface.args["removed_voxels"] > 0 and deface.args["head_dice"] >= 0.6
            assert sidecar["Defaced"] is True
        else:  # a head whose face the source already removed: passed through, and said so
            assert deface.args["outcome"] == "face_free" and deface.args["face_region_tissue"] <= 0.02, deface.args
            assert deface.args["face_region_in_view"] >= 0.05 and sidecar["Defaced"] is False
    assert "defaced" in outcomes
    from curation.demo.medpix import CASES as MEDPIX
    from curation.demo.radiopaedia import RADIOPAEDIA

    figures = [f for c in cases for f in c.figures if not f.missing]
    series = sum(1 + ("also" in case) for case in RADIOPAEDIA)  # a case's own sequence, and a second one (also)
    # three images per Radiopaedia series, the MedPix cases' images, the case report's figure
    assert len(figures) == 3 * series + sum(len(c["figures"]) for c in MEDPIX) + 1
    # each is rendered, or held for review where deidentify's OCR found text it could not read (none of the demo's
    # text-free phantoms should be: sulci on a flat grey once read as text on a third of them)
    held = [f for f in figures if f.qc.pixel_text is not None and f.qc.pixel_text.review]
    assert all(bool(f.renders) != (f in held) for f in figures)
    assert len(held) <= len(figures) // 40, [(f.figure_id, f.qc.pixel_text) for f in held]
    assert (pipeline / "normalize" / "qc_contact_sheet.png").exists()


def test_dicom_conversion_matches_ground_truth_world_position(demo_raw: Path) -> None:
    """The phantom's lesion is written at a known RAS position; the DICOM reader must put it there."""
    from curation.demo.common import demo_affine
    from curation.demo.phantom import SHAPE
    from curation.imaging.convert import convert_path

    folder = sorted((demo_raw / "adni" / "ADNI" / "126_S_0605" / "Axial_T2-FLAIR").glob("*/*"))[0]  # baseline
    img, info = convert_path(folder)
    assert info.orientation == "RAS"
    data = np.asarray(img.dataobj)
    peak = np.array(np.unravel_index(np.argmax(data), data.shape))
    world = (img.affine @ np.append(peak, 1))[:3]
    centre = np.array([0.36, 0.52, 0.58]) * (np.array(SHAPE) - 1)
    expected = (demo_affine() @ np.append(centre, 1))[:3]
    assert np.linalg.norm(world - expected) < 8.0, (world, expected)
    assert world[0] < 0  # the lesion is in the patient's left hemisphere


NOT_IN_DEMO = ("mask_lesion_laterality", "mask_lesion_lobe", "mask_lesion_size")


def test_every_template_makes_items_with_evidence_and_no_constant_answer(pipeline: Path) -> None:
    from curation.generate.engine import load_templates

    from .conftest import ROOT

    items = list(read_jsonl(pipeline / "generate" / "items.jsonl", Item))
    templates = load_templates(ROOT / "templates" / "questions")
    made = Counter(i.template_id for i in items)
    # the demo has what every template needs, but for a source's own lesion mask (a BIDS derivative: the demo has no
    # BIDS tree), which tests/test_bids_masks_real.py gives that template on real patients
    assert {t.id for t in templates} - set(made) == set(NOT_IN_DEMO), made
    answers: dict[str, set[str]] = {}
    for i in items:
        answers.setdefault(i.template_id or "", set()).add(i.answer)
    constant = {t: a for t, a in answers.items() if made[t] >= 2 and len(a) == 1}
    assert constant == {}, constant
    dims = {d for i in items for d in i.visual_dims} | {d for i in items for d in i.reasoning_dims}
    assert {VisualDim.fine_detail, VisualDim.spatial, ReasoningDim.temporal, ReasoningDim.multi_source,
            ReasoningDim.causal, ReasoningDim.long_tail} <= dims, dims
    for i in items:
        assert i.template_id and i.generator.template_version and i.generator.seed is not None
        assert i.evidence and i.images == [e.image for e in i.evidence]
        assert all(Path(p).exists() for p in i.images)
        if i.format.value == "mcq":
            assert i.options[i.answer_index or 0] == i.answer
            assert i.answer not in [o for n, o in enumerate(i.options) if n != i.answer_index]
        if ReasoningDim.temporal in i.reasoning_dims:
            assert len({e.visit_id for e in i.evidence}) == 2 and len({e.position_mm for e in i.evidence}) == 1


def test_answer_positions_are_balanced(pipeline: Path) -> None:
    items = [i for i in read_jsonl(pipeline / "generate" / "items.jsonl", Item) if i.answer_index is not None]
    by_template: dict[str, Counter[int]] = {}
    for i in items:
        by_template.setdefault(i.template_id or "", Counter())[i.answer_index or 0] += 1
    for tid, c in by_template.items():  # the least-used letter the item has, in a per-case hash order
        widths = {len(i.options) for i in items if i.template_id == tid}
        shared = [c.get(k, 0) for k in range(min(widths))]  # letters every item of the template has
        assert max(shared) - min(shared) <= 1, (tid, c)
        assert all(c.get(k, 0) <= max(shared) for k in range(min(widths), max(widths))), (tid, c)


def test_generate_is_byte_identical_on_rerun(pipeline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curation.generate.stage import run
    from curation.params import load_params

    from .conftest import ROOT

    p = load_params(ROOT / "params.yaml").generate
    p.templates_dir, p.knowledge = str(ROOT / p.templates_dir), str(ROOT / p.knowledge)
    p.diagnoses = str(ROOT / p.diagnoses)
    monkeypatch.chdir(pipeline)
    run(p, pipeline / "extract", tmp_path / "again")
    assert (tmp_path / "again" / "items.jsonl").read_bytes() == (pipeline / "generate" / "items.jsonl").read_bytes()


def test_filter_catches_planted_defects(pipeline: Path) -> None:
    good = next(i for i in read_jsonl(pipeline / "filter" / "items.jsonl", Item) if i.format.value == "mcq")
    assert check(good) == []
    leak = good.model_copy(update={"question": f"Is this {good.answer}? " + good.question})
    assert "answer_leak" in check(leak)
    lopsided = good.model_copy(update={"options": good.options[:2]})
    assert "mcq_option_count" in check(lopsided)
    twice = good.model_copy(update={"options": [good.answer] * 5})
    assert "mcq_duplicate_options" in check(twice)
    broken = good.model_copy(update={"images": ["/nonexistent.png"]})
    assert "image_missing" in check(broken)
    residue = good.model_copy(update={"question": "What is {{ dx }}?"})
    assert "template_residue" in check(residue)


def test_splits_are_patient_disjoint(pipeline: Path) -> None:
    items = list(read_jsonl(pipeline / "filter" / "items.jsonl", Item))
    split_of: dict[str, set[str]] = {}
    for i in items:
        split_of.setdefault(i.case_id, set()).add(i.split or "")
    assert all(len(s) == 1 for s in split_of.values())
    rejected = [json.loads(x) for x in (pipeline / "filter" / "rejected.jsonl").read_text().splitlines()]
    assert all(r["reasons"] for r in rejected)


def test_review_merge_applies_decisions(pipeline: Path, tmp_path: Path) -> None:
    from curation.params import ReviewParams
    from curation.review.merge import run

    items = list(read_jsonl(pipeline / "filter" / "items.jsonl", Item))
    a, b, c = items[0], items[1], items[2]

    def ann(user: int, verdict: str, **text: str) -> dict:
        result = [{"from_name": "verdict", "type": "choices", "value": {"choices": [verdict]}}]
        result += [{"from_name": k, "type": "textarea", "value": {"text": [v]}} for k, v in text.items()]
        if verdict == "reject":
            result.append({"from_name": "reject_reason", "type": "choices", "value": {"choices": ["ambiguous"]}})
        return {"completed_by": user, "result": result}

    snapshot = [
        {"data": {"item_id": a.item_id}, "annotations": [ann(1, "accept"), ann(2, "accept")]},
        {"data": {"item_id": b.item_id}, "annotations": [ann(1, "reject"), ann(2, "reject")]},
        {"data": {"item_id": c.item_id}, "annotations": [ann(1, "accept_with_edits", question="Edited question?")]},
        {"data": {}, "annotations": []},
    ]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(snapshot))
    report = run(ReviewParams(), pipeline / "filter", path, tmp_path / "out")
    merged = {i.item_id: i for i in read_jsonl(tmp_path / "out" / "items.jsonl", Item)}
    assert b.item_id not in merged
    assert merged[a.item_id].status == "reviewed"
    assert merged[c.item_id].question == "Edited question?"
    assert len(merged) == len(items) - 1
    assert report.counts["rejected_by_review:ambiguous"] == 1
    assert report.metrics["cohen_kappa_verdict"] == 1.0
    assert report.failures["annotation_malformed"] == 1
    reviewers = {d.reviewer for d in merged[a.item_id].review.decisions}  # type: ignore[union-attr]
    assert all(r.startswith("rev-") for r in reviewers) and len(reviewers) == 2


def test_cohen_kappa_hand_computed() -> None:
    from curation.review.merge import cohen_kappa

    pairs = [("accept", "accept")] * 6 + [("accept", "reject")] * 2 + [("reject", "reject")] * 2
    # po = 0.8; pe = (8*6 + 2*4)/100 = 0.56; kappa = 0.24/0.44
    assert cohen_kappa(pairs) == round(0.24 / 0.44, 4)


def test_release_loads_offline_and_verifies(pipeline: Path) -> None:
    from datasets import load_dataset

    from curation.release.verify import verify_release

    root = pipeline / "releases" / "neuro-bench-0.1.0"
    assert verify_release(root) == []
    manifest = json.loads((root / "manifest.json").read_text())
    files = {s: str(root / "data" / f"{s}-*.parquet") for s in manifest["counts"]["split"]}
    ds = load_dataset("parquet", data_files=files)
    total = sum(len(ds[s]) for s in ds)
    assert total == sum(manifest["counts"]["split"].values()) > 0  # what the validity gates left
    with_pixels = [r for s in ds for r in ds[s] if r["images"]]
    assert with_pixels and with_pixels[0]["images"][0].size[0] > 32
    refs = [r for s in ds for r in ds[s] if r["source"] == "adni"]
    assert refs and all(not r["images"] and r["image_refs"] for r in refs)
    # every row its terms and its true origin: a Radiopaedia case's URL and credit, a MedPix case's id, an article's
    # DOI, and for a cohort whose ids name a participant the keyed hash its case id is
    rows = [r for s in ds for r in ds[s]]
    assert all(r["license"] and r["attribution"] and r["origin"] for r in rows)
    want = {"radiopaedia": ("https://radiopaedia.org/cases/", "Radiopaedia.org"), "medpix": ("MedPix MPX", "MedPix"),
            "case-reports": ("https://doi.org/", "doi:")}
    for r in rows:
        origin, credit = want.get(r["source"], (r["case_id"], ""))
        assert r["origin"].startswith(origin) and credit in r["attribution"], (r["source"], r["origin"])
    assert {r["source"] for r in rows} >= {"radiopaedia", "medpix", "adni"}
    assert manifest["unreviewed_items"] == total and manifest["reviewed_items"] == 0
    card = (root / "README.md").read_text()
    assert manifest["canary"] in card and "not been reviewed by a clinician" in card


def test_release_tamper_and_overwrite(pipeline: Path, tmp_path: Path) -> None:
    import shutil

    from curation.errors import VerificationError
    from curation.params import ReleaseParams
    from curation.release.build import run
    from curation.release.verify import verify_release

    copy = tmp_path / "rel"
    shutil.copytree(pipeline / "releases" / "neuro-bench-0.1.0", copy)
    target = next((copy / "images").iterdir())
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert verify_release(copy) == [f"images/{target.name}: checksum mismatch"]
    # same version with different content refuses
    releases = tmp_path / "releases"
    shutil.copytree(pipeline / "releases", releases)
    other = ReleaseParams(canary="A DIFFERENT CANARY")
    with pytest.raises(VerificationError, match="already exists with different content"):
        run(other, pipeline / "review", releases)


def test_changed_template_regenerates_exactly_its_items(pipeline: Path, tmp_path: Path) -> None:
    import shutil

    from curation.generate.stage import run
    from curation.params import load_params

    from .conftest import ROOT

    tdir = tmp_path / "templates"
    shutil.copytree(ROOT / "templates" / "questions", tdir)
    path = tdir / "dementia.yaml"
    text = path.read_text()
    import re

    m = re.search(r"- id: ventricular_size\n  version: (\d+)", text)
    assert m, "ventricular_size is in dementia.yaml"
    bumped = str(int(m.group(1)) + 1)
    text = text.replace(m.group(0), f"- id: ventricular_size\n  version: {bumped}")
    path.write_text(text.replace("How would you grade the size of the lateral ventricles?",
                                 "How large are the lateral ventricles?"))
    p = load_params(ROOT / "params.yaml").generate
    p.templates_dir, p.knowledge = str(tdir), str(ROOT / p.knowledge)
    p.diagnoses = str(ROOT / p.diagnoses)
    run(p, pipeline / "extract", tmp_path / "out")
    before = [json.loads(x) for x in (pipeline / "generate" / "items.jsonl").read_text().splitlines()]
    after = [json.loads(x) for x in (tmp_path / "out" / "items.jsonl").read_text().splitlines()]
    def others(items: list[dict]) -> list[dict]:
        return [i for i in items if i["template_id"] != "ventricular_size"]

    assert others(before) == others(after)
    old = [i for i in before if i["template_id"] == "ventricular_size"]
    new = [i for i in after if i["template_id"] == "ventricular_size"]
    assert len(old) == len(new) > 0
    assert all(n["generator"]["template_version"] == bumped and n["item_id"] != o["item_id"]
               for o, n in zip(old, new, strict=True))
