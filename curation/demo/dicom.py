"""The demo's DICOM: one classic single-frame MR file per axial slice, with LPS geometry and fake PHI that
de-identification has to remove."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import ExplicitVRLittleEndian, MRImageStorage

from curation.demo.common import demo_affine, demo_uid
from curation.demo.phantom import SPACING
from curation.records import write_bytes


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
    aff = demo_affine()
    study_uid = demo_uid(study_key)
    series_uid = demo_uid(study_key, series_key)
    frame_uid = demo_uid(study_key, "frame")
    tr, te, ti = {"T1w": (2300.0, 2.98, 900.0), "FLAIR": (9000.0, 91.0, 2500.0)}.get(sequence, (3000.0, 80.0, 0.0))
    for k in range(nz):
        pixel = vol[::-1, ::-1, k].T  # rows: LPS +y (posterior), cols: LPS +x (left)
        ras_first = aff @ np.array([nx - 1, ny - 1, k, 1.0])
        ipp = [-ras_first[0], -ras_first[1], ras_first[2]]
        sop_uid = demo_uid(study_key, series_key, k)
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
        _fake_phi(ds, person, acq, study_uid, sop_uid, series_description)
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
        ds.RequestAttributesSequence = Sequence([_request(person, study_key, series_key, k)])
        ds.private_block(0x0029, "SPFLD PRIVATE", create=True).add_new(0x10, "LO", f"{person.name} {person.mrn}")
        ds.PixelData = np.ascontiguousarray(pixel).astype("<u2").tobytes()
        buf = io.BytesIO()
        ds.save_as(buf, enforce_file_format=True)
        write_bytes(out_dir / f"{series_key}_{k + 1:03d}.dcm", buf.getvalue())


def _fake_phi(ds: Dataset, person: FakePerson, acq: date, study_uid: str, sop_uid: str,
              series_description: str) -> None:
    """The patient, study, institution, staff and device attributes: the fake PHI de-identification must remove or
    replace."""
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


def _request(person: FakePerson, study_key: str, series_key: str, k: int) -> Dataset:
    """The request attributes, a nested sequence that carries PHI too (the requesting physician, ids from the MRN)."""
    req = Dataset()
    req.RequestedProcedureID = f"RP{person.mrn}"
    req.ScheduledProcedureStepID = f"SPS-{person.mrn}"
    req.RequestingPhysician = "HIBBERT^JULIUS"
    ref = Dataset()
    ref.ReferencedSOPClassUID = MRImageStorage
    ref.ReferencedSOPInstanceUID = demo_uid(study_key, series_key, max(k - 1, 0))
    req.ReferencedStudySequence = Sequence([ref])
    return req
