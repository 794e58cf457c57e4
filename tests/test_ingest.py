from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.demo.adni import ADNI_SUBJECTS
from curation.demo.phantom import SHAPE
from curation.ingest import run
from curation.jsonio import read_jsonl
from curation.params import IngestParams
from curation.schema import Case

from .conftest import SHARED

SLICES = SHAPE[2]  # one DICOM file a slice in the demo's ADNI series


def _ingest(source: str, raw: Path, out: Path) -> tuple[list[Case], list[dict], dict]:
    report = run(IngestParams(max_failure_rate=0.5), source, raw, out)
    cases = list(read_jsonl(out / "cases.jsonl", Case))
    quarantine = list(read_jsonl(out / "quarantine.jsonl"))
    return cases, quarantine, report.as_dict()


def test_adni_tree(demo_raw: Path, tmp_path: Path) -> None:
    cases, quarantine, rep = _ingest("adni", demo_raw / "adni", tmp_path / "o")
    assert len(cases) == len(ADNI_SUBJECTS)
    by_dx = {c.diagnosis.primary for c in cases}
    assert by_dx == {"cognitively normal", "mild cognitive impairment", "Alzheimer's disease dementia"}
    case = next(c for c in cases if len(c.visits) == 2 and c.visits[1].diagnosis == "Alzheimer's disease dementia"
                and c.visits[0].diagnosis == "mild cognitive impairment")
    assert [v.visit_id for v in case.visits] == ["bl", "m24"]
    assert case.visits[1].days_from_baseline == 731
    assert {s.sequence for s in case.visits[0].series} == {"T1w", "FLAIR"}
    assert all(len(s.files) == SLICES for s in case.all_series())
    # participant ids stay in the private map only
    assert "_S_" not in (tmp_path / "o" / "cases.jsonl").read_text()
    ids = [json.loads(x) for x in (tmp_path / "o" / "private" / "id_map.jsonl").read_text().splitlines()]
    assert {r["source_id"] for r in ids} == {s[0] for s in ADNI_SUBJECTS}
    assert quarantine == [{"path": "ADNI/README.txt", "reason": "skipped:not_in_image_layout",
                           "detail": "file outside <PTID>/<desc>/<date>/<id>/"}]
    assert rep["failed"] == 0


def test_adni_malformed_inputs_are_quarantined(raw_copy: Path, tmp_path: Path) -> None:
    adni = raw_copy / "adni"
    victim = sorted((adni / "ADNI" / "027_S_0074").rglob("*.dcm"))[5]
    victim.write_bytes(victim.read_bytes()[:-3000])  # truncated pixel data
    (victim.parent / "notes.dcm").write_bytes(b"\x00" * 128 + b"DICM" + b"garbage")
    csv = adni / "ADNIMERGE.csv"
    lines = csv.read_text().splitlines()
    lines.append("9999,BAD_PTID,bl,bl,2006-01-01,CN,CN,70,Male,12,x,x,0,29,0,1,1,1,0,1,1,1,1,0")
    lines.append("74,027_S_0074,m24,m24,not-a-date,CN,CN,70,Male,12,x,x,0,29,0,1,1,1,0,1,1,1,1,24")
    csv.write_text("\n".join(lines) + "\n")
    cases, quarantine, rep = _ingest("adni", adni, tmp_path / "o")
    reasons = {(q["path"], q["reason"]) for q in quarantine}
    rel = victim.relative_to(adni).as_posix()
    assert (rel, "dicom_truncated") in reasons
    assert (f"{Path(rel).parent.as_posix()}/notes.dcm", "dicom_no_meta") in reasons
    bad_rows = sorted(p for p, r in reasons if r == "csv_bad_row")
    rows = 2 * len(ADNI_SUBJECTS)  # two visits each, below the header: the two bad rows come after
    assert bad_rows == [f"ADNIMERGE.csv:{rows + 2}", f"ADNIMERGE.csv:{rows + 3}"]
    assert len(cases) == len(ADNI_SUBJECTS)  # the rest of the run succeeded
    assert sum(len(s.files) for c in cases for s in c.all_series()) == 4 * len(ADNI_SUBJECTS) * SLICES - 1
    assert rep["failures_by_reason"]["csv_bad_row"] == 2


