"""The demo ADNI download: DICOM series in the LONI IDA folder layout, one IDA metadata XML per image, and
ADNIMERGE.csv with volumes measured on the phantoms drawn."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from curation.demo.common import head_size, participant_anatomy, typical_volumes, visit_pose, write_csv
from curation.demo.dicom import FakePerson, write_dicom_series
from curation.demo.phantom import Lesion, ground_truth, head
from curation.records import write_text

ADNI_SUBJECTS = [
    # ptid, rid, sex, birth, dx_bl, (dx, mmse, cdrsb) per visit, lesion
    ("027_S_0074", 74, "M", date(1938, 4, 11), "CN", [("CN", 29, 0.0), ("CN", 29, 0.0)], None),
    ("033_S_0511", 511, "F", date(1941, 9, 2), "LMCI", [("MCI", 26, 1.5), ("Dementia", 22, 4.0)], None),
    ("126_S_0605", 605, "F", date(1932, 1, 23), "AD", [("Dementia", 21, 5.0), ("Dementia", 17, 7.5)],
     Lesion((0.36, 0.52, 0.58), 4.8)),
    # more participants, so the grading and change templates have items enough for their gates, and
    # neither age nor score orders the image's grade: the oldest is a normal woman with atrophic hippocampi
    # (preclinical disease), the impaired man beside her has none (impairment of another cause), and the
    # man with Alzheimer's dementia is among the youngest
    ("098_S_0171", 171, "F", date(1929, 6, 19), "CN", [("CN", 30, 0.0), ("CN", 29, 0.0)], None),
    ("022_S_0130", 130, "M", date(1944, 11, 3), "LMCI", [("MCI", 25, 1.5), ("MCI", 24, 2.0)], None),
    ("011_S_0003", 3, "M", date(1945, 2, 27), "AD", [("Dementia", 20, 6.0), ("Dementia", 16, 9.0)], None),
]
# a participant whose hippocampi do not follow the diagnosis: atrophy per visit (default: ATROPHY of the diagnosis)
# (the review of 7d89747: a mild and a marked grade that only the age band told apart, a normal woman's ventricles
# growing faster than the demented ones'): marked atrophy draws two of the hippocampus's five voxel layers as CSF
# (from 0.7), mildly reduced one (0.4-0.7); the ventricles of the participants who progress grow 13-16% over the
# two years to the follow-up (Month 24: 3.1-3.6 mL, 6-8% a year, as in ADNI's Alzheimer's disease and converting MCI),
# those of the stable ones by under 10%, read as unchanged (the phantom's ventricles grow in steps of its 1.5 mm grid)
OWN_ATROPHY = {"033_S_0511": (0.7, 0.9), "098_S_0171": (0.55, 0.6), "022_S_0130": (0.0, 0.0),
               "011_S_0003": (0.7, 0.95), "126_S_0605": (0.8, 1.0)}
FOLLOW_UP = ("m24", 24, "ADNI1/GO Month 24")  # VISCODE, months from baseline, the IDA visit name
ADNI_NAMES = ["FLANDERS^NED", "BOUVIER^SELMA", "VAN HOUTEN^LUANN", "KRABAPPEL^EDNA", "SZYSLAK^MOE",
              "GUMBLE^BARNEY"]
ATROPHY = {"CN": 0.0, "MCI": 0.35, "Dementia": 0.9}


def visit_atrophy(ptid: str, dx: str, visit: int) -> float:
    """The atrophy drawn at a participant's visit: the participant's own where set, else the diagnosis's."""
    own = OWN_ATROPHY.get(ptid)
    return own[visit] if own else ATROPHY[dx]


# ADNIMERGE column, phantom target, what the typical participant's normal head reads (ADNI's magnitudes, mm3)
ADNI_VOLUMES = [("Hippocampus", "hippocampus", 7400), ("Ventricles", "lateral_ventricles", 22000),
                ("WholeBrain", "brain", 1050000)]


def ida_xml(*, ptid: str, group: str, sex: str, age: float, visit: str, acquired: str, image_uid: str,
            description: str, weighting: str, te: str, tr: str) -> str:
    """A per-image metadata file in the layout of the LONI IDA download."""
    terms = {"Acquisition Type": "3D" if weighting == "T1" else "2D", "Weighting": weighting, "Field Strength": "1.5",
             "Slice Thickness": "1.2", "TE": te, "TR": tr, "Manufacturer": "DemoVendor"}
    protocol = "".join(f'\n            <protocol term="{k}" type="string">{v}</protocol>' for k, v in terms.items())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<idaxs xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <project xmlns="">
    <projectIdentifier>ADNI</projectIdentifier>
    <subject>
      <subjectIdentifier>{ptid}</subjectIdentifier>
      <researchGroup>{group}</researchGroup>
      <subjectSex>{sex}</subjectSex>
      <study>
        <subjectAge>{age}</subjectAge>
        <visit><visitIdentifier>{visit}</visitIdentifier></visit>
        <series>
          <modality>MRI</modality>
          <dateAcquired>{acquired}</dateAcquired>
          <imagingProtocol>
            <imageUID>{image_uid}</imageUID>
            <description>{description}</description>
            <protocolTerm>{protocol}
            </protocolTerm>
          </imagingProtocol>
        </series>
      </study>
    </subject>
  </project>
