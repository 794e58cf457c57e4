"""Anatomy on real heads that no one on the project made: the fit (ANTs, registration.yaml) places the hippocampus
and ventricle renders within 5 mm of an independent registration's landmarks (../shared/fixtures/heads/
reference_landmarks.json), on brain-extracted, whole-head, PD, T2, FLAIR, thick-slice, far-origin and tilted heads;
a brain without its head passes defacing unchanged while every whole head is defaced; the stroke patient's infarct
is found on T2 and no lesion is invented in the healthy heads. Skipped when ../shared is absent."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import yaml

from curation.imaging.targets import PLANE_NORMAL
from curation.params import NormalizeParams

ROOT = Path(__file__).resolve().parents[1]
HEADS = ROOT.parent / "shared" / "fixtures" / "heads"
pytestmark = [pytest.mark.integration,  # ANTs registration of real heads in a process pool
              pytest.mark.skipif(not (HEADS / "reference_landmarks.json").is_file(),
                                 reason="../shared/fixtures/heads absent")]
SEQUENCE = {"stroke_T1": "T1w", "stroke_T2": "T2w", "stroke_FLAIR": "FLAIR", "seg3d_mr": "T1w", "chris_PD": "PD",
            "register_t2w": "T2w"}
TOLERANCE_MM = 5.0
# a long-field-of-view 3D T1 as sagittal ADNI MPRAGEs are: the stroke patient's T1 resampled to 1.6 mm isotropic
ISOTROPIC = ("stroke_T1", 1.6)
# a head moved as a patient can lie in a scanner: tilted 18 degrees (nodding) and 12 (turned), 150 mm off origin
TILT = ("stroke_T1", 18.0, 12.0, (150.0, -60.0, 90.0))
# the same patient's FLAIR as a later acquisition of the visit finds the head: it has moved since the T1w
MOVED_FLAIR = ("stroke_FLAIR", -9.0, 7.0, (-12.0, 15.0, 20.0))


def _reference() -> dict:
    return json.loads((HEADS / "reference_landmarks.json").read_text())["heads"]


def _motion(nod_deg: float, turn_deg: float, shift: tuple[float, float, float]) -> np.ndarray:
    a, b = np.radians(nod_deg), np.radians(turn_deg)
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    rz = np.array([[np.cos(b), -np.sin(b), 0], [np.sin(b), np.cos(b), 0], [0, 0, 1]])
    m = np.eye(4)
    m[:3, :3] = rz @ rx
    m[:3, 3] = shift
    return m


def _resampled(src: Path, mm: float, dst: Path) -> Path:
    """``src`` resampled to ``mm`` isotropic (linear), the same world extent."""
    import SimpleITK as sitk

    img = sitk.ReadImage(str(src), sitk.sitkFloat32)
    size = [max(1, int(round(n * s / mm))) for n, s in zip(img.GetSize(), img.GetSpacing(), strict=True)]
    out = sitk.Resample(img, size, sitk.Transform(), sitk.sitkLinear, img.GetOrigin(), (mm, mm, mm),
                        img.GetDirection(), 0.0, sitk.sitkFloat32)
    sitk.WriteImage(out, str(dst))
    return dst


def _normalize(task: tuple[str, str, str, str]) -> dict:
    from curation.imaging.normalize import process_series
    from curation.imaging.steps.base import SeriesTask

    name, path, sequence, out = task
    params = NormalizeParams.model_validate(yaml.safe_load((ROOT / "params.yaml").read_text())["normalize"])
    res = process_series(SeriesTask("nifti", [path], params, out, out, sequence))
    assert res.ok, (name, res.reason, res.detail)
    made = res.value
    # the QC record as the stage writes it (cases.jsonl); "record" the model, for a step that takes it
    return {"qc": made.qc.model_dump(), "record": made.qc, "steps": [s.model_dump() for s in made.steps],
            "renders": made.renders,
            "affine": nib.load(Path(out) / "volume.nii.gz").affine, "nifti": str(Path(out) / "volume.nii.gz"),
            "out": out}


@pytest.fixture(scope="module")
def normalized(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Every real head through normalize's steps (the pipeline's own path: fit, deface, N4, renders), two at a time."""
    from curation.parallel import pmap

    work = tmp_path_factory.mktemp("heads")
    name, nod, turn, shift = TILT
    img = nib.load(HEADS / f"{name}.nii.gz")
    tilted = work / "tilted.nii.gz"
    nib.save(nib.Nifti1Image(np.asanyarray(img.dataobj), _motion(nod, turn, shift) @ img.affine), tilted)
    tasks = [(n, str(HEADS / f"{n}.nii.gz"), s, str(work / n)) for n, s in SEQUENCE.items()]
    tasks.append(("tilted", str(tilted), "T1w", str(work / "tilted")))
    name, nod, turn, shift = MOVED_FLAIR
    img = nib.load(HEADS / f"{name}.nii.gz")
    moved = work / "moved_flair.nii.gz"
    nib.save(nib.Nifti1Image(np.asanyarray(img.dataobj), _motion(nod, turn, shift) @ img.affine), moved)
    tasks.append(("moved_flair", str(moved), "FLAIR", str(work / "moved_flair")))
    tasks.append(("iso_1p6", str(_resampled(HEADS / f"{ISOTROPIC[0]}.nii.gz", ISOTROPIC[1], work / "iso.nii.gz")),
                  "T1w", str(work / "iso_1p6")))
    return dict(zip([t[0] for t in tasks], pmap(_normalize, tasks, workers=2), strict=True))


