"""The presentation rules of ``leak_rules.yaml`` (a textbook syndrome or base rate that gives the key without the
image) measured on presentations they were not written from: 48 vignettes written by another author, who did not
see the rules, each labelled with that author's clinical judgement (does the history alone give the diagnosis?
its site?). The rules are narrow by design: what they flag must be right (no vignette the author says needs the
image), and they must still catch the textbook presentations they name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from curation.quality.leaks import load_rules, mapping_leaks
from tests.factories import item

VIGNETTES = yaml.safe_load((Path(__file__).parent / "data" / "presentations_independent.yaml").read_text())
PRESENTATION_RULES = ("sudden_", "pure_", "expressive_", "receptive_", "young_adult_", "hypertensive_", "older_adult_",
                      "memory_complaint_", "hemianopia_")


def flags(task_type: str, context: str, options: list[str], *, write_image: bool = False) -> list[str]:
    """The presentation rules that fire on an item showing ``context`` and keyed to options[0]."""
    it = item(0, options=options, key=0, context=context, task_type=task_type, write_image=write_image)
    return [r for r in mapping_leaks(it, load_rules()) if r.split(":")[1].startswith(PRESENTATION_RULES)]


def confusion(label: str, fired: list[bool]) -> dict[str, int]:
    pairs = list(zip(fired, (bool(v[label]) for v in VIGNETTES), strict=True))
    return {"tp": sum(f and t for f, t in pairs), "fp": sum(f and not t for f, t in pairs),
            "fn": sum(t and not f for f, t in pairs)}


def test_the_vignettes_are_the_independent_set() -> None:
    assert len(VIGNETTES) == 48 and all(len(v["options"]) == 5 for v in VIGNETTES)
    assert sum(v["history_gives_answer"] for v in VIGNETTES) == 26
    assert sum(v["history_gives_site"] for v in VIGNETTES) == 23


def test_diagnosis_rules_flag_only_what_the_history_gives() -> None:
    fired = [bool(flags("differential_diagnosis", v["presentation"], v["options"])) for v in VIGNETTES]
    c = confusion("history_gives_answer", fired)
    # measured: 7 flagged, all 7 right (recall 7 of 26: the rules name a few syndromes; the text-only model
    # baseline, when an endpoint is set, is the broad check)
    assert c["fp"] == 0, c
    assert c["tp"] >= 6, c


def test_site_rules_flag_only_what_the_history_localises() -> None:
    fired = [bool(flags("causal_reasoning", v["presentation"], [v["lesion_site"], "elsewhere"]))
             for v in VIGNETTES]
    c = confusion("history_gives_site", fired)
    assert c["fp"] == 0, c
    assert c["tp"] >= 3, c


@pytest.mark.parametrize("context,options,task,fires", [
    # the image overturns the history: a stroke-like onset that is a haemorrhage is not flagged
    ("A 69-year-old man developed sudden right-sided weakness and slurred speech.",
     ["Hypertensive intracerebral haemorrhage", "Acute ischaemic stroke", "Cavernous malformation"],
     "differential_diagnosis", False),
    ("A 69-year-old man developed sudden right-sided weakness and slurred speech.",
     ["Acute ischaemic stroke", "Focal seizure", "Hypoglycaemia"], "differential_diagnosis", True),
    # where another option fits the same base rate, the cue does not single the key out
    ("A 70-year-old woman suddenly developed weakness of the left arm.",
     ["Cardioembolic infarct", "Lacunar infarct", "Migraine with aura"], "differential_diagnosis", False),
    # a haemorrhagic transformation is not the base-rate answer, though it names an infarct
    ("A 70-year-old woman suddenly developed weakness of the left arm.",
     ["Haemorrhagic transformation of an infarct", "Focal seizure", "Hypoglycaemia"], "differential_diagnosis",
     False),
    ("A 74-year-old woman with hypertension reported a year of slowly worsening forgetfulness and an unsteady gait.",
     ["Vascular risk factor control: blood pressure and a statin", "Lumbar puncture for oligoclonal bands",
      "Stereotactic biopsy"], "next_step", True),
    ("A 63-year-old man was brought in with three weeks of headache and new left arm weakness.",
     ["Glioblastoma", "Primary CNS lymphoma", "Cerebral abscess"], "differential_diagnosis", True),
    # a cancer told points to a metastasis: the base rate of the glioblastoma no longer holds
    ("A 63-year-old man treated for lung cancer had three weeks of headache and new left arm weakness.",
     ["Glioblastoma", "Primary CNS lymphoma", "Cerebral abscess"], "differential_diagnosis", False),
    ("A 72-year-old man was seen with two days of numbness of the right face, arm and leg.",
     ["Lacunar infarct: infarct in the left thalamus"], "rationale_generation", True),
])
def test_presentation_rules_on_worded_cases(context: str, options: list[str], task: str, fires: bool) -> None:
    assert bool(flags(task, context, options)) is fires


@pytest.mark.parametrize("history,fires", [
    # review R1 (issue 29): sudden aphasia in a right-handed woman gives the consult's diagnosis turn away
    ("A 58-year-old right-handed woman had sudden difficulty finding words three hours ago.", True),
    # a history that fits several diagnoses leaves the decision to the image
    ("A 66-year-old man was found confused at home by his neighbour.", False),
])
def test_a_consult_whose_revealed_history_gives_its_diagnosis_is_flagged(history: str, fires: bool) -> None:
    from curation.schema import ItemFormat, Turn

    it = item(0, options=[], key=0, context="", task_type="multi_turn_dialogue", format=ItemFormat.multi_turn,
              question="What is the principal abnormality on this image, and where is it?",
              answer="restricted diffusion in the left frontal operculum; Acute ischaemic stroke",
              turns=[Turn(role="clinician", text=f"The history: {history} In the light of the image and this "
                                                  "history, what is the most likely diagnosis?")],
              write_image=False)
    fired = [r for r in mapping_leaks(it, load_rules()) if r.split(":")[1].startswith(PRESENTATION_RULES)]
    assert bool(fired) is fires, fired
