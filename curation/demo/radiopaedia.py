"""The demo Radiopaedia cases: each figure drawn to show what its findings say (the lesions, their number
and side, oedema, a necrotic core, mass effect), at the MNI coordinates of the structure named; one case.json
each."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from curation.demo.phantom import SHAPE, Lesion, Pathology, axial_png_array, head
from curation.records import write_bytes, write_text

RADIOPAEDIA: list[dict[str, Any]] = [
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
        "differential": ["Cerebral metastasis", "Primary CNS lymphoma", "Cerebral abscess", "Acute ischaemic stroke"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(30, 22, 26, 14.0), "atrophy": 0.1,
        "pathology": Pathology(oedema_mm=10.0, necrotic=True, mass_effect_mm=7.0),
    },
    {
        "slug": "acute-ischaemic-stroke-demo-3", "title": "Acute ischaemic stroke", "diagnosis": "Acute ischaemic stroke",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "77 years",
        "gender": "Male", "author": "Demo Author C",
        "presentation": "Mr. Harold Finch (MRN 5512093, 14 Elm Court, Salem), a 77-year-old retired engineer, was found by his daughter Grace at 7 am on 3 May 2021 with weakness of the left arm and face.",
        "findings": "Acute infarct with restricted diffusion on DWI in the right parietal lobe. The infarct lies in the right middle cerebral artery territory. No haemorrhage.",
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
        "differential": ["Cerebral abscess", "Glioblastoma", "Tuberculoma", "Acute ischaemic stroke"],
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
        "differential": ["Acute ischaemic stroke", "Haemorrhagic transformation of an infarct", "Cavernous malformation", "Haemorrhagic metastasis"],
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
        "differential": ["Glioblastoma", "Tumefactive demyelination", "Cerebral metastasis", "Acute ischaemic stroke"],
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
        "differential": ["Glioblastoma", "Cerebral metastasis", "Tumefactive demyelination", "Acute ischaemic stroke"],
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
        "differential": ["Glioblastoma", "Cerebral abscess", "Tumefactive demyelination", "Acute ischaemic stroke"],
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
    # presentations that point away from the answer: a stroke-like onset that the image shows to be a
    # haemorrhage, a lobar haemorrhage of amyloid angiopathy, a tumour; the history alone picks the wrong option
    {
        "slug": "thalamic-haemorrhage-demo-13", "title": "Hypertensive intracerebral haemorrhage",
        "diagnosis": "Hypertensive intracerebral haemorrhage", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "64 years", "gender": "Female", "author": "Demo Author M",
        "presentation": "Ms. Rose Tyler (MRN 6630148, 48 Powell Estate, Leeds), a 64-year-old shop manager, developed sudden weakness of the left arm and leg at work on 2 November 2023.",
        "findings": "Acute haematoma in the right thalamus, markedly hypointense on SWI, with a thin rim of oedema.",
        "discussion": "A deep thalamic haematoma in a patient with untreated hypertension is a hypertensive haemorrhage; the deficit alone could not tell it from an infarct.",
        "differential": ["Acute ischaemic stroke", "Haemorrhagic transformation of an infarct", "Cavernous malformation"],
        "sequence": "SWI", "lesion": Lesion.at_mm(13, -18, 8, 7.0), "atrophy": 0.2,
        "pathology": Pathology(oedema_mm=3.0),
    },
    {
        "slug": "amyloid-angiopathy-haemorrhage-demo-14", "title": "Cerebral amyloid angiopathy",
        "diagnosis": "Cerebral amyloid angiopathy", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis probable", "age": "81 years", "gender": "Male", "author": "Demo Author N",
        "presentation": "Mr. Edward Hyde (MRN 7741302, phone 617-555-0163), an 81-year-old retired postman, developed sudden loss of the right half of his vision while reading on 4 September 2023.",
        "findings": "Acute lobar haematoma in the left occipital lobe, markedly hypointense on SWI, with several strictly lobar cortical microbleeds in both hemispheres and no deep haemorrhage.",
        "discussion": "A lobar haematoma with strictly lobar microbleeds in a patient over 55 is probable cerebral amyloid angiopathy (Boston criteria).",
        "differential": ["Hypertensive intracerebral haemorrhage", "Haemorrhagic metastasis", "Haemorrhagic transformation of an infarct", "Acute ischaemic stroke"],
        "sequence": "SWI", "lesion": Lesion.at_mm(-24, -80, 10, 9.0), "atrophy": 0.35,
        "pathology": Pathology(more=(Lesion.at_mm(-48, -50, 12, 1.6), Lesion.at_mm(46, -58, 10, 1.6),
                                     Lesion.at_mm(52, -26, 14, 1.5)), oedema_mm=2.0),
    },
    {
        "slug": "glioblastoma-stroke-like-demo-15", "title": "Glioblastoma",
        "diagnosis": "Glioblastoma", "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain",
        "age": "58 years", "gender": "Female", "author": "Demo Author O",
        "presentation": "Mrs. Irene Adler (MRN 5592017, 221 Baker Street, London), a 58-year-old right-handed translator, had sudden difficulty finding words on the morning of 15 October 2023.",
        "findings": "Heterogeneous mass in the left frontal lobe with a necrotic centre, surrounding FLAIR hyperintense vasogenic oedema and mass effect on the left lateral ventricle.",
        "discussion": "A stroke-like onset does not exclude a tumour: a necrotic mass with oedema was a glioblastoma at resection.",
        "differential": ["Acute ischaemic stroke", "Cerebral metastasis", "Cerebral abscess"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-32, 28, 22, 12.0), "atrophy": 0.1,
        "pathology": Pathology(oedema_mm=9.0, necrotic=True, mass_effect_mm=6.0),
    },
    # infarcts outside the middle cerebral artery, told by histories that name no territory, diagnosis or side
    # (issue 29: stroke_territory had two items); each with a second sequence of the same lesion (``also``), which the
    # sequence question asks (the first is told in its siblings' context)
    {
        "slug": "anterior-cerebral-artery-infarct-demo-16", "title": "Acute ischaemic stroke",
        "diagnosis": "Acute ischaemic stroke", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "71 years", "gender": "Male", "author": "Demo Author P",
        "presentation": "Mr. Victor Meldrew (MRN 7312846, 19 Riverside Road, Eastbourne), a 71-year-old retired security guard, was brought in by his wife Margaret on 9 January 2024 because he had been muddled and withdrawn since the previous evening, with new right leg weakness.",
        "findings": "Acute infarct in the left medial frontal lobe with restricted diffusion on DWI. The infarct lies in the anterior cerebral artery territory. No haemorrhage.",
        "discussion": "Restricted diffusion along the medial surface of one frontal lobe, with apathy and weakness of the opposite leg, is an anterior cerebral artery infarct; Holter monitoring showed paroxysmal atrial fibrillation.",
        "differential": ["Focal seizure", "Brain tumour", "Intracerebral haemorrhage"],
        "sequence": "DWI", "lesion": Lesion.at_mm(-8, 14, 50, 7.0, (0.7, 1.6, 1.0)), "atrophy": 0.25,
        "also": {"sequence": "FLAIR",
                 "findings": "The acute infarct in the left medial frontal lobe is hyperintense on FLAIR."},
    },
    {
        "slug": "anterior-cerebral-artery-infarct-demo-17", "title": "Acute ischaemic stroke",
        "diagnosis": "Acute ischaemic stroke", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "66 years", "gender": "Female", "author": "Demo Author Q",
        "presentation": "Mrs. Hyacinth Bouquet (DOB 14/05/1957, phone 480-555-0134), a 66-year-old retired receptionist, was seen on 22 January 2024 after her neighbour Elizabeth found her confused at home, with new left leg weakness.",
        "findings": "Acute infarct in the right medial parietal lobe with restricted diffusion on DWI. The infarct lies in the anterior cerebral artery territory. No haemorrhage.",
        "discussion": "Restricted diffusion on the medial surface of the parietal lobe, sparing the lateral convexity, is an anterior cerebral artery infarct; carotid imaging showed a stenosis.",
        "differential": ["Focal seizure", "Hypoglycaemia", "Brain tumour"],
        "sequence": "DWI", "lesion": Lesion.at_mm(9, -36, 54, 7.0, (0.7, 1.5, 1.0)), "atrophy": 0.2,
        "also": {"sequence": "T2w",
                 "findings": "The acute infarct in the right medial parietal lobe is hyperintense on T2-weighted images."},
    },
    {
        "slug": "posterior-cerebral-artery-infarct-demo-18", "title": "Acute ischaemic stroke",
        "diagnosis": "Acute ischaemic stroke", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "74 years", "gender": "Male", "author": "Demo Author R",
        "presentation": "Mr. Albert Steptoe (MRN 6627041, 24 Oil Drum Lane, Shepherds Bush), a 74-year-old retired scrap dealer, was brought in by his son Harold on 16 February 2024 after a morning of headache and confusion.",
        "findings": "Acute infarct in the left occipital lobe with restricted diffusion on DWI. The infarct lies in the posterior cerebral artery territory. No haemorrhage.",
        "discussion": "A wedge of restricted diffusion in the occipital cortex is a posterior cerebral artery infarct; confusion is a common way it presents, and the field defect often goes unnoticed.",
        "differential": ["Migraine with aura", "Focal seizure", "Hypoglycaemia"],
        "sequence": "DWI", "lesion": Lesion.at_mm(-12, -86, 6, 8.0), "atrophy": 0.3,
        # (an SWI without the lesion looked like T2w on the phantom: review R2b)
        "also": {"sequence": "FLAIR",
                 "findings": "The acute infarct in the left occipital lobe is hyperintense on FLAIR."},
    },
    {
        "slug": "posterior-cerebral-artery-infarct-demo-19", "title": "Acute ischaemic stroke",
        "diagnosis": "Acute ischaemic stroke", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "68 years", "gender": "Female", "author": "Demo Author S",
        "presentation": "Ms. Sybil Fawlty (MRN 5530219, 16 Elwood Avenue, Torquay), a 68-year-old hotel manager, was seen on 4 March 2024 with headache, nausea and dizziness since she woke that morning.",
        "findings": "Acute infarct in the right occipital lobe with restricted diffusion on DWI. The infarct lies in the posterior cerebral artery territory. No haemorrhage.",
        "discussion": "Restricted diffusion in the inferior occipital cortex is a posterior cerebral artery infarct; CT angiography showed an occluded distal posterior cerebral artery.",
        "differential": ["Migraine with aura", "Focal seizure", "Intracerebral haemorrhage"],
        "sequence": "DWI", "lesion": Lesion.at_mm(18, -76, -4, 8.0), "atrophy": 0.2,
        "also": {"sequence": "T2w",
                 "findings": "The acute infarct in the right occipital lobe is hyperintense on T2-weighted images."},
    },
    {
        "slug": "cerebellar-infarct-demo-20", "title": "Acute ischaemic stroke",
        "diagnosis": "Acute ischaemic stroke", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "59 years", "gender": "Male", "author": "Demo Author T",
        "presentation": "Mr. Basil Brush (MRN 8841027, phone 702-555-0148), a 59-year-old taxi driver, was brought in on 18 March 2024 with dizziness, vomiting and unsteadiness that had begun that morning.",
        "findings": "Acute infarct in the right cerebellar hemisphere with restricted diffusion on DWI. The infarct lies in the vertebrobasilar territory. No haemorrhage.",
        "discussion": "Restricted diffusion in one cerebellar hemisphere explains vertigo and vomiting that are easily mistaken for a peripheral vestibular disorder; CT angiography showed a vertebral artery dissection.",
        "differential": ["Vestibular neuritis", "Intracerebral haemorrhage", "Migraine with aura"],
        "sequence": "DWI", "lesion": Lesion.at_mm(24, -64, -30, 9.0), "atrophy": 0.1,
        "also": {"sequence": "FLAIR",
                 "findings": "The acute infarct in the right cerebellar hemisphere is hyperintense on FLAIR."},
    },
    {
        "slug": "pontine-lacunar-infarct-demo-21", "title": "Lacunar infarct", "diagnosis": "Lacunar infarct",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "63 years",
        "gender": "Male", "author": "Demo Author U",
        "presentation": "Mr. Frank Spencer (MRN 2290417, 31 Crescent Road, Bristol), a 63-year-old bus driver with high blood pressure, was seen on 2 April 2024 with two days of left arm weakness and slurred speech.",
        "findings": "Small acute lacunar infarct with restricted diffusion on DWI in the right pons. The infarct lies in the vertebrobasilar territory. No haemorrhage.",
        "discussion": "A small deep infarct in the pons with weakness and dysarthria in a hypertensive patient is a lacunar stroke from disease of a perforating artery.",
        "differential": ["Multiple sclerosis", "Intracerebral haemorrhage", "Focal seizure"],
        "sequence": "DWI", "lesion": Lesion.at_mm(5, -26, -32, 3.5), "atrophy": 0.2,
        "also": {"sequence": "FLAIR",
                 "findings": "The small lacunar infarct in the right pons is hyperintense on FLAIR."},
    },
    # tumours, an abscess, a haemorrhage and a cavernoma at other sites, sides and ages than those above
    {
        "slug": "cerebellar-abscess-demo-22", "title": "Cerebral abscess", "diagnosis": "Cerebral abscess",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "35 years",
        "gender": "Male", "author": "Demo Author V",
        "presentation": "Mr. Dean Winchester (MRN 9913406, 67 Impala Road, Lawrence), a 35-year-old mechanic, was seen on 29 April 2024 with ten days of worsening headache, vomiting and unsteadiness.",
        "findings": "Restricted diffusion on DWI in the core of a round lesion in the left cerebellar hemisphere, with surrounding vasogenic oedema and mass effect on the fourth ventricle.",
        "discussion": "Restricted diffusion in the core of a cerebellar ring lesion is an abscess, here spread from chronic otitis media; aspiration grew mixed anaerobes.",
        "differential": ["Acute ischaemic stroke", "Cerebral metastasis", "Haemangioblastoma"],
        "sequence": "DWI", "lesion": Lesion.at_mm(-26, -60, -32, 9.0), "atrophy": 0.0,
        "pathology": Pathology(oedema_mm=7.0, mass_effect_mm=3.0),
        "also": {"sequence": "T2w",
                 "findings": "The abscess in the left cerebellar hemisphere is hyperintense on T2-weighted images, with surrounding oedema."},
    },
    {
        "slug": "primary-cns-lymphoma-demo-23", "title": "Primary CNS lymphoma", "diagnosis": "Primary CNS lymphoma",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "71 years",
        "gender": "Female", "author": "Demo Author W",
        "presentation": "Mrs. Agatha Trunchbull (MRN 3318824, phone 415-555-0121), a 71-year-old retired headmistress, was brought by her niece Jennifer on 13 May 2024 with a month of slowly worsening confusion and right-sided weakness.",
        "findings": "Homogeneous mass in the left periventricular white matter beside the frontal horn of the lateral ventricle, with mild surrounding vasogenic oedema and no necrosis.",
        "discussion": "A homogeneous periventricular mass without necrosis that restricts diffusion is typical of lymphoma; steroids were withheld and stereotactic biopsy showed diffuse large B-cell lymphoma.",
        "differential": ["Glioblastoma", "Acute ischaemic stroke", "Cerebral metastasis"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-20, 12, 22, 9.0), "atrophy": 0.25,
        "pathology": Pathology(oedema_mm=5.0),
        "also": {"sequence": "DWI",
                 "findings": "The mass in the left periventricular white matter shows restricted diffusion on DWI."},
    },
    {
        "slug": "haemorrhagic-metastases-demo-24", "title": "Cerebral metastases", "diagnosis": "Cerebral metastases",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis probable", "age": "57 years",
        "gender": "Male", "author": "Demo Author X",
        "presentation": "Mr. Gil Grissom (MRN 6604219, 19 Desert Palm Street, Las Vegas), a 57-year-old laboratory manager, reported two weeks of headaches and left arm weakness on 3 June 2024.",
        "findings": "Multiple round masses at the grey-white junction of the right cerebral hemisphere, the largest in the right frontal lobe, each with surrounding vasogenic oedema.",
        "discussion": "Several round haemorrhagic lesions at the grey-white junction in a patient once treated for a melanoma of the back are haemorrhagic metastases.",
        "differential": ["Glioblastoma", "Acute ischaemic stroke", "Cerebral abscess"],
        # all in one hemisphere, the largest well in front of the central sulcus (review R2a: two on the other side
        # made "bilateral" as right as the key; the largest at the frontoparietal midpoint, its lobe undecidable)
        "sequence": "FLAIR", "lesion": Lesion.at_mm(30, 24, 44, 7.0), "atrophy": 0.1,
        "pathology": Pathology(more=(Lesion.at_mm(36, -48, 44, 5.0), Lesion.at_mm(22, 50, 38, 4.5)),
                               oedema_mm=8.0),
        "also": {"sequence": "SWI", "findings": "The masses are markedly hypointense on SWI from haemorrhage within them."},
    },
    {
        "slug": "putaminal-haemorrhage-demo-25", "title": "Hypertensive intracerebral haemorrhage",
        "diagnosis": "Hypertensive intracerebral haemorrhage", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis certain", "age": "58 years", "gender": "Male", "author": "Demo Author Y",
        "presentation": "Mr. Derek Trotter (MRN 4408127, 368 Nelson Road, Peckham), a 58-year-old market trader, developed sudden left arm weakness and slurred speech while lifting boxes on 21 June 2024.",
        "findings": "Acute haematoma in the right basal ganglia, centred on the putamen, markedly hypointense on SWI, with a thin rim of oedema.",
        "discussion": "A deep haematoma in the putamen of a patient with untreated hypertension is a hypertensive haemorrhage; the sudden deficit alone could not tell it from an infarct.",
        "differential": ["Acute ischaemic stroke", "Haemorrhagic metastasis", "Cavernous malformation"],
        "sequence": "SWI", "lesion": Lesion.at_mm(24, 4, 2, 9.0), "atrophy": 0.15,
        "pathology": Pathology(oedema_mm=3.0),
        "also": {"sequence": "DWI",
                 "findings": "The hyperacute haematoma in the right basal ganglia is hyperintense on DWI."},
    },
    {
        "slug": "low-grade-glioma-demo-26", "title": "Low-grade glioma", "diagnosis": "Low-grade glioma",
        "system": "Central Nervous System", "diagnostic_certainty": "Diagnosis certain", "age": "49 years",
        "gender": "Female", "author": "Demo Author Z",
        "presentation": "Mrs. Jessica Fletcher (MRN 7765012, 698 Candlewood Lane, Cabot Cove), a 49-year-old right-handed writer, had two months of word-finding difficulty and headaches when seen on 8 July 2024.",
        "findings": "Homogeneous FLAIR hyperintense mass in the left frontal lobe, without oedema, necrosis or mass effect.",
        "discussion": "A homogeneous FLAIR-bright mass without oedema or enhancement is a diffuse low-grade glioma; resection showed an IDH-mutant oligodendroglioma.",
        "differential": ["Acute ischaemic stroke", "Glioblastoma", "Tumefactive demyelination"],
        "sequence": "FLAIR", "lesion": Lesion.at_mm(-40, 18, 8, 11.0), "atrophy": 0.05,
        "also": {"sequence": "T2w",
                 "findings": "The homogeneous mass in the left frontal lobe is hyperintense on T2-weighted images."},
    },
    {
        "slug": "cavernous-malformation-demo-27", "title": "Cavernous malformation",
        "diagnosis": "Cavernous malformation", "system": "Central Nervous System",
        "diagnostic_certainty": "Diagnosis probable", "age": "52 years", "gender": "Female",
        "author": "Demo Author AA",
        "presentation": "Ms. Temperance Brennan (MRN 1186305, phone 202-555-0157), a 52-year-old anthropologist, reported three months of brief episodes of right arm tingling on 19 August 2024.",
        "findings": "Small focus of marked susceptibility (blooming) on SWI in the left parietal lobe, with no oedema.",
        "discussion": "A small blooming focus without oedema, causing brief focal sensory seizures, is a cavernous malformation.",
        "differential": ["Acute ischaemic stroke", "Haemorrhagic metastasis", "Cerebral amyloid angiopathy"],
        "sequence": "SWI", "lesion": Lesion.at_mm(-36, -42, 48, 4.0), "atrophy": 0.05,
        "also": {"sequence": "T2w",
                 "findings": "The small lesion in the left parietal lobe is hyperintense on T2-weighted images."},
    },
]


# a caption names a weighting the way a report does (the lexicon reads "T2-weighted", not "T2w")
CAPTION_NAME = {"T1w": "T1-weighted", "T2w": "T2-weighted"}


def write_radiopaedia(root: Path) -> None:
    for n, case in enumerate(RADIOPAEDIA):
        folder = root / case["slug"]
        z_lesion = int(round(case["lesion"].center[2] * (SHAPE[2] - 1)))
        slices = [z_lesion - 4, z_lesion, z_lesion + 4]
        vol = head(case["sequence"], atrophy=case["atrophy"], lesion=case["lesion"], seed=5000 + n,
                   pathology=case.get("pathology"))
        studies = [_study(folder, "images", vol, slices, case["sequence"], case["findings"])]
        also = case.get("also")
        if also:  # a second sequence of the same lesion
            vol = head(also["sequence"], atrophy=case["atrophy"], lesion=case["lesion"], seed=6000 + n,
                       pathology=case.get("pathology"))
            studies.append(_study(folder, "also", vol, slices, also["sequence"], also["findings"]))
        doc = {
            "id": 90000 + n, "url": f"https://radiopaedia.org/cases/{case['slug']}", "title": case["title"],
            "system": case["system"], "diagnostic_certainty": case["diagnostic_certainty"],
            "presentation": case["presentation"], "age": case["age"], "gender": case["gender"],
            "author": case["author"], "body": case["findings"], "discussion": case["discussion"],
            "differential": case["differential"], "license": "CC BY-NC-SA 3.0", "studies": studies,
        }
        write_text(folder / "case.json", json.dumps(doc, indent=2) + "\n")


def _study(folder: Path, sub: str, vol: np.ndarray, slices: list[int], sequence: str, findings: str) -> dict[str, object]:
    """One study of a case: three axial PNGs of ``vol`` under ``folder/sub``, with its caption and findings."""
    images = []
    for i, z in enumerate(slices):
        rel = f"{sub}/{i + 1:03d}.png"
        buf = io.BytesIO()
        Image.fromarray(axial_png_array(vol, z)).save(buf, format="PNG")
        write_bytes(folder / rel, buf.getvalue())
        images.append(rel)
    return {"modality": "MRI", "plane": "axial", "findings": findings,
            "caption": f"Axial {CAPTION_NAME.get(sequence, sequence)} MRI", "series": [{"name": sequence, "images": images}]}