def test_csv_missing_column_is_quarantined(raw_copy: Path, tmp_path: Path) -> None:
    csv = raw_copy / "oasis1" / "oasis_cross-sectional.csv"
    rows = [ln.split(",") for ln in csv.read_text().splitlines()]
    csv.write_text("\n".join(",".join(r[1:]) for r in rows) + "\n")  # drop the ID column
    cases, quarantine, rep = _ingest("oasis1", raw_copy / "oasis1", tmp_path / "o")
    assert {"path": "oasis_cross-sectional.csv", "reason": "csv_missing_column",
            "detail": "missing required column(s): ID"} in quarantine
    assert len(cases) == 4 and all(c.patient.age is None for c in cases)


def test_oasis1_and_rescan(demo_raw: Path, tmp_path: Path) -> None:
    cases, quarantine, _ = _ingest("oasis1", demo_raw / "oasis1", tmp_path / "o")
    assert len(cases) == 4
    rescanned = [c for c in cases if len(c.visits) == 2]
    assert len(rescanned) == 1
    assert rescanned[0].visits[1].scores["reliability_rescan"] == "yes"
    assert rescanned[0].visits[1].days_from_baseline == 14
    dx = sorted(c.diagnosis.primary or "" for c in cases)
    assert dx == ["cognitively normal", "cognitively normal", "mild dementia", "very mild dementia"]
    assert quarantine == []


def test_oasis1_truncated_analyze_is_quarantined(raw_copy: Path, tmp_path: Path) -> None:
    img = next((raw_copy / "oasis1").rglob("OAS1_0001_MR1_mpr-1_anon.img"))
    img.write_bytes(img.read_bytes()[:1000])
    cases, quarantine, _ = _ingest("oasis1", raw_copy / "oasis1", tmp_path / "o")
    assert [q["reason"] for q in quarantine] == ["volume_unreadable"]
    assert quarantine[0]["path"] == "OAS1_0001_MR1/RAW/OAS1_0001_MR1_mpr-1_anon.hdr"
    assert len(cases) == 4


def test_oasis3_visits_from_day_offsets(demo_raw: Path, tmp_path: Path) -> None:
    cases, quarantine, _ = _ingest("oasis3", demo_raw / "oasis3", tmp_path / "o")
    assert len(cases) == 2 and quarantine == []
    c = next(c for c in cases if c.visits[-1].days_from_baseline == 1502)
    assert [v.diagnosis for v in c.visits] == ["very mild dementia", "Alzheimer's disease dementia"]
    assert {s.sequence for s in c.visits[0].series} == {"T1w", "FLAIR"}
    assert c.ehr["APOE4"] == 1.0


def test_radiopaedia_and_missing_image(raw_copy: Path, tmp_path: Path) -> None:
    folder = raw_copy / "radiopaedia" / "glioblastoma-demo-2"
    (folder / "images" / "002.png").unlink()
    (raw_copy / "radiopaedia" / "broken").mkdir()
    (raw_copy / "radiopaedia" / "broken" / "case.json").write_text("{not json")
    from curation.demo.radiopaedia import RADIOPAEDIA

    cases, quarantine, rep = _ingest("radiopaedia", raw_copy / "radiopaedia", tmp_path / "o")
    assert len(cases) == len(RADIOPAEDIA)  # every case, the one with a missing image included
    gbm = next(c for c in cases if "Demo Author B" in (c.attribution or ""))
    assert [f.missing for f in gbm.figures] == [False, True, False]
    assert gbm.title == "Glioblastoma" and gbm.license == "CC BY-NC-SA 3.0"
    reasons = {(q["path"], q["reason"]) for q in quarantine}
    assert ("glioblastoma-demo-2/images/002.png", "incomplete:image_missing") in reasons
    assert ("broken/case.json", "json_invalid") in reasons


def test_radiopaedia_layout_case_from_another_site_is_credited_to_that_site(raw_copy: Path, tmp_path: Path) -> None:
    """A teaching case exported in Radiopaedia's layout from MedPix (or a site the spec does not know) is that site's:
    its address, its terms and its credit, never "Radiopaedia.org"."""
    import json

    root = raw_copy / "radiopaedia"
    for slug, url in [("glioblastoma-demo-2", "https://medpix.nlm.nih.gov/case?id=abc-123"),
                      ("acute-ischaemic-stroke-demo-3", "https://teaching.example.org/case/7")]:
        doc = json.loads((root / slug / "case.json").read_text())
        doc.update(url=url, license=None)
        (root / slug / "case.json").write_text(json.dumps(doc))
    cases, _, _ = _ingest("radiopaedia", root, tmp_path / "o")
    by_origin = {c.origin: c for c in cases}
    medpix = by_origin["https://medpix.nlm.nih.gov/case?id=abc-123"]
    assert "Radiopaedia" not in (medpix.attribution or "") and "MedPix" in (medpix.attribution or "")
    assert medpix.license.startswith("MedPix terms")
    other = by_origin["https://teaching.example.org/case/7"]
    assert other.attribution == "Case from https://teaching.example.org/case/7"
    assert other.license == "terms of teaching.example.org: not stated in the export"
    rest = [c for c in cases if c not in (medpix, other)]
    assert all((c.origin or "").startswith("https://radiopaedia.org/cases/")
               and "Radiopaedia.org" in (c.attribution or "") for c in rest)


