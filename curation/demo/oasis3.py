"""The demo OASIS-3 release: BIDS-named NIfTI volumes with JSON sidecars per session, the demographics and
the clinical (CDR) tables."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np

from curation.demo.common import demo_affine, participant_anatomy, visit_pose, write_csv
from curation.demo.phantom import Lesion, head
from curation.records import write_text

OASIS3 = [
    # id, gender(1=M,2=F), age, educ, apoe, [(day, mmse, cdr, cdrsum, dx)], lesion
    ("OAS30001", 2, 65.2, 12, 33, [(0, 30, 0.0, 0.0, "Cognitively normal"), (1123, 29, 0.0, 0.0, "Cognitively normal")],
     None),
    ("OAS30027", 1, 71.9, 16, 34, [(0, 27, 0.5, 1.0, "uncertain dementia"), (1502, 23, 1.0, 5.0, "AD Dementia")],
     Lesion((0.4, 0.6, 0.62), 4.0)),
]


# a lesion that grows between a participant's visits (radius in grid voxels at the follow-ups): what the lesion
# change between two FLAIR visits finds
GROWS = {"OAS30027": 6.5}


def _lesion_at(sid: str, lesion: Lesion | None, visit: int) -> Lesion | None:
    """The participant's lesion as drawn at ``visit`` (grown at a follow-up, see GROWS)."""
    if lesion is None or visit == 0 or sid not in GROWS:
        return lesion
    return Lesion(lesion.center, GROWS[sid], lesion.axes)


def write_oasis3(root: Path) -> None:
    demo_rows, cdr_rows = [], []
    for n, (sid, gender, age, educ, apoe, visits, lesion) in enumerate(OASIS3):
        demo_rows.append({"OASISID": sid, "AgeatEntry": age, "GENDER": gender, "EDUC": educ, "APOE": apoe, "HAND": "R"})
        for v, (day, mmse, cdr, cdrsum, dx) in enumerate(visits):
            cdr_rows.append({"OASISID": sid, "days_to_visit": day, "MMSE": mmse, "CDRTOT": cdr, "CDRSUM": cdrsum,
                             "dx1": dx})
            atrophy = {0.0: 0.0, 0.5: 0.35, 1.0: 0.75}[cdr]
            session = f"{sid}_MR_d{day:04d}"
            for a, seq in enumerate(["T1w", "FLAIR"]):
                vol = head(seq, atrophy=atrophy, lesion=_lesion_at(sid, lesion, v), seed=4000 + 100 * n + 10 * v + a,
                           pose=visit_pose(9000 + 10 * n, v), subject=participant_anatomy(sid)).astype(np.int16)
                anat = root / session / f"anat{a + 1}"
                anat.mkdir(parents=True, exist_ok=True)
                stem = f"sub-{sid}_ses-d{day:04d}_{seq}"
                img = nib.Nifti1Image(vol, demo_affine())
                img.header["descrip"] = b"Springfield MR Center"
                nib.save(img, str(anat / f"{stem}.nii.gz"))
                sidecar = {
                    "Modality": "MR", "MagneticFieldStrength": 3, "Manufacturer": "Siemens",
                    "ManufacturerModelName": "TrioTim", "InstitutionName": "Springfield MR Center",
                    "InstitutionAddress": "1 Medical Plaza, Springfield",
                    "AcquisitionDateTime": f"2011-0{v + 4}-1{n}T09:41:00",
                    "RepetitionTime": 2.4 if seq == "T1w" else 9.0, "EchoTime": 0.003 if seq == "T1w" else 0.09,
                    "SeriesDescription": f"{seq} {sid}",
                }
                write_text(anat / f"{stem}.json", json.dumps(sidecar, indent=2) + "\n")
    write_csv(root / "OASIS3_demographics.csv", ["OASISID", "AgeatEntry", "GENDER", "EDUC", "APOE", "HAND"], demo_rows)
    write_csv(root / "OASIS3_UDSb4_cdr.csv", ["OASISID", "days_to_visit", "MMSE", "CDRTOT", "CDRSUM", "dx1"], cdr_rows)


def series_truth() -> list[dict[str, object]]:
    """What each OASIS-3 volume was drawn from (see ``corpus.series_truth``)."""
    out: list[dict[str, object]] = []
    for n, (sid, _g, _age, _educ, _apoe, visits3, lesion) in enumerate(OASIS3):
        for v, (_day, _mmse, cdr, _cdrsum, _dx) in enumerate(visits3):
            for seq in ("T1w", "FLAIR"):
                out.append({"source": "oasis3", "subject": sid, "visit": v, "sequence": seq,
                            "atrophy": {0.0: 0.0, 0.5: 0.35, 1.0: 0.75}[cdr], "lesion": _lesion_at(sid, lesion, v),
                            "pose": visit_pose(9000 + 10 * n, v), "subject_anatomy": participant_anatomy(sid)})
    return out
