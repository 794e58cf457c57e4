"""Demo MedPix tree in the MedPix 2.0 layout (Case_topic.json, Descriptions.json, images/): four synthetic teaching
cases whose figures are drawn from the phantom, so the MedPix source runs in the demo pipeline. Real MedPix cases
(``../shared/fixtures/medpix-dev``) are what the source is developed and measured on; these only keep it running."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from PIL import Image

from curation.demo.phantom import SHAPE, Lesion, Pathology, axial_png_array, head
from curation.records import write_bytes, write_text

CASES: list[dict[str, Any]] = [
    {
        "uid": "MPX9002", "age": "67", "sex": "male",
        "case": {
            "Title": "Glioblastoma", "History": "67 year old man with three weeks of progressive left arm weakness.",
            "Exam": "Left pronator drift.",
            "Findings": "A heterogeneous mass with a necrotic centre and surrounding oedema in the right frontal lobe.",
            "Differential Diagnosis": "• Metastasis\n• Lymphoma\n• Abscess",
            "Case Diagnosis": "Glioblastoma", "Diagnosis By": "Pathology",
            "Treatment & Follow Up": "Neurosurgical resection followed by radiotherapy and temozolomide.",
            "Discussion": "N/A",
        },
        "lesion": Lesion.at_mm(30, 20, 40, 12.0),
        "pathology": Pathology(oedema_mm=8.0, necrotic=True, mass_effect_mm=3.0),
        "figures": [
            ("FLAIR", "MR - FLAIR", "FLAIR hyperintense mass with surrounding oedema in the right frontal lobe."),
            ("T2w", "MR - T2 weighted", "T2 hyperintense mass with a necrotic centre in the right frontal lobe."),
            ("T1c", "MR - T1W w/Gadolinium",
             "T1 weighted image after gadolinium: ring-enhancing mass with a dark necrotic centre in the right frontal "
             "lobe."),
        ],
    },
    {
        "uid": "MPX9004", "age": "71", "sex": "female",
        "case": {
            "Title": "Acute ischemic stroke", "History": "71 year old woman found with sudden right-sided weakness.",
            "Exam": "Right hemiparesis and aphasia.",
            "Findings": "Restricted diffusion in the left frontal lobe, an acute infarct.",
            "Differential Diagnosis": "Low-grade glioma\nHerpes encephalitis",
            "Case Diagnosis": "Acute ischemic stroke", "Diagnosis By": "Imaging",
            "Treatment & Follow Up": "N/A", "Discussion": "N/A",
        },
        "lesion": Lesion.at_mm(-32, 18, 44, 10.0),
        "pathology": None,
        "figures": [("DWI", "MR - DWI Diffusion Weighted", "Restricted diffusion in the left frontal lobe."),
                    ("T1w", "MR - T1W - noncontrast", "Subtle low signal in the left frontal lobe.")],
    },
    {  # a diagnosis one image decides, two fully described figures, and a T1 whose caption names it
        "uid": "MPX9006", "age": "9", "sex": "male",
        "case": {
            "Title": "Porencephalic cyst",
            "History": "9 year old boy with right hemiparesis since infancy and new focal seizures.",
            "Exam": "Spastic right hemiparesis.",
            "Findings": "A smooth cavity of fluid signal in the left parietal lobe, lined by a thin rim of gliosis.",
            "Differential Diagnosis": "• Arachnoid cyst\n• Schizencephaly\n• Cystic neoplasm",
            "Case Diagnosis": "Porencephalic cyst", "Diagnosis By": "Imaging",
            "Treatment & Follow Up": "Antiepileptic treatment.", "Discussion": "N/A",
        },
        "lesion": Lesion.at_mm(-30, -45, 35, 10.0),
        "pathology": Pathology(necrotic=True),
        "figures": [
            ("T2w", "MR - T2 weighted",
             "T2 weighted image: a smooth cavity of fluid signal in the left parietal lobe with a thin hyperintense "
             "rim of gliosis."),
            ("FLAIR", "MR - FLAIR",
             "The fluid in the cavity is suppressed, and a thin hyperintense rim of gliosis surrounds it, in the left "
             "parietal lobe."),
            ("T1w", "MR - T1W - noncontrast", "T1 weighted image at the same level."),
        ],
    },
    {  # a diagnosis the history and a sequence that tells it decide, and two figures under one caption
        "uid": "MPX9008", "age": "34", "sex": "female",
        "case": {
            "Title": "Herpes simplex encephalitis",
            "History": "34 year old woman with two days of fever, headache and confusion, and a first seizure.",
            "Exam": "Febrile and disoriented.",
            "Findings": "Swollen hyperintense cortex of the right medial temporal lobe and insula, with restricted "
                        "diffusion.",
            "Differential Diagnosis": "• Limbic encephalitis\n• Low-grade glioma\n• Acute ischemic stroke",
            "Case Diagnosis": "Herpes simplex encephalitis", "Diagnosis By": "PCR of the cerebrospinal fluid",
            "Treatment & Follow Up": "Intravenous aciclovir.", "Discussion": "N/A",
        },
        "lesion": Lesion.at_mm(30, -8, -14, 9.0),
        "pathology": Pathology(oedema_mm=6.0),
        "figures": [
            ("DWI", "MR - DWI Diffusion Weighted",
             "Diffusion weighted image: hyperintense cortex with restricted diffusion in the right medial temporal "
             "lobe and insula."),
            ("FLAIR", "MR - FLAIR",
             "FLAIR images: hyperintense swollen cortex and oedema in the right medial temporal lobe and insula."),
            ("FLAIR", "MR - FLAIR",
             "FLAIR images: hyperintense swollen cortex and oedema in the right medial temporal lobe and insula."),
            ("T2w", "MR - T2 weighted", "T2 weighted image at the level of the temporal horns."),
        ],
    },
]


def write_medpix(root: Path) -> None:
    topics, descriptions = [], []
    for n, case in enumerate(CASES):
        z = int(round(case["lesion"].center[2] * (SHAPE[2] - 1)))
        names = []
        for k, (sequence, modality, caption) in enumerate(case["figures"]):
            name = f"{case['uid']}_synpic{90000 + 10 * n + k}"
            vol = head(sequence, lesion=case["lesion"], seed=7000 + 10 * n + k, pathology=case["pathology"])
            buf = io.BytesIO()
            # (at three pixels a voxel, 354 by 480: a teaching file's figure is larger than a thumbnail, and the
            # brightness item asks none of one under 320 pixels)
            Image.fromarray(axial_png_array(vol, z, scale=3)).save(buf, format="PNG")
            write_bytes(root / "images" / f"{name}.png", buf.getvalue())
            names.append(name)
            descriptions.append({"Type": "MR", "U_id": case["uid"], "image": name, "Location": "Brain and Neuro",
                                 "Description": {"Caption": caption, "Modality": modality, "Plane": "Axial",
                                                 "Age": case["age"], "Sex": case["sex"], "Figure Part": str(k + 1)}})
        topics.append({"U_id": case["uid"], "MRI": names, "TAC": [], "Case": case["case"],
                       "Topic": {"Title": case["case"]["Title"], "Category": "demo"}})
    write_text(root / "Case_topic.json", json.dumps(topics, indent=1) + "\n")
    write_text(root / "Descriptions.json", json.dumps(descriptions, indent=1) + "\n")
