"""Per-source ingest on raw folders written here (no demo corpus): an OASIS-1 table with two tiny Analyze scans and
a rescan, and a JATS case report with a found and a missing figure; what cannot be used is listed with its reason."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from curation.ingest import run as ingest
from curation.jsonio import read_jsonl
from curation.params import IngestParams
from curation.pseudonyms import pseudonym
from curation.schema import Case

from .factories import png, project_params

SECRET = b"unit-test-secret"
OASIS_HEADER = "ID,M/F,Hand,Age,Educ,SES,MMSE,CDR,eTIV,nWBV,ASF,Delay\n"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # stored file paths are relative to the project root


def params() -> IngestParams:
    return project_params().ingest.model_copy(update={"max_failure_rate": 0.5})


def run_source(source: str, raw: Path, out: Path) -> tuple[list[Case], set[tuple[str, str]], dict]:
    report = ingest(params(), source, raw, out, secret=SECRET)
    quarantine = {(q["path"], q["reason"]) for q in read_jsonl(out / "quarantine.jsonl")}
    return list(read_jsonl(out / "cases.jsonl", Case)), quarantine, report.as_dict()


def analyze(path: Path, shape: tuple[int, int, int] = (8, 9, 10)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.AnalyzeImage(np.arange(np.prod(shape), dtype=np.int16).reshape(shape), np.eye(4)), str(path))


def test_oasis1_table_scans_and_rescan(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    for session in ("OAS1_0001_MR1", "OAS1_0001_MR2", "OAS1_0002_MR1"):
        analyze(raw / session / "RAW" / f"{session}_mpr-1_anon.hdr")
    analyze(raw / "OAS1_0002_MR1" / "PROCESSED" / "OAS1_0002_MR1_t88.hdr")
    (raw / "OAS1_0002_MR1" / "RAW" / "OAS1_0002_MR1_mpr-2_anon.hdr").write_bytes(b"\0" * 10)  # not a header
    (raw / "notes.txt").write_text("downloaded in 2020\n")
    (raw / "oasis_cross-sectional.csv").write_text(
        OASIS_HEADER
        + "OAS1_0001_MR1,F,R,74,2,3,29,0,1344,0.743,1.306,N/A\n"
        + "OAS1_0001_MR2,F,R,74,2,3,29,0,1344,0.743,1.306,14\n"
        + "OAS1_0002_MR1,M,R,81,4,1,25,0.5,1500,0.700,1.170,N/A\n"
        + "SUBJECT_3,M,R,70,4,1,25,0.5,1500,0.700,1.170,N/A\n")

    cases, quarantine, report = run_source("oasis1", raw, tmp_path / "out")
    by_id = {c.case_id: c for c in cases}
    first, second = (by_id[pseudonym("oasis1", s, secret=SECRET)] for s in ("OAS1_0001", "OAS1_0002"))
    assert len(cases) == 2
    assert (first.patient.age, first.patient.sex, first.patient.handedness) == (74, "F", "R")
    assert first.diagnosis.primary == "cognitively normal" and second.diagnosis.primary == "very mild dementia"
    assert [(v.visit_id, v.days_from_baseline) for v in first.visits] == [("MR1", 0), ("MR2", 14)]
    assert first.visits[1].scores["reliability_rescan"] == "yes" and "reliability_rescan" not in first.visits[0].scores
    assert first.visits[0].scores["MMSE"] == 29.0 and first.ehr["nWBV"] == 0.743
    (series,) = first.visits[0].series
    assert (series.format, series.sequence, series.shape) == ("analyze", "T1w", (8, 9, 10))
    assert [Path(f).suffix for f in series.files] == [".hdr", ".img"] and all(Path(f).is_file() for f in series.files)
    assert len(second.visits[0].series) == 1  # the broken header and the derived image are not series
    assert {r for _, r in quarantine} == {"csv_bad_row", "volume_unreadable", "skipped:derived_image",
                                          "skipped:not_in_image_layout"}
    assert ("notes.txt", "skipped:not_in_image_layout") in quarantine
    # the subject id is kept only in the private id map (ingest still names stored files as the source did)
    id_map = list(read_jsonl(tmp_path / "out" / "private" / "id_map.jsonl"))
    assert {(r["source_id"], r["case_id"]) for r in id_map} == {("OAS1_0001", first.case_id),
                                                                ("OAS1_0002", second.case_id)}
    assert "OAS1" not in first.model_dump_json(exclude={"visits"})
    assert report["counts"]["cases"] == 2 and report["counts"]["series"] == 3


JATS = """<?xml version="1.0" encoding="UTF-8"?>
<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="{kind}">
<front>
<journal-meta><journal-title-group><journal-title>Unit Neurology Reports</journal-title></journal-title-group>
</journal-meta>
<article-meta>
<article-id pub-id-type="pmcid">{pmcid}</article-id><article-id pub-id-type="doi">10.0000/unr.{pmcid}</article-id>
<title-group><article-title>A ring-enhancing lesion</article-title></title-group>
<contrib-group><contrib contrib-type="author"><name><surname>Quist</surname><given-names>Ada</given-names></name>
</contrib></contrib-group>
<permissions><license xlink:href="https://creativecommons.org/licenses/by-nc/4.0/"><license-p>Open access.</license-p>
</license></permissions>
</article-meta>
</front>
<body>
<sec><title>Introduction</title><p>Ring-enhancing lesions have a broad differential.</p></sec>
<sec><title>Case presentation</title><p>A 58-year-old woman had two weeks of headache.</p>
<p>MRI showed a ring-enhancing lesion.</p>
<fig id="F1"><label>Figure 1</label><caption><p>Axial T1 post-contrast MRI.</p></caption>
<graphic xlink:href="g1"/></fig>
<fig id="F2"><label>Figure 2</label><caption><p>Axial DWI.</p></caption><graphic xlink:href="g2"/></fig>
</sec>
<sec><title>Discussion</title><p>Abscess was confirmed.</p></sec>
</body>
</article>
"""


def test_jats_case_report_with_a_found_and_a_missing_figure(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "PMC1234567.nxml").write_text(JATS.format(kind="case-report", pmcid="PMC1234567"))
    png(raw / "g1.png")  # F1's graphic, found by extension; F2's is absent
    (raw / "PMC7654321.nxml").write_text(JATS.format(kind="research-article", pmcid="PMC7654321"))
    (raw / "broken.xml").write_text("<article><body>")
    (raw / "readme.md").write_text("not an article\n")

    cases, quarantine, report = run_source("case-reports", raw, tmp_path / "out")
    (case,) = cases
    assert case.case_id == pseudonym("case-reports", "PMC1234567", secret=SECRET)
    assert case.license == "CC BY-NC 4.0"
    assert case.publication and case.publication.pmcid == "PMC1234567" and case.publication.authors == ["Ada Quist"]
    # authors, journal and DOI: not the title (a title can name the patient; it is de-identified as text)
    assert case.attribution == "Ada Quist. Unit Neurology Reports. doi:10.0000/unr.PMC1234567"
    assert case.presentation == "A 58-year-old woman had two weeks of headache.\n\nMRI showed a ring-enhancing lesion."
    assert case.notes == "Abscess was confirmed."
    f1, f2 = case.figures
    assert (f1.figure_id, f1.missing, f1.caption) == ("F1", False, "Axial T1 post-contrast MRI.")
    assert f1.path and Path(f1.path).read_bytes() == (raw / "g1.png").read_bytes()
    assert (f2.figure_id, f2.missing, f2.path) == ("F2", True, None)
    assert quarantine == {("PMC1234567.nxml#F2", "incomplete:figure_missing"),
                          ("PMC7654321.nxml", "skipped:not_case_report"), ("broken.xml", "xml_invalid"),
                          ("readme.md", "skipped:not_jats")}
    assert report["incomplete_by_reason"] == {"incomplete:figure_missing": 1}
    assert report["failures_by_reason"] == {"xml_invalid": 1}


def test_deidentified_volumes_do_not_keep_the_source_names(tmp_path: Path) -> None:
    """OASIS names each file by participant and session (OAS1_0001_MR1_mpr-1_anon.hdr): the de-identified copies
    are named by format, so no record or file name after deidentify links the pseudonym to the participant."""
    from curation.deid.stage import run as deidentify

    raw = tmp_path / "raw"
    for session in ("OAS1_0001_MR1", "OAS1_0001_MR2"):
        analyze(raw / session / "RAW" / f"{session}_mpr-1_anon.hdr")
    (raw / "oasis_cross-sectional.csv").write_text(
        OASIS_HEADER + "OAS1_0001_MR1,F,R,74,2,3,29,0,1344,0.743,1.306,N/A\n"
        + "OAS1_0001_MR2,F,R,74,2,3,29,0,1344,0.743,1.306,14\n")
    run_source("oasis1", raw, tmp_path / "ingest" / "oasis1")
    assert "OAS1_0001" in (tmp_path / "ingest" / "oasis1" / "cases.jsonl").read_text()  # ingest keeps them

    deidentify(project_params().deidentify, tmp_path / "ingest", tmp_path / "deid", secret=SECRET)
    (case,) = read_jsonl(tmp_path / "deid" / "cases.jsonl", Case)
    files = [f for v in case.visits for s in v.series for f in s.files]
    assert [Path(f).name for f in files] == ["volume.hdr", "volume.img"] * 2 and all(Path(f).is_file() for f in files)
    written = [p.relative_to(tmp_path / "deid").as_posix() for p in (tmp_path / "deid").rglob("*")]
    assert not [w for w in written if "OAS1" in w]
    assert "OAS1" not in (tmp_path / "deid" / "cases.jsonl").read_text()
    assert "OAS1" not in (tmp_path / "deid" / "audit.jsonl").read_text()


def test_adni_image_ids_do_not_survive_deidentify(tmp_path: Path) -> None:
    """ADNI names a series by its IDA image id (I100000), which the ADNI database links to the participant: after
    deidentify each is a keyed pseudonym, stable under the secret, in the records and in the folder names."""
    from curation.deid.stage import run as deidentify
    from curation.jsonio import write_jsonl
    from curation.schema import Patient, Series, SourceName, Visit

    def case() -> Case:
        visits = []
        for visit, image_id in (("bl", "I100000"), ("m12", "I100001")):
            analyze(tmp_path / "ingest" / "adni" / "files" / "c1" / image_id / "scan.hdr")
            files = [f"ingest/adni/files/c1/{image_id}/scan.{ext}" for ext in ("hdr", "img")]
            visits.append(Visit(visit_id=visit, series=[Series(series_id=image_id, format="analyze", files=files)]))
        return Case(case_id="adni-0123456789ab", source=SourceName.adni, license="ADNI DUA", patient=Patient(age=70),
                    visits=visits)

    write_jsonl(tmp_path / "ingest" / "adni" / "cases.jsonl", [case()])
    ids = []
    for out in ("deid", "deid-again"):
        deidentify(project_params().deidentify, Path("ingest"), Path(out), secret=SECRET)
        (done,) = read_jsonl(Path(out) / "cases.jsonl", Case)
        ids.append([s.series_id for s in done.all_series()])
        text = (Path(out) / "cases.jsonl").read_text() + (Path(out) / "audit.jsonl").read_text()
        assert "I10000" not in text and not [p for p in Path(out).rglob("*") if "I10000" in p.as_posix()]
        assert all(Path(f).is_file() for s in done.all_series() for f in s.files)
    assert ids[0] == ids[1] and len(set(ids[0])) == 2 and all(i.startswith("img-") for i in ids[0])


def test_records_point_into_the_raw_folder_and_its_state_tracks_every_file(tmp_path: Path) -> None:
    """copy_files false (the project's setting, #33): nothing is copied, records name the raw files, and
    raw_state.jsonl changes when a file's bytes do though the records do not, so DVC reruns the next stage."""
    import os

    from curation.errors import InputError

    raw = tmp_path / "raw"
    for session in ("OAS1_0001_MR1", "OAS1_0002_MR1"):
        analyze(raw / session / "RAW" / f"{session}_mpr-1_anon.hdr")
    (raw / "oasis_cross-sectional.csv").write_text(OASIS_HEADER + "OAS1_0001_MR1,F,R,74,2,3,29,0,1344,0.743,1.306,"
                                                   "N/A\nOAS1_0002_MR1,M,R,81,4,1,25,0.5,1500,0.700,1.170,N/A\n")
    p = params().model_copy(update={"copy_files": False})
    ingest(p, "oasis1", raw, tmp_path / "a", secret=SECRET)
    cases = list(read_jsonl(tmp_path / "a" / "cases.jsonl", Case))
    files = [f for c in cases for s in c.all_series() for f in s.files]
    assert files and all(f.startswith("raw/") and Path(f).is_file() for f in files)
    assert not (tmp_path / "a" / "files").exists()
    state = (tmp_path / "a" / "raw_state.jsonl").read_text()
    assert {r["path"] for r in read_jsonl(tmp_path / "a" / "raw_state.jsonl")} == {
        p_.relative_to(raw).as_posix() for p_ in raw.rglob("*") if p_.is_file()}

    img = raw / "OAS1_0001_MR1" / "RAW" / "OAS1_0001_MR1_mpr-1_anon.img"  # the companion no record names
    data = bytearray(img.read_bytes())
    data[-1] ^= 0xFF
    img.write_bytes(bytes(data))
    os.utime(img, ns=(img.stat().st_atime_ns, img.stat().st_mtime_ns + 1_000_000))
    ingest(p, "oasis1", raw, tmp_path / "b", secret=SECRET)
    assert (tmp_path / "b" / "cases.jsonl").read_bytes() == (tmp_path / "a" / "cases.jsonl").read_bytes()
    assert (tmp_path / "b" / "raw_state.jsonl").read_text() != state

    elsewhere = tmp_path / "project"
    elsewhere.mkdir()
    os.chdir(elsewhere)  # the raw folder is now outside the project folder: refused with its reason, not half-read
    with pytest.raises(InputError, match="copy_files is false"):
        ingest(p, "oasis1", raw, elsewhere / "c", secret=SECRET)


def test_one_sequence_table_for_bids_suffixes_and_file_name_shorthands(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """OASIS-3's ingest reads a BIDS suffix as written; `curate imaging render` reads it and the shorthands ignoring
    case; an ending listed twice (ignoring case) is a one-line error naming the table."""
    from curation.errors import ParamsError
    from curation.ingest import sequences

    assert [sequences.sequence_of_suffix(s) for s in ("T1w", "t1w", "swi", "T2star", "PDw")] == \
        ["T1w", None, "SWI", "SWI", None]
    assert [sequences.sequence_from_name(Path(n)) for n in ("a_t2STAR.nii", "a_mprage.nii.gz", "a_PDw.hdr")] == \
        ["SWI", "T1w", "PD"]
    table = tmp_path / "sequences.yaml"
    table.write_text("bids: {T1w: T1w}\nshorthands: {t1W: T1w}\n")
    monkeypatch.setattr(sequences, "TABLE", table)
    sequences.sequence_names.cache_clear()
    try:
        with pytest.raises(ParamsError, match="t1W: listed twice"):
            sequences.sequence_names()
    finally:
        sequences.sequence_names.cache_clear()