def _expected(name: str) -> dict:
    if name in ("tilted", "moved_flair"):
        head, *motion = TILT if name == "tilted" else MOVED_FLAIR
        ref = _reference()[head]
        m = _motion(*motion)
        return {t: dict(zip("xyz", (m[:3, :3] @ [p["x"], p["y"], p["z"]] + m[:3, 3]).tolist(), strict=True))
                for t, p in ref.items()}
    return _reference()[name]


@pytest.mark.parametrize("name", [*SEQUENCE, "tilted", "moved_flair"])
def test_targets_within_5_mm_of_the_independent_reference(normalized: dict, name: str) -> None:
    qc = normalized[name]["qc"]
    assert qc["anatomy"]["fit"] == "ok", qc["anatomy"]
    placed = {t["target"]: t for t in qc["targets"]}
    ref = _expected(name)
    for target in ("hippocampus", "lateral_ventricles"):
        assert target in placed, (target, qc["anatomy"]["not_located"])
        t = placed[target]
        axis = PLANE_NORMAL[t["plane"]]
        truth = np.array([ref[target][k] for k in "xyz"])
        # the rendered slice passes within 5 mm of the reference point (distance along the slice's normal; the
        # volume's slices can be oblique to the world axes, so its position at the volume's centre is not it)
        affine = normalized[name]["affine"]
        vox = np.linalg.inv(affine) @ np.append(truth, 1.0)
        step = float(np.linalg.norm(affine[:3, axis]))
        assert abs(vox[axis] - t["slice_index"]) * step <= TOLERANCE_MM, (target, t, truth)
        centre = np.asarray(t["centre_mm"])
        assert np.linalg.norm(centre - truth) <= 2 * TOLERANCE_MM, (target, centre, truth)
        render = next(r for r in normalized[name]["renders"] if r.target == target)
        assert Path(render.path).is_file() and render.plane == t["plane"]


def test_an_isotropic_1_6_mm_head_gets_a_coronal_hippocampus_render_through_it(normalized: dict) -> None:
    """1.6 mm isotropic (a long field of view): reformatted, so the hippocampus is shown coronal, not on the midline
    sagittal slice, within 5 mm of the independent reference, and its slice cuts the hippocampus' region."""
    made = normalized["iso_1p6"]
    assert made["qc"]["planes_refused"] == [], made["qc"]["planes_refused"]
    hip = next(t for t in made["qc"]["targets"] if t["target"] == "hippocampus")
    assert hip["plane"] == "coronal" and "instead_of" not in hip and hip["target_fraction"] > 0, hip
    ref = _reference()[ISOTROPIC[0]]["hippocampus"]
    assert abs(hip["position_mm"] - ref["y"]) <= TOLERANCE_MM, (hip, ref)
    render = next(r for r in made["renders"] if r.target == "hippocampus")
    assert render.plane == "coronal" and Path(render.path).is_file()


def test_a_thick_slice_series_shows_the_hippocampus_in_its_own_plane(normalized: dict) -> None:
    """chris_PD is 2.4 mm axial: no blurred coronal reformat; the hippocampus is shown in its axial slice."""
    hip = next(t for t in normalized["chris_PD"]["qc"]["targets"] if t["target"] == "hippocampus")
    assert hip["plane"] == "axial" and hip["instead_of"]["plane"] == "coronal"


