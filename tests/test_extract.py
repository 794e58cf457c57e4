"""Clinical text extraction: findings with anatomy, laterality, sequence, negation, time; diagnosis and differential."""

from __future__ import annotations

import pytest

from curation.nlp.extract import Extractor

from .conftest import ROOT


@pytest.fixture(scope="module")
def ex() -> Extractor:
    return Extractor(str(ROOT / "templates" / "knowledge" / "lexicon.yaml"))


def by_label(findings, label):
    return [f for f in findings if f.label == label]


def test_finding_with_anatomy_laterality_and_sequence(ex):
    fs = ex.findings("MRI showed restricted diffusion on DWI in the left frontal operculum.", "notes")
    [rd] = by_label(fs, "restricted diffusion")
    assert (rd.anatomy, rd.laterality, rd.sequence, rd.negated, rd.section) == (
        "frontal operculum", "left", "DWI", False, "imaging")


def test_negation_and_its_scope(ex):
    fs = ex.findings("There was no evidence of haemorrhage on SWI.", "notes")
    assert by_label(fs, "haemorrhage")[0].negated
    fs = ex.findings("Examination showed aphasia without weakness.", "notes")
    assert not by_label(fs, "aphasia")[0].negated and by_label(fs, "weakness")[0].negated
    fs = ex.findings("No headache but new aphasia.", "notes")
    assert by_label(fs, "headache")[0].negated and not by_label(fs, "aphasia")[0].negated


def test_negation_does_not_reach_past_non_or_a_new_clause(ex):
    fs = ex.findings("A non-enhancing mass in the left frontal lobe; no haemorrhage.", "notes")
    assert by_label(fs, "enhancement")[0].negated and not by_label(fs, "mass")[0].negated
    assert by_label(fs, "haemorrhage")[0].negated


@pytest.mark.parametrize(("text", "label", "assertion"), [
    ("Possible abscess in the right frontal lobe.", "cerebral abscess", "hedged"),
    ("Metastasis cannot be excluded.", "cerebral metastasis", "hedged"),
    ("Rule out haemorrhage.", "haemorrhage", "hedged"),
    ("History of an infarct, now with aphasia.", "infarct", "historical"),
    ("S/p resection of a glioblastoma.", "glioblastoma", "historical"),
])
def test_hedged_and_historical_findings_are_not_affirmed(ex, text, label, assertion):
    [f] = by_label(ex.findings(text, "notes"), label)
    assert getattr(f, assertion) and not f.affirmed, f


@pytest.mark.parametrize(("text", "affirmed", "not_affirmed"), [
    # a trigger reaches a few words, not the whole sentence (NegEx's window)
    ("Large enhancing mass in the left frontal lobe, the ventricles are normal.", {"mass", "enhancement"}, set()),
    ("Acute infarct in the left MCA territory, the posterior fossa is unremarkable.", {"infarct"}, set()),
    ("There is no midline shift or hydrocephalus, and a large haematoma is present.", {"haemorrhage"},
     {"mass effect"}),
    ("Hypodensity without enhancement in the left frontal lobe, consistent with an acute infarct.", {"infarct"},
     {"enhancement"}),
    # a clause ends at a line, a bullet, "showed", ", with"
    ("Findings:\n- No haemorrhage\n- Large enhancing mass in the left frontal lobe with surrounding oedema",
     {"mass", "vasogenic oedema"}, {"haemorrhage"}),
    ("\u2022 No hydrocephalus \u2022 Ring-enhancing lesion in the right frontal lobe with oedema",
     {"vasogenic oedema"}, {"ventriculomegaly"}),
    ("CT performed to rule out haemorrhage showed a large haematoma.", set(), set()),
    ("Large mass without oedema, with marked enhancement.", {"mass", "enhancement"}, {"vasogenic oedema"}),
    # what looks like a trigger and is not
    ("Subarachnoid haemorrhage with free blood in the ventricles.", {"haemorrhage"}, set()),
    ("New enhancing lesion not seen on prior MRI.", {"enhancement"}, set()),
    ("Compared with the previous study, the enhancing mass has increased in size.", {"mass"}, set()),
    ("Ring-enhancing mass, glioblastoma versus metastasis.", {"mass"}, set()),
    ("Hx of migraine, acute onset aphasia.", {"aphasia"}, set()),
])
def test_assertions_reach_what_their_trigger_is_said_of(ex, text, affirmed, not_affirmed):
    fs = [f for f in ex.findings(text, "notes") if f.category == "finding"]
    assert affirmed <= {f.label for f in fs if f.affirmed}, fs
    assert not_affirmed <= {f.label for f in fs if not f.affirmed}, fs


def test_cannot_exclude_hedges_and_does_not_negate(ex):
    [f] = [f for f in ex.findings("Cannot exclude haemorrhage.", "notes") if f.label == "haemorrhage"]
    assert f.hedged and not f.negated


def test_the_present_after_the_past_is_affirmed(ex):
    fs = ex.findings("History of an infarct, now with aphasia.", "notes")
    assert by_label(fs, "aphasia")[0].affirmed


def test_temporal_expressions_are_intervals_not_ages(ex):
    fs = ex.findings("A 71-year-old man had word-finding difficulty that began 3 hours before arrival.", "notes")
    assert by_label(fs, "aphasia")[0].temporal == "3 hours"
    fs = ex.findings("A 64-year-old woman with headache.", "notes")
    assert by_label(fs, "headache")[0].temporal is None
    fs = ex.findings("At follow-up the hyperintense lesions had grown.", "notes")
    assert by_label(fs, "white matter hyperintensity")[0].temporal == "follow-up"


def test_sections(ex):
    fs = ex.findings("He had a history of headache. Final diagnosis: glioblastoma.", "notes")
    assert by_label(fs, "headache")[0].section == "history"
    assert by_label(fs, "glioblastoma")[0].section == "diagnosis"


def test_diagnosis_and_differential(ex):
    dx, dd = ex.diagnosis("The differential included metastasis, lymphoma and abscess. Final diagnosis: IDH-wildtype "
                          "glioblastoma.")
    assert dx == "glioblastoma" and dd == ["cerebral metastasis", "primary CNS lymphoma", "cerebral abscess"]
    assert ex.diagnosis("Nothing to see here.") == (None, [])
