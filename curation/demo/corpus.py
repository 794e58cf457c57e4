"""Write the demo raw corpus: ADNI, OASIS-1, OASIS-3, Radiopaedia, a PMC case report and MedPix teaching cases (one
writer module each).

Everything is synthetic and seeded; the PHI in it is fake and exists so de-identification has
something real to remove (names, dates, MRNs, addresses in headers, sidecars and notes).
"""

from __future__ import annotations

from pathlib import Path

from curation.demo import adni, case_reports, medpix, oasis1, oasis3, radiopaedia

WRITERS = {
    "adni": adni.write_adni,
    "oasis1": oasis1.write_oasis1,
    "oasis3": oasis3.write_oasis3,
    "radiopaedia": radiopaedia.write_radiopaedia,
    "case-reports": case_reports.write_case_reports,
    "medpix": medpix.write_medpix,
}


def write_demo_corpus(root: str | Path, sources: list[str] | None = None) -> dict[str, int]:
    """Write each source's demo tree under ``root/<source>``; returns files written per source."""
    root = Path(root)
    counts = {}
    for name in sources or list(WRITERS):
        folder = root / name
        WRITERS[name](folder)
        counts[name] = sum(1 for p in folder.rglob("*") if p.is_file())
    return counts


def series_truth() -> list[dict[str, object]]:
    """What each demo volume was drawn from: source, subject (the ingest's source id), visit number (0 =
    baseline), sequence, atrophy, lesion, pose and the participant's anatomy (``subject_anatomy``), so that a test
    can recompute its ground truth (``phantom.ground_truth``)."""
    return adni.series_truth() + oasis1.series_truth() + oasis3.series_truth()