</idaxs>
"""


def write_adni(root: Path) -> None:
    rows: list[dict[str, object]] = []
    for n, (ptid, rid, sex, birth, dx_bl, visits, lesion) in enumerate(ADNI_SUBJECTS):
        person = FakePerson(ADNI_NAMES[n], birth, sex, f"{4410000 + rid}", "12 Oak Street, Springfield, OR",
                            "541-555-0100")
        base = date(2006, 3, 14) + timedelta(days=37 * n)
        for v, (viscode, months) in enumerate([("bl", 0), FOLLOW_UP[:2]]):
            dx, mmse, cdrsb = visits[v]
            exam = base + timedelta(days=round(months * 30.44))
            age_bl = round((base - birth).days / 365.25, 1)
            anat = participant_anatomy(ptid)
            size = head_size(anat)
            truth: dict[str, float] = ground_truth(  # type: ignore[assignment]
                atrophy=visit_atrophy(ptid, dx, v), subject=anat)["volumes_mm3"]
            rows.append({
                "RID": rid, "PTID": ptid, "VISCODE": viscode, "VISCODE2": viscode,
                "EXAMDATE": exam.isoformat(), "DX_bl": dx_bl, "DX": dx, "AGE": age_bl,
                "PTGENDER": "Male" if sex == "M" else "Female", "PTEDUCAT": 16 - n * 2,
                "PTETHCAT": "Not Hisp/Latino", "PTRACCAT": "White", "APOE4": min(n, 2),
                "MMSE": mmse, "CDRSB": cdrsb, "ADAS11": round(5 + (30 - mmse) * 1.4, 2),
                "ADAS13": round(8 + (30 - mmse) * 1.9, 2), "MOCA": mmse - 3, "FAQ": int(cdrsb * 2),
                # measured on the phantom drawn for this visit (hippocampal bodies, lateral ventricle bodies, brain),
                # scaled to the magnitudes of ADNI's FreeSurfer volumes of the whole structures and corrected for
                # head size (the ratio method: to a reference ICV), so a grade reads atrophy, not a small head; the
                # participant's size is in ICV
                **{col: int(round(truth[key] * normal / typical_volumes()[key] / size))
                   for col, key, normal in ADNI_VOLUMES},
                "ICV": int(round(1550000 * size, -3)), "Month": months,
            })
            atrophy = visit_atrophy(ptid, dx, v)
            pose = visit_pose(7000 + 10 * n, v)
            t1 = head("T1w", atrophy=atrophy, lesion=lesion, seed=1000 + 10 * n + v, pose=pose, subject=anat)
            flair = head("FLAIR", atrophy=atrophy, lesion=lesion, seed=2000 + 10 * n + v, pose=pose, subject=anat)
            stamp = f"{exam.isoformat()}_10_15_30.0"
            for s, (desc, seq, vol) in enumerate([("MPRAGE", "T1w", t1), ("Axial_T2-FLAIR", "FLAIR", flair)]):
                image_id = f"I{100000 + 1000 * n + 10 * v + s}"
                folder = root / "ADNI" / ptid / desc / stamp / image_id
                write_dicom_series(
                    folder, vol, person=person, study_key=f"adni-{ptid}-{viscode}",
                    series_key=f"{image_id}", series_description=desc, sequence=seq, acq=exam,
                    series_number=s + 2,
                )
                write_text(root / f"ADNI_{ptid}_MR_{desc}_S{1000 * n + 10 * v + s}_{image_id}.xml", ida_xml(
                    ptid=ptid, group=dx_bl, sex=sex, age=round((exam - birth).days / 365.25, 1),
                    visit="ADNI Baseline" if v == 0 else FOLLOW_UP[2], acquired=exam.isoformat(),
                    image_uid=image_id[1:], description=desc, weighting="T1" if seq == "T1w" else "T2",
                    te="3.6" if seq == "T1w" else "120.0", tr="2300.0" if seq == "T1w" else "9000.0"))
    write_text(root / "ADNI" / "README.txt", "Downloaded from the LONI Image and Data Archive.\n")
    header = list(rows[0].keys())
    write_csv(root / "ADNIMERGE.csv", header, rows)


def series_truth() -> list[dict[str, object]]:
    """What each ADNI volume was drawn from (see ``corpus.series_truth``)."""
    out: list[dict[str, object]] = []
    for n, (ptid, _rid, _sex, _birth, _dx_bl, visits, lesion) in enumerate(ADNI_SUBJECTS):
        for v, (dx, _mmse, _cdrsb) in enumerate(visits):
            for seq in ("T1w", "FLAIR"):
                out.append({"source": "adni", "subject": ptid, "visit": v, "sequence": seq,
                            "atrophy": visit_atrophy(ptid, dx, v), "lesion": lesion,
                            "pose": visit_pose(7000 + 10 * n, v), "subject_anatomy": participant_anatomy(ptid)})
    return out
