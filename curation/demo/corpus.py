"""Write the demo raw corpus: ADNI, OASIS-1, OASIS-3, Radiopaedia and a PMC case report.

Everything is synthetic and seeded; the PHI in it is fake and exists so de-identification has
something real to remove (names, dates, MRNs, addresses in headers, sidecars and notes).
"""

from __future__ import annotations

import csv
import functools
import io
import json
import zlib
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, MRImageStorage, generate_uid

from curation.demo.phantom import (
    AFFINE,
    IDENTITY,
    SHAPE,
    SPACING,
    Lesion,
    Pathology,
    Pose,
    Subject,
    axial_png_array,
    ground_truth,
    head,
)
from curation.records import write_bytes, write_text

UID_ROOT = "1.2.826.0.1.3680043.10.1447."  # demo-only root; every UID below derives from it


def _uid(*parts: object) -> str:
    return str(generate_uid(prefix=UID_ROOT, entropy_srcs=[str(p) for p in parts]))


def _csv(path: Path, header: list[str], rows: list[dict[str, object]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_text(path, buf.getvalue())


def _affine() -> np.ndarray:
    """The demo grid: MNI-aligned, 1.5 mm (an unmoved head's world coordinates are MNI coordinates)."""
    return AFFINE.copy()


def visit_pose(seed: int, visit: int) -> Pose:
    """How the head lies at a visit: as the template at baseline, turned and shifted (seeded) at later visits."""
    return IDENTITY if visit == 0 else Pose.seeded(seed + visit)


# the demo's typical participant: the middle of Subject.seeded's shape range, at the template's size
TYPICAL = Subject(shape=0.8)


@functools.lru_cache(maxsize=1)
def typical_volumes() -> dict[str, float]:
    """Target volumes (mm3) of the typical participant's brain without atrophy: what a normal demo head reads."""
    return ground_truth(subject=TYPICAL)["volumes_mm3"]  # type: ignore[return-value]


@functools.lru_cache(maxsize=16)
def head_size(subject: Subject) -> float:
    """A participant's brain volume over the typical participant's (no atrophy): how a head-size correction scales
    volumes."""
    own: dict[str, float] = ground_truth(subject=subject)["volumes_mm3"]  # type: ignore[assignment]
    return own["brain"] / typical_volumes()["brain"]


def participant_anatomy(subject_id: str) -> Subject:
    """A participant's own brain (shape and size, seeded by the participant's id: the same at every visit)."""
    return Subject.seeded(zlib.crc32(subject_id.encode()))


# ----------------------------------------------------------------------------- DICOM
@dataclass(frozen=True)
class FakePerson:
    name: str  # DICOM PN form FAMILY^GIVEN
    birth: date
    sex: str
    mrn: str
    address: str
    phone: str


def write_dicom_series(
    out_dir: Path,
    vol: np.ndarray,
    *,
    person: FakePerson,
    study_key: str,
    series_key: str,
    series_description: str,
    sequence: str,
    acq: date,
    series_number: int,
) -> None:
    """One classic single-frame MR file per axial slice, with LPS geometry and fake PHI."""
    nx, ny, nz = vol.shape
    dx, dy, dz = SPACING
    aff = _affine()
    study_uid = _uid(study_key)
    series_uid = _uid(study_key, series_key)
    frame_uid = _uid(study_key, "frame")
    tr, te, ti = {"T1w": (2300.0, 2.98, 900.0), "FLAIR": (9000.0, 91.0, 2500.0)}.get(sequence, (3000.0, 80.0, 0.0))
    for k in range(nz):
        pixel = vol[::-1, ::-1, k].T  # rows: LPS +y (posterior), cols: LPS +x (left)
        ras_first = aff @ np.array([nx - 1, ny - 1, k, 1.0])
        ipp = [-ras_first[0], -ras_first[1], ras_first[2]]
        sop_uid = _uid(study_key, series_key, k)
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = MRImageStorage
        meta.MediaStorageSOPInstanceUID = sop_uid
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = Dataset()
        ds.file_meta = meta
        ds.SOPClassUID = MRImageStorage
        ds.SOPInstanceUID = sop_uid
        ds.StudyInstanceUID = study_uid
        ds.SeriesInstanceUID = series_uid
        ds.FrameOfReferenceUID = frame_uid
        ds.Modality = "MR"
        ds.PatientName = person.name
        ds.PatientID = person.mrn
        ds.PatientBirthDate = person.birth.strftime("%Y%m%d")
        ds.PatientSex = person.sex
        ds.PatientAge = f"{(acq - person.birth).days // 365:03d}Y"
        ds.PatientAddress = person.address
        ds.PatientTelephoneNumbers = person.phone
        ds.PatientWeight = 71.5
        ds.PatientSize = 1.68
        ds.OtherPatientIDs = f"MRN-{person.mrn}"
        ds.StudyDate = ds.SeriesDate = ds.AcquisitionDate = ds.ContentDate = acq.strftime("%Y%m%d")
        ds.StudyTime = ds.SeriesTime = ds.AcquisitionTime = ds.ContentTime = "101530"
        ds.AccessionNumber = "ACC" + sop_uid[-7:].replace(".", "0")
        ds.StudyID = "S" + study_uid[-5:].replace(".", "0")
        ds.InstitutionName = "Springfield Memory Clinic"
        ds.InstitutionAddress = "742 Evergreen Terrace, Springfield, OR 97403"
        ds.ReferringPhysicianName = "HIBBERT^JULIUS"
        ds.PerformingPhysicianName = "RIVIERA^NICK"
        ds.OperatorsName = "SMITHERS^WAYLON"
        ds.StationName = "SPFLDMR01"
        ds.Manufacturer = "SIEMENS"
        ds.ManufacturerModelName = "TrioTim"
        ds.DeviceSerialNumber = "35021"
        ds.SoftwareVersions = "syngo MR B17"
        ds.StudyDescription = f"MEMORY CLINIC^{person.name.split('^')[0]} BRAIN"
        ds.SeriesDescription = series_description
        ds.ImageComments = f"Scanned for {person.name.replace('^', ' ').title()}, MRN {person.mrn}"
        ds.MagneticFieldStrength = 3.0
        ds.RepetitionTime = tr
        ds.EchoTime = te
        if ti:
            ds.InversionTime = ti
        ds.ScanningSequence = "GR\\IR" if sequence == "T1w" else "SE\\IR"
        ds.SeriesNumber = series_number
        ds.InstanceNumber = k + 1
        ds.SliceThickness = dz
        ds.SpacingBetweenSlices = dz
        ds.PixelSpacing = [dy, dx]
        ds.ImagePositionPatient = [round(float(v), 4) for v in ipp]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.SliceLocation = round(float(ipp[2]), 4)
        ds.SamplesPerPixel = 1
        ds.PhotometricInterpretation = "MONOCHROME2"
        ds.Rows, ds.Columns = pixel.shape
        ds.BitsAllocated = 16
        ds.BitsStored = 12
        ds.HighBit = 11
        ds.PixelRepresentation = 0
        ds.BurnedInAnnotation = "NO"
        req = Dataset()
        req.RequestedProcedureID = f"RP{person.mrn}"
        req.ScheduledProcedureStepID = f"SPS-{person.mrn}"
        req.RequestingPhysician = "HIBBERT^JULIUS"
        ref = Dataset()
        ref.ReferencedSOPClassUID = MRImageStorage
        ref.ReferencedSOPInstanceUID = _uid(study_key, series_key, max(k - 1, 0))
        req.ReferencedStudySequence = Sequence([ref])
        ds.RequestAttributesSequence = Sequence([req])
        ds.private_block(0x0029, "SPFLD PRIVATE", create=True).add_new(0x10, "LO", f"{person.name} {person.mrn}")
        ds.PixelData = np.ascontiguousarray(pixel).astype("<u2").tobytes()
        buf = io.BytesIO()
        ds.save_as(buf, enforce_file_format=True)
        write_bytes(out_dir / f"{series_key}_{k + 1:03d}.dcm", buf.getvalue())


# ----------------------------------------------------------------------------- ADNI
ADNI_SUBJECTS = [
    # ptid, rid, sex, birth, dx_bl, (dx, mmse, cdrsb) per visit, lesion
    ("027_S_0074", 74, "M", date(1938, 4, 11), "CN", [("CN", 29, 0.0), ("CN", 29, 0.0)], None),
    ("033_S_0511", 511, "F", date(1941, 9, 2), "LMCI", [("MCI", 26, 1.5), ("Dementia", 22, 4.0)], None),
    ("126_S_0605", 605, "F", date(1932, 1, 23), "AD", [("Dementia", 21, 5.0), ("Dementia", 17, 7.5)],
     Lesion((0.36, 0.52, 0.58), 4.8)),
]
ADNI_NAMES = ["FLANDERS^NED", "BOUVIER^SELMA", "VAN HOUTEN^LUANN"]
ATROPHY = {"CN": 0.0, "MCI": 0.35, "Dementia": 0.9}
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
        person = FakePerson(ADNI_NAMES[n], birth, sex, f"{4410000 + rid}", "12 Oak Street, Springfield, OR", "541-555-0100")
        base = date(2006, 3, 14) + timedelta(days=37 * n)
        for v, (viscode, months) in enumerate([("bl", 0), ("m12", 12)]):
            dx, mmse, cdrsb = visits[v]
            exam = base + timedelta(days=round(months * 30.44))
            age_bl = round((base - birth).days / 365.25, 1)
            anat = participant_anatomy(ptid)
            size = head_size(anat)
            truth: dict[str, float] = ground_truth(  # type: ignore[assignment]
                atrophy=ATROPHY[dx], subject=anat)["volumes_mm3"]
            rows.append({
                "RID": rid, "PTID": ptid, "VISCODE": viscode, "VISCODE2": "bl" if v == 0 else "m12",
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
            atrophy = ATROPHY[dx]
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
                    visit="ADNI Baseline" if v == 0 else "ADNI1/GO Month 12", acquired=exam.isoformat(),
                    image_uid=image_id[1:], description=desc, weighting="T1" if seq == "T1w" else "T2",
                    te="3.6" if seq == "T1w" else "120.0", tr="2300.0" if seq == "T1w" else "9000.0"))
    write_text(root / "ADNI" / "README.txt", "Downloaded from the LONI Image and Data Archive.\n")
    header = list(rows[0].keys())
    _csv(root / "ADNIMERGE.csv", header, rows)


# ----------------------------------------------------------------------------- OASIS-1
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
        img = nib.AnalyzeImage(vol, _affine())
        img.header["descrip"] = f"{sid} Mary Major DOB 1931-02-03".encode()[:79]
        img.header["db_name"] = b"SPFLD-MRN 5512"
        raw = root / sid / "RAW"
        raw.mkdir(parents=True, exist_ok=True)
        nib.save(img, str(raw / f"{sid}_mpr-1_anon.hdr"))
        rows.append({
            "ID": sid, "M/F": sex, "Hand": hand, "Age": age, "Educ": educ, "SES": ses, "MMSE": mmse,
            "CDR": cdr, "eTIV": etiv, "nWBV": nwbv, "ASF": asf, "Delay": 14 if sid.endswith("MR2") else "N/A",
        })
    _csv(root / "oasis_cross-sectional.csv",
         ["ID", "M/F", "Hand", "Age", "Educ", "SES", "MMSE", "CDR", "eTIV", "nWBV", "ASF", "Delay"], rows)


# ----------------------------------------------------------------------------- OASIS-3
OASIS3 = [
    # id, gender(1=M,2=F), age, educ, apoe, [(day, mmse, cdr, cdrsum, dx)], lesion
    ("OAS30001", 2, 65.2, 12, 33, [(0, 30, 0.0, 0.0, "Cognitively normal"), (1123, 29, 0.0, 0.0, "Cognitively normal")], None),
    ("OAS30027", 1, 71.9, 16, 34, [(0, 27, 0.5, 1.0, "uncertain dementia"), (1502, 23, 1.0, 5.0, "AD Dementia")],
     Lesion((0.4, 0.6, 0.62), 4.0)),
]


def write_oasis3(root: Path) -> None:
    demo_rows, cdr_rows = [], []
    for n, (sid, gender, age, educ, apoe, visits, lesion) in enumerate(OASIS3):
        demo_rows.append({"OASISID": sid, "AgeatEntry": age, "GENDER": gender, "EDUC": educ, "APOE": apoe, "HAND": "R"})
        for v, (day, mmse, cdr, cdrsum, dx) in enumerate(visits):
            cdr_rows.append({"OASISID": sid, "days_to_visit": day, "MMSE": mmse, "CDRTOT": cdr, "CDRSUM": cdrsum, "dx1": dx})
            atrophy = {0.0: 0.0, 0.5: 0.35, 1.0: 0.75}[cdr]
            session = f"{sid}_MR_d{day:04d}"
            for a, seq in enumerate(["T1w", "FLAIR"]):
                vol = head(seq, atrophy=atrophy, lesion=lesion, seed=4000 + 100 * n + 10 * v + a,
                           pose=visit_pose(9000 + 10 * n, v), subject=participant_anatomy(sid)).astype(np.int16)
                anat = root / session / f"anat{a + 1}"
                anat.mkdir(parents=True, exist_ok=True)
                stem = f"sub-{sid}_ses-d{day:04d}_{seq}"
                img = nib.Nifti1Image(vol, _affine())
                img.header["descrip"] = b"Springfield MR Center"
                nib.save(img, str(anat / f"{stem}.nii.gz"))
                sidecar = {
                    "Modality": "MR", "MagneticFieldStrength": 3, "Manufacturer": "Siemens",
                    "ManufacturerModelName": "TrioTim", "InstitutionName": "Springfield MR Center",
                    "InstitutionAddress": "1 Medical Plaza, Springfield", "AcquisitionDateTime": f"2011-0{v + 4}-1{n}T09:41:00",
                    "RepetitionTime": 2.4 if seq == "T1w" else 9.0, "EchoTime": 0.003 if seq == "T1w" else 0.09,
                    "SeriesDescription": f"{seq} {sid}",
                }
                write_text(anat / f"{stem}.json", json.dumps(sidecar, indent=2) + "\n")
    _csv(root / "OASIS3_demographics.csv", ["OASISID", "AgeatEntry", "GENDER", "EDUC", "APOE", "HAND"], demo_rows)
    _csv(root / "OASIS3_UDSb4_cdr.csv", ["OASISID", "days_to_visit", "MMSE", "CDRTOT", "CDRSUM", "dx1"], cdr_rows)


# ----------------------------------------------------------------------------- Radiopaedia
# Radiopaedia-style cases: each figure is drawn to show what its findings say (the lesions, their number and side,
# oedema, a necrotic core, mass effect), at the MNI coordinates of the structure named.
RADIOPAEDIA = [
    {
        "slug": "multiple-sclerosis-demo-1", "title": "Multiple sclerosis", "diagnosis": "Multiple sclerosis",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis probable", "age": "29 years",
        "gender": "Female", "author": "Demo Author A",
        "presentation": "Ms. Clara Oswald, a 29-year-old teacher (MRN 8830215, phone 503-555-0199), presented on 14 March 2019 with tingling in both legs for two weeks.",
        "findings": "Multiple ovoid T2/FLAIR hyperintense lesions in the left periventricular white matter, oriented perpendicular to the lateral ventricles (Dawson fingers). No haemorrhage.",
        "discussion": "Periventricular ovoid lesions in a young woman with optic neuritis favour multiple sclerosis over small vessel disease or ADEM.",
        "differential": ["Acute disseminated encephalomyelitis", "Small vessel ischaemic disease", "Neuromyelitis optica spectrum disorder"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-22, -6, 24, 4.5, (1.8, 1.0, 1.0)), "atrophy": 0.0,
        "pathology": Pathology(more=(Lesion.at_mm(-24, -22, 26, 4.0, (1.8, 1.0, 1.0)),
                                     Lesion.at_mm(-25, 10, 23, 3.5, (1.8, 1.0, 1.0)),
                                     Lesion.at_mm(-21, -36, 24, 3.0, (1.8, 1.0, 1.0)))),
    },
    {
        "slug": "glioblastoma-demo-2", "title": "Glioblastoma", "diagnosis": "Glioblastoma",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "63 years",
        "gender": "Male", "author": "Demo Author B",
        "presentation": "Mr. Rory Williams (DOB 04/11/1957, 42 Wallaby Way, Portland) was brought in by his wife Amy on 02/06/2020 with three weeks of headache and new left arm weakness.",
        "findings": "Large heterogeneous mass in the right frontal lobe with a necrotic centre, surrounding FLAIR hyperintense vasogenic oedema and mass effect on the right lateral ventricle.",
        "discussion": "Histology confirmed IDH-wildtype glioblastoma. Differential included metastasis and lymphoma.",
        "differential": ["Cerebral metastasis", "Primary CNS lymphoma", "Cerebral abscess"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(30, 22, 26, 14.0), "atrophy": 0.1,
        "pathology": Pathology(oedema_mm=10.0, necrotic=True, mass_effect_mm=7.0),
    },
    {
        "slug": "acute-ischaemic-stroke-demo-3", "title": "Acute ischaemic stroke", "diagnosis": "Acute ischaemic stroke",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "77 years",
        "gender": "Male", "author": "Demo Author C",
        "presentation": "Mr. Harold Finch (MRN 5512093, 14 Elm Court, Salem), a 77-year-old retired engineer, was found by his daughter Grace at 7 am on 3 May 2021 with weakness of the left arm and face.",
        "findings": "Restricted diffusion on DWI in the right parietal lobe, in the right middle cerebral artery territory. No haemorrhage.",
        "discussion": "Cortical and subcortical restricted diffusion in one arterial territory in a patient with atrial fibrillation is a cardioembolic infarct.",
        "differential": ["Focal seizure", "Migraine with aura", "Intracerebral haemorrhage"],
        "sequence": "DWI", "lesion": Lesion.at_mm(40, -44, 32, 9.0), "atrophy": 0.3,
    },
    {
        "slug": "cerebral-metastases-demo-4", "title": "Cerebral metastases", "diagnosis": "Cerebral metastases",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis probable", "age": "61 years",
        "gender": "Female", "author": "Demo Author D",
        "presentation": "Mrs. Joan Watson (DOB 22/09/1960, phone 971-555-0142), a retired nurse, reported two weeks of morning headache and unsteadiness on 9 October 2021.",
        "findings": "Multiple round masses at the grey-white junction of both cerebral hemispheres, each with surrounding vasogenic oedema.",
        "discussion": "Several round lesions at the grey-white junction with oedema out of proportion to their size, in a patient with lung cancer, are metastases.",
        "differential": ["Cerebral abscess", "Glioblastoma", "Tuberculoma"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-36, -52, 32, 7.5), "atrophy": 0.1,
        "pathology": Pathology(more=(Lesion.at_mm(30, 34, 30, 5.5), Lesion.at_mm(20, -70, 28, 4.5)),
                               oedema_mm=9.0),
    },
    {
        "slug": "intracerebral-haemorrhage-demo-5", "title": "Hypertensive intracerebral haemorrhage",
        "diagnosis": "Hypertensive intracerebral haemorrhage", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "69 years", "gender": "Male", "author": "Demo Author E",
        "presentation": "Mr. Walter White (MRN 3308814, 308 Negra Arroyo Lane), a 69-year-old chemistry teacher, developed sudden right-sided weakness and slurred speech on 12 January 2022.",
        "findings": "Acute haematoma in the left basal ganglia, markedly hypointense on SWI, with a thin rim of oedema.",
        "discussion": "A deep haematoma in the putamen of a hypertensive patient is a hypertensive haemorrhage.",
        "differential": ["Haemorrhagic transformation of an infarct", "Cavernous malformation", "Haemorrhagic metastasis"],
        "sequence": "SWI", "lesion": Lesion.at_mm(-25, 2, 4, 10.0), "atrophy": 0.2,
        "pathology": Pathology(oedema_mm=3.0),
    },
    {
        "slug": "primary-cns-lymphoma-demo-6", "title": "Primary CNS lymphoma", "diagnosis": "Primary CNS lymphoma",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "66 years",
        "gender": "Male", "author": "Demo Author F",
        "presentation": "Mr. Daniel Jackson (phone 312-555-0187, MRN 7720451), a 66-year-old retired librarian, was brought by his son on 2 February 2022 with six weeks of confusion, apathy and numbness of the left arm.",
        "findings": "Homogeneous mass in the right periventricular white matter abutting the lateral ventricle, with mild surrounding vasogenic oedema and no necrosis.",
        "discussion": "A solid, homogeneous periventricular mass without necrosis in an older adult suggests lymphoma; stereotactic biopsy confirmed diffuse large B-cell lymphoma.",
        "differential": ["Glioblastoma", "Tumefactive demyelination", "Cerebral metastasis"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(20, -8, 22, 9.0), "atrophy": 0.15,
        "pathology": Pathology(oedema_mm=5.0),
    },
    {
        "slug": "cerebral-abscess-demo-7", "title": "Cerebral abscess", "diagnosis": "Cerebral abscess",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "47 years",
        "gender": "Female", "author": "Demo Author G",
        "presentation": "Mrs. Donna Noble (DOB 18/07/1975, 10 Chiswick Road), a right-handed accountant, had ten days of headache and word-finding difficulty when seen on 6 June 2022.",
        "findings": "Restricted diffusion on DWI in the core of a round lesion in the left temporal lobe, with surrounding vasogenic oedema.",
        "discussion": "Restricted diffusion in the core of a ring lesion distinguishes an abscess from a necrotic tumour; aspiration grew streptococci.",
        "differential": ["Glioblastoma", "Cerebral metastasis", "Tumefactive demyelination"],
        "sequence": "DWI", "lesion": Lesion.at_mm(-44, -18, 2, 10.0), "atrophy": 0.1,
        "pathology": Pathology(oedema_mm=9.0, mass_effect_mm=3.0),
    },
    {
        "slug": "cavernous-malformation-demo-8", "title": "Cavernous malformation",
        "diagnosis": "Cavernous malformation", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis probable", "age": "38 years", "gender": "Female",
        "author": "Demo Author H",
        "presentation": "Mrs. Martha Jones (MRN 6619037), a 38-year-old teacher, had a first focal seizure with flashing lights in the left half of her vision on 21 August 2022.",
        "findings": "Small focus of marked susceptibility (blooming) on SWI in the right occipital lobe, with no oedema.",
        "discussion": "A small blooming focus without oedema, in a patient with a family history, is a cavernous malformation.",
        "differential": ["Haemorrhagic metastasis", "Cerebral amyloid angiopathy", "Capillary telangiectasia"],
        "sequence": "SWI", "lesion": Lesion.at_mm(22, -82, 12, 3.5), "atrophy": 0.0,
    },
    {
        "slug": "low-grade-glioma-demo-9", "title": "Low-grade glioma", "diagnosis": "Low-grade glioma",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "34 years",
        "gender": "Male", "author": "Demo Author I",
        "presentation": "Mr. Rupert Giles (MRN 4471920, 7 Sunnydale Road), a 34-year-old librarian, had a first generalised seizure at work on 11 November 2022.",
        "findings": "Homogeneous FLAIR hyperintense mass in the right temporal lobe, without oedema, necrosis or mass effect.",
        "discussion": "A homogeneous, non-enhancing, FLAIR-bright mass without oedema in a young adult with seizures is a diffuse low-grade glioma; biopsy showed an IDH-mutant astrocytoma.",
        "differential": ["Glioblastoma", "Cerebral abscess", "Tumefactive demyelination"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(42, -12, -6, 11.0), "atrophy": 0.0,
    },
    # small lesions (under 1% of the brain in the slice), as a report names them: a lacune, small plaques, a cavernoma
    {
        "slug": "lacunar-infarct-demo-10", "title": "Lacunar infarct", "diagnosis": "Lacunar infarct",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "72 years",
        "gender": "Male", "author": "Demo Author J",
        "presentation": "Mr. Arthur Dent (MRN 4420917, 155 Country Lane, Cottington), a 72-year-old retired radio producer, was seen on 8 March 2023 with two days of numbness of the right face, arm and leg.",
        "findings": "Small lacunar infarct with restricted diffusion on DWI in the left thalamus. The infarct lies in the posterior cerebral artery territory. No haemorrhage.",
        "discussion": "A small deep infarct in the thalamus with a pure sensory syndrome in a hypertensive smoker is a lacunar stroke from small vessel disease.",
        "differential": ["Multiple sclerosis", "Focal seizure", "Intracerebral haemorrhage"],
        "sequence": "DWI", "lesion": Lesion.at_mm(-12, -18, 6, 3.5), "atrophy": 0.25,
    },
    {
        "slug": "small-vessel-disease-demo-11", "title": "Small vessel ischaemic disease",
        "diagnosis": "Small vessel ischaemic disease", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis probable", "age": "74 years", "gender": "Female", "author": "Demo Author K",
        "presentation": "Mrs. Sarah Jane Smith (MRN 5521876, 13 Bannerman Road), a 74-year-old retired journalist with hypertension, reported a year of slowly worsening forgetfulness and an unsteady gait on 12 June 2023.",
        "findings": "Multiple small T2/FLAIR hyperintense lesions in the bilateral deep white matter. No haemorrhage.",
        "discussion": "Small round deep white matter lesions in both hemispheres of an older hypertensive patient, not touching the ventricles, are small vessel disease rather than demyelination.",
        "differential": ["Multiple sclerosis", "CNS vasculitis", "Migraine-related white matter lesions"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-33, -6, 30, 2.5), "atrophy": 0.3,
        "pathology": Pathology(more=(Lesion.at_mm(33, -4, 30, 2.5), Lesion.at_mm(-31, 16, 29, 2.0),
                                     Lesion.at_mm(32, 18, 29, 2.5), Lesion.at_mm(-31, -28, 31, 2.0),
                                     Lesion.at_mm(32, -30, 31, 2.0))),
    },
    {
        "slug": "cerebral-amyloid-angiopathy-demo-12", "title": "Cerebral amyloid angiopathy",
        "diagnosis": "Cerebral amyloid angiopathy", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis probable", "age": "78 years", "gender": "Male", "author": "Demo Author L",
        "presentation": "Mr. Brian Williams (DOB 03/02/1945, phone 207-555-0176), a 78-year-old retired farmer, was seen on 20 July 2023 with two years of gradually worsening memory.",
        "findings": "Multiple small lobar microbleeds on SWI in the right parietal lobe, with no larger haemorrhage.",
        "discussion": "Strictly lobar microbleeds in an older patient, sparing the deep grey nuclei, fit cerebral amyloid angiopathy rather than hypertensive microangiopathy.",
        "differential": ["Hypertensive microangiopathy", "Familial cavernous malformations", "Diffuse axonal injury"],
        "sequence": "SWI", "lesion": Lesion.at_mm(38, -54, 38, 2.0), "atrophy": 0.3,
        "pathology": Pathology(more=(Lesion.at_mm(46, -40, 36, 1.8), Lesion.at_mm(30, -66, 37, 1.8),
                                     Lesion.at_mm(50, -28, 35, 1.5))),
    },
]


def write_radiopaedia(root: Path) -> None:
    for n, case in enumerate(RADIOPAEDIA):
        folder = root / case["slug"]
        vol = head(case["sequence"], atrophy=case["atrophy"], lesion=case["lesion"], seed=5000 + n,
                   pathology=case.get("pathology"))
        z_lesion = int(round(case["lesion"].center[2] * (SHAPE[2] - 1)))
        images = []
        for i, z in enumerate([z_lesion - 4, z_lesion, z_lesion + 4]):
            rel = f"images/{i + 1:03d}.png"
            buf = io.BytesIO()
            Image.fromarray(axial_png_array(vol, z)).save(buf, format="PNG")
            write_bytes(folder / rel, buf.getvalue())
            images.append(rel)
        doc = {
            "id": 90000 + n, "url": f"https://radiopaedia.org/cases/{case['slug']}", "title": case["title"],
            "system": case["system"], "diagnostic_certainty": case["diagnostic_certainty"],
            "presentation": case["presentation"], "age": case["age"], "gender": case["gender"],
            "author": case["author"], "body": case["findings"], "discussion": case["discussion"],
            "differential": case["differential"], "license": "CC BY-NC-SA 3.0",
            "studies": [{
                "modality": "MRI", "plane": "axial", "findings": case["findings"],
                "caption": f"Axial {case['sequence']} MRI", "series": [{"name": case["sequence"], "images": images}],
            }],
        }
        write_text(folder / "case.json", json.dumps(doc, indent=2) + "\n")


# ----------------------------------------------------------------------------- PMC case report
JATS = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2 20190208//EN" "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" xmlns:mml="http://www.w3.org/1998/Math/MathML" article-type="{article_type}" dtd-version="1.2">
<front>
<journal-meta><journal-id journal-id-type="nlm-ta">Demo Neurol Case Rep</journal-id><journal-title-group><journal-title>Demo Neurology Case Reports</journal-title></journal-title-group><issn pub-type="epub">0000-0000</issn></journal-meta>
<article-meta>
<article-id pub-id-type="pmcid">{pmcid}</article-id><article-id pub-id-type="doi">10.0000/dncr.{doi}</article-id>
<title-group><article-title>{title}</article-title></title-group>
<contrib-group><contrib contrib-type="author"><name><surname>Okafor</surname><given-names>Adaeze</given-names></name></contrib><contrib contrib-type="author"><name><surname>Lindqvist</surname><given-names>Maja</given-names></name></contrib></contrib-group>
<pub-date pub-type="epub"><year>2021</year></pub-date>
<permissions><license license-type="open-access" xlink:href="https://creativecommons.org/licenses/by/4.0/"><license-p>This is an open-access article distributed under the terms of the Creative Commons Attribution 4.0 License.</license-p></license></permissions>
</article-meta>
</front>
<body>
<sec><title>Introduction</title><p>{intro}</p></sec>
<sec><title>{case_title}</title>
<p>{case_text}</p>
<fig id="F1" position="float"><label>Figure 1.</label><caption><p>{caption}</p></caption><graphic xlink:href="{graphic}"/></fig>
</sec>
<sec><title>Discussion</title><p>{discussion}</p></sec>
</body>
</article>
"""


def write_case_reports(root: Path) -> None:
    operculum = Lesion.at_mm(-50, 14, 12, 8.0)  # the left frontal operculum (pars opercularis), the report says
    vol = head("DWI", atrophy=0.2, lesion=operculum, seed=6001)
    z = int(round(operculum.center[2] * (SHAPE[2] - 1)))
    buf = io.BytesIO()
    Image.fromarray(axial_png_array(vol, z)).convert("RGB").save(buf, format="JPEG", quality=92)
    write_bytes(root / "dncr-8-e1-g001.jpg", buf.getvalue())
    write_text(root / "PMC9000001.nxml", JATS.format(
        article_type="case-report", pmcid="PMC9000001", doi="2021.0001",
        title="Acute left middle cerebral artery infarct presenting as isolated aphasia",
        intro="Isolated aphasia is an uncommon presentation of acute ischaemic stroke.",
        case_title="Case Report",
        case_text=("A 71-year-old right-handed man, Mr. Walter Bishop of 17 Harvard Lane, Boston (MRN 22-781-443), "
                   "was seen on January 5, 2021 with sudden word-finding difficulty that began 3 hours before arrival. "
                   "Examination showed expressive aphasia without limb weakness. "
                   "MRI showed restricted diffusion on DWI in the left frontal operculum in the left middle cerebral artery territory, "
                   "with no haemorrhage on SWI. He was treated with thrombectomy and his speech improved at 3-month follow-up. "
                   "Final diagnosis: acute ischaemic stroke due to cardioembolism."),
        caption="Axial diffusion-weighted MRI showing restricted diffusion in the left middle cerebral artery territory (arrow).",
        graphic="dncr-8-e1-g001",
        discussion=("Cardioembolic stroke after anticoagulation is stopped is a recognised cause of cortical infarcts. "
                    "The differential diagnosis includes focal seizure with postictal aphasia and migraine with aura."),
    ))
    # a research article in the same download: skipped by design, counted
    write_text(root / "PMC9000002.nxml", JATS.format(
        article_type="research-article", pmcid="PMC9000002", doi="2021.0002",
        title="Outcomes of thrombectomy in a regional stroke network", intro="We studied outcomes.",
        case_title="Methods", case_text="Retrospective cohort of 412 patients.",
        caption="Flow chart of included patients.", graphic="dncr-8-e2-g001",
        discussion="Thrombectomy outcomes were comparable to trial data.",
    ))


WRITERS = {
    "adni": write_adni,
    "oasis1": write_oasis1,
    "oasis3": write_oasis3,
    "radiopaedia": write_radiopaedia,
    "case-reports": write_case_reports,
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
    out: list[dict[str, object]] = []
    for n, (ptid, _rid, _sex, _birth, _dx_bl, visits, lesion) in enumerate(ADNI_SUBJECTS):
        for v, (dx, _mmse, _cdrsb) in enumerate(visits):
            for seq in ("T1w", "FLAIR"):
                out.append({"source": "adni", "subject": ptid, "visit": v, "sequence": seq,
                            "atrophy": ATROPHY[dx], "lesion": lesion, "pose": visit_pose(7000 + 10 * n, v),
                            "subject_anatomy": participant_anatomy(ptid)})
    for n, row in enumerate(OASIS1):
        sid, nwbv, lesion = row[0], row[9], row[11]
        rescan = sid.endswith("MR2")
        out.append({"source": "oasis1", "subject": sid.rsplit("_", 1)[0], "visit": 1 if rescan else 0,
                    "sequence": "T1w", "atrophy": oasis1_atrophy(float(nwbv)), "lesion": lesion,
                    "pose": visit_pose(8000 + 10 * n, 1 if rescan else 0),
                    "subject_anatomy": participant_anatomy(sid.rsplit("_", 1)[0])})
    for n, (sid, _g, _age, _educ, _apoe, visits3, lesion) in enumerate(OASIS3):
        for v, (_day, _mmse, cdr, _cdrsum, _dx) in enumerate(visits3):
            for seq in ("T1w", "FLAIR"):
                out.append({"source": "oasis3", "subject": sid, "visit": v, "sequence": seq,
                            "atrophy": {0.0: 0.0, 0.5: 0.35, 1.0: 0.75}[cdr], "lesion": lesion,
                            "pose": visit_pose(9000 + 10 * n, v), "subject_anatomy": participant_anatomy(sid)})
    return out