def test_brain_without_its_head_passes_defacing_and_every_head_is_defaced(normalized: dict) -> None:
    for name in SEQUENCE:
        deface = next(s for s in normalized[name]["steps"] if s["name"] == "deface")
        if name.startswith("stroke"):
            assert deface["args"]["outcome"] == "face_free", (name, deface)
            assert deface["args"]["series_kind"] == "brain"
        else:
            assert deface["args"]["outcome"] == "defaced", (name, deface)
            assert deface["args"]["removed_voxels"] > 1000


def test_stroke_lesion_found_and_no_lesion_invented(normalized: dict) -> None:
    lesion = {n: next((t for t in v["qc"]["targets"] if t["target"] == "lesion"), None) for n, v in normalized.items()}
    for healthy in ("seg3d_mr", "chris_PD", "register_t2w"):
        assert lesion[healthy] is None, (healthy, lesion[healthy])
    found = lesion["stroke_T2"]
    assert found is not None, normalized["stroke_T2"]["qc"]["anatomy"]["not_located"]
    assert found["centre_mm"][0] < 0, found  # the infarct is in the left hemisphere (RAS: x < 0)
    assert found["volume_mm3"] >= 500


def test_the_t1w_targets_carried_onto_the_visits_moved_flair(normalized: dict) -> None:
    """normalize's carry step (register.carry_series) on the real patient: the FLAIR, moved since the T1w, gets the
    T1w's hippocampus and ventricle positions through a rigid registration, rendered on the FLAIR's own grid, within
    5 mm of the independent reference moved with it."""
    from curation.imaging.register import CarryTask, carry_series

    t1, flair = normalized["stroke_T1"], normalized["moved_flair"]
    params = NormalizeParams.model_validate(yaml.safe_load((ROOT / "params.yaml").read_text())["normalize"])
    res = carry_series(CarryTask(params, t1["nifti"], flair["nifti"], flair["out"], flair["out"], "stroke_T1",
                                 "FLAIR", flair["record"].planes_refused_reason, targets=t1["record"].targets,
                                 own=flair["record"].targets))
    assert res.ok, (res.reason, res.detail)
    placed = {t.target: t.model_dump() for t in res.value.targets}
    assert sorted(placed) == ["hippocampus", "lateral_ventricles"] and not res.value.missed
    ref, affine = _expected("moved_flair"), flair["affine"]
    for target, t in placed.items():
        truth = np.array([ref[target][k] for k in "xyz"])
        axis = PLANE_NORMAL[t["plane"]]
        vox = np.linalg.inv(affine) @ np.append(truth, 1.0)
        assert abs(vox[axis] - t["slice_index"]) * float(np.linalg.norm(affine[:3, axis])) <= TOLERANCE_MM, (t, truth)
        assert np.linalg.norm(np.asarray(t["centre_mm"]) - truth) <= 2 * TOLERANCE_MM, (t, truth)
        assert t["located_by"] == "registered_to:stroke_T1"
    assert {r.target for r in res.value.renders} == set(placed)
    assert all(Path(r.path).is_file() for r in res.value.renders)
    assert res.value.step.args["kept_own"] == []


def test_the_ventricles_measured_on_one_head_agree_across_its_contrasts_and_poses(normalized: dict) -> None:
    """The lateral ventricles' volume (imaging/ventricles.py, what a table's volume is checked against) of one
    patient agrees across their T1 and T2 and their T1 tilted in the scanner or resampled to 1.6 mm (within 20% of
    the mean); every head measured lies in adults' range; FLAIR and proton density are not measured, with the
    reason."""
    def measures(name: str) -> dict:
        return normalized[name]["qc"]["anatomy"]["measures"]

    stroke = {n: measures(n).get("lateral_ventricles_ml") for n in ("stroke_T1", "stroke_T2", "tilted", "iso_1p6")}
    assert all(stroke.values()), stroke
    mean = sum(stroke.values()) / len(stroke)  # type: ignore[arg-type]
    assert all(abs(v - mean) <= 0.2 * mean for v in stroke.values()), stroke  # type: ignore[operator]
    for name in ("seg3d_mr", "register_t2w"):
        assert 5.0 < measures(name).get("lateral_ventricles_ml", 0) < 60.0, (name, measures(name))
    for name, sequence in (("stroke_FLAIR", "FLAIR"), ("moved_flair", "FLAIR"), ("chris_PD", "PD")):
        assert sequence in measures(name)["not_measured"]["lateral_ventricles"], (name, measures(name))