def test_a_radiopaedia_key_image_says_what_it_is_and_a_stack_does_not(raw_copy: Path, tmp_path: Path) -> None:
    """A series of one image is a key image that the study's caption describes: its kind, modality and plane come
    from the study and the series name (as a teaching file gives them), so the teaching templates read it; a
    stack's slices keep none."""
    import json

    root = raw_copy / "radiopaedia"
    doc = json.loads((root / "glioblastoma-demo-2" / "case.json").read_text())
    first = doc["studies"][0]
    doc["studies"].append({"modality": "MRI", "plane": "Coronal", "caption": "Ring-enhancing left frontal mass.",
                           "series": [{"name": "T1W w/Gadolinium", "images": [first["series"][0]["images"][0]]}]})
    (root / "glioblastoma-demo-2" / "case.json").write_text(json.dumps(doc))
    cases, _, _ = _ingest("radiopaedia", root, tmp_path / "o")
    gbm = next(c for c in cases if c.origin and c.origin.endswith("glioblastoma-demo-2"))
    *stack, key = gbm.figures
    assert (key.kind, key.modality, key.plane, key.contrast) == ("T1C", "MR", "coronal", True)
    assert all(f.kind is None and f.modality is None for f in stack)


def test_case_reports_demo(raw_copy: Path, tmp_path: Path) -> None:
    (raw_copy / "case-reports" / "bad.xml").write_text("<article><body>")
    cases, quarantine, rep = _ingest("case-reports", raw_copy / "case-reports", tmp_path / "o")
    assert len(cases) == 1
    c = cases[0]
    assert c.publication and c.publication.pmcid == "PMC9000001" and c.license == "CC BY 4.0"
    assert c.figures[0].path and c.figures[0].label == "Figure 1."
    assert "sudden word-finding difficulty" in c.presentation
    reasons = {(q["path"], q["reason"]) for q in quarantine}
    assert ("PMC9000002.nxml", "skipped:not_case_report") in reasons
    assert ("bad.xml", "xml_invalid") in reasons


@pytest.mark.skipif(not (SHARED / "fixtures" / "jats").is_dir(), reason="shared fixtures absent")
def test_real_pmc_case_reports(tmp_path: Path) -> None:
    cases, quarantine, rep = _ingest("case-reports", SHARED / "fixtures" / "jats", tmp_path / "o")
    assert len(cases) == 2
    assert {c.publication.pmcid for c in cases if c.publication} == {"PMC6358576", "PMC6358577"}
    assert all(c.license == "CC BY-NC-ND 4.0" for c in cases)
    assert all(c.presentation for c in cases)  # found by the section title "Case Report"
    assert sum(len(c.figures) for c in cases) == 8
    assert all(f.missing for c in cases for f in c.figures)
    assert rep["incomplete_by_reason"] == {"incomplete:figure_missing": 8}
    assert rep["failed"] == 0


def test_oasis1_spreadsheet_gives_the_same_cases_as_the_csv(raw_copy: Path, tmp_path: Path) -> None:
    import csv

    import openpyxl

    src = raw_copy / "oasis1"
    from_csv, _, _ = _ingest("oasis1", src, tmp_path / "csv")
    table = list(csv.reader((src / "oasis_cross-sectional.csv").read_text().splitlines()))
    wb = openpyxl.Workbook()
    for row in table:
        wb.active.append([float(v) if v.replace(".", "", 1).isdigit() else (v or None) for v in row])
    wb.save(src / "oasis_cross-sectional.xlsx")
    (src / "oasis_cross-sectional.csv").unlink()
    from_xlsx, quarantine, _ = _ingest("oasis1", src, tmp_path / "xlsx")
    assert golden_summary(from_xlsx) == golden_summary(from_csv)  # the same cases; only output paths differ
    (src / "oasis_cross-sectional.xlsx").write_bytes(b"PK\x03\x04 not really a spreadsheet")
    _, quarantine, _ = _ingest("oasis1", src, tmp_path / "bad")
    assert [q["reason"] for q in quarantine if q["path"].endswith(".xlsx")] == ["spreadsheet_malformed"]


