"""The demo OASIS-1 release: one Analyze volume per session (free text in its header) and the
cross-sectional table."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np

from curation.demo.common import demo_affine, participant_anatomy, visit_pose, write_csv
from curation.demo.phantom import Lesion, head

OASIS1 = [
    # id, sex, hand, age, educ, ses, mmse, cdr, etiv, nwbv, asf, lesion
    ("OAS1_0001_MR1", "F", "R", 74, 2, 3, 29, 0.0, 1344, 0.743, 1.306, None),
    ("OAS1_0002_MR1", "F", "R", 55, 4, 1, 29, 0.0, 1147, 0.810, 1.531, None),
    ("OAS1_0031_MR1", "M", "R", 88, 1, 4, 21, 1.0, 1409, 0.667, 1.246, Lesion((0.62, 0.55, 0.6), 4.0)),
    ("OAS1_0042_MR1", "F", "R", 76, 3, 2, 24, 0.5, 1390, 0.701, 1.262, None),
    ("OAS1_0002_MR2", "F", "R", 55, 4, 1, 29, 0.0, 1147, 0.810, 1.531, None),
]


def oasis1_atrophy(nwbv: float) -> float:
    """The phantom's atrophy for an OASIS-1 row, from its normalised whole-brain volume (0.81 none .. 0.65 severe),
    so that the images differ as the table's nWBV grades do."""
    return round(min(1.0, max(0.0, (0.81 - nwbv) / 0.16)), 3)


def write_oasis1(root: Path) -> None:
    rows = []
    for n, (sid, sex, hand, age, educ, ses, mmse, cdr, etiv, nwbv, asf, lesion) in enumerate(OASIS1):
        atrophy = oasis1_atrophy(nwbv)
        pose = visit_pose(8000 + 10 * n, 1 if sid.endswith("MR2") else 0)
        vol = head("T1w", atrophy=atrophy, lesion=lesion, seed=3000 + n, pose=pose,
                   subject=participant_anatomy(sid.rsplit("_", 1)[0])).astype(np.int16)
        img = nib.AnalyzeImage(vol, demo_affine())
        img.header["descrip"] = f"{sid} Mary Major DOB 1931-02-03".encode()[:79]
        img.header["db_name"] = b"SPFLD-MRN 5512"
        raw = root / sid / "RAW"
        raw.mkdir(parents=True, exist_ok=True)
        nib.save(img, str(raw / f"{sid}_mpr-1_anon.hdr"))
        rows.append({
            "ID": sid, "M/F": sex, "Hand": hand, "Age": age, "Educ": educ, "SES": ses, "MMSE": mmse,
            "CDR": cdr, "eTIV": etiv, "nWBV": nwbv, "ASF": asf, "Delay": 14 if sid.endswith("MR2") else "N/A",
        })
    write_csv(root / "oasis_cross-sectional.csv",
         ["ID", "M/F", "Hand", "Age", "Educ", "SES", "MMSE", "CDR", "eTIV", "nWBV", "ASF", "Delay"], rows)


def series_truth() -> list[dict[str, object]]:
    """What each OASIS-1 volume was drawn from (see ``corpus.series_truth``)."""
    out: list[dict[str, object]] = []
    for n, row in enumerate(OASIS1):
        sid, nwbv, lesion = row[0], row[9], row[11]
        rescan = sid.endswith("MR2")
        out.append({"source": "oasis1", "subject": sid.rsplit("_", 1)[0], "visit": 1 if rescan else 0,
                    "sequence": "T1w", "atrophy": oasis1_atrophy(float(nwbv)), "lesion": lesion,
                    "pose": visit_pose(8000 + 10 * n, 1 if rescan else 0),
                    "subject_anatomy": participant_anatomy(sid.rsplit("_", 1)[0])})
    return out