def test_case_reports_in_an_articles_wrapper(raw_copy: Path, tmp_path: Path) -> None:
    src = raw_copy / "case-reports"
    one, _, _ = _ingest("case-reports", src, tmp_path / "one")
    bodies = []
    for f in sorted(src.glob("*.nxml")):
        text = f.read_text()
        bodies.append(text[text.index("<article"):])
        f.unlink()
    (src / "bundle.xml").write_text('<?xml version="1.0"?>\n<articles>\n' + "\n".join(bodies) + "\n</articles>\n")
    wrapped, quarantine, rep = _ingest("case-reports", src, tmp_path / "wrapped")
    assert [c.publication.pmcid for c in wrapped] == [c.publication.pmcid for c in one] == ["PMC9000001"]
    assert wrapped[0].figures[0].path and wrapped[0].presentation == one[0].presentation
    assert any(q["reason"] == "skipped:not_case_report" for q in quarantine)


GOLDEN = Path(__file__).parent / "golden"


def golden_summary(cases: list[Case]) -> list[dict]:
    """What a source's ingest must produce from the demo tree, without volatile fields (paths, provenance)."""
    out = []
    for c in cases:
        out.append({
            "case_id": c.case_id, "source": c.source.value, "patient": c.patient.model_dump(),
            "diagnosis": c.diagnosis.model_dump(), "license": c.license,
            "visits": [{"visit_id": v.visit_id, "days": v.days_from_baseline, "diagnosis": v.diagnosis,
                        "scores": v.scores, "series": [{"sequence": s.sequence, "n_files": len(s.files),
                                                        "description": s.description} for s in v.series]}
                       for v in c.visits],
            "figures": [{"figure_id": f.figure_id, "label": f.label, "missing": f.missing, "kind": f.kind,
                         "plane": f.plane} for f in c.figures],
            "ehr": c.ehr,
        })
    return out


@pytest.mark.parametrize("source", ["adni", "oasis1", "oasis3", "radiopaedia", "case-reports", "medpix"])
def test_golden_ingest(source: str, demo_raw: Path, tmp_path: Path) -> None:
    """Golden in/ref: the generated demo tree (in) must ingest to the committed reference (ref).

    After an intended change, regenerate the references with `python scripts/update_golden.py` and review the diff.
    """
    cases, _, _ = _ingest(source, demo_raw / source, tmp_path / "o")
    ref = json.loads((GOLDEN / f"{source}.json").read_text())
    assert json.loads(json.dumps(golden_summary(cases), default=str)) == ref


def test_adni_ida_metadata_xml(raw_copy: Path, tmp_path: Path) -> None:
    src = raw_copy / "adni"
    xmls = sorted(src.glob("ADNI_*_I*.xml"))
    assert len(xmls) == 4 * len(ADNI_SUBJECTS)  # two visits, two series each
    xmls[0].write_text("<idaxs><project>")  # broken
    (src / "ADNI_999_S_9999_MR_MPRAGE_S1_I999999.xml").write_text(
        xmls[1].read_text().replace("<imageUID>", "<imageUID>99").replace("027_S_0074", "999_S_9999"))
    cases, quarantine, rep = _ingest("adni", src, tmp_path / "o")
    series = [s for c in cases for s in c.all_series()]
    with_ida = [s for s in series if s.sidecar.get("ida")]
    assert len(with_ida) == 4 * len(ADNI_SUBJECTS) - 1  # all but the series whose XML is broken
    meta = with_ida[0].sidecar["ida"]
    assert meta["Field Strength"] == "1.5" and meta["visit"].startswith("ADNI") and "Manufacturer" not in meta
    assert {(q["path"], q["reason"]) for q in quarantine} >= {
        (xmls[0].name, "xml_invalid"), ("ADNI_999_S_9999_MR_MPRAGE_S1_I999999.xml", "skipped:ida_xml_without_series")}
    assert "_S_" not in (tmp_path / "o" / "cases.jsonl").read_text()  # the XML's subject id is not carried
