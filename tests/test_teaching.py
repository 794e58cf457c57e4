"""Teaching cases: the MedPix source, diagnoses by one name, and every template over every real case of
``../shared/fixtures/medpix-dev`` and the JATS case reports (no template may fail with an exception)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from curation.errors import ParamsError
from curation.figure_kinds import caption_kind, figure_kind
from curation.generate.engine import Engine, Skip
from curation.generate.teaching import caption_score, sideless, teaching_facts, visible_sentences
from curation.ingest import run
from curation.jsonio import read_jsonl
from curation.nlp.diagnoses import Diagnoses
from curation.params import GenerateParams, IngestParams
from curation.schema import Case, Diagnosis, Figure, FigureQC, Render, SourceName

from .conftest import ROOT, SHARED

MEDPIX = SHARED / "fixtures" / "medpix-dev"
JATS = SHARED / "fixtures" / "jats"
needs_medpix = pytest.mark.skipif(not MEDPIX.is_dir(), reason="shared fixtures absent")
DIAGNOSES = ROOT / "templates" / "knowledge" / "diagnoses.yaml"


def _ingest(source: str, raw: Path, out: Path) -> list[Case]:
    run(IngestParams(max_failure_rate=0.5), source, raw, out)
    return list(read_jsonl(out / "cases.jsonl", Case))


def _rendered(case: Case) -> Case:
    """The case as normalize leaves a figure: one render, the figure itself (no resampling needed here)."""
    for fig in case.figures:
        if fig.path and not fig.missing:
            fig.renders = [Render(plane="figure", role="figure", path=fig.path, target="figure")]
    return case


@pytest.mark.parametrize(("words", "plane", "kind", "seq", "contrast", "want_plane"), [
    ("MR - T1W w/Gadolinium", "Axial", "T1C", "T1w", True, "axial"),
    ("MR - T1W - noncontrast", "Sagittal", "T1", "T1w", False, "sagittal"),
    ("T2 weighted", None, "T2", "T2w", False, None),
    ("ADC Map", "Transverse", "ADC", "ADC", False, "axial"),
    ("Axial T1 C+", None, "T1C", "T1w", True, None),
    ("MR T2* gradient,GRE,MPGR,SWAN,SWI", "Coronal", "SWI", "SWI", False, "coronal"),
    ("CT - noncontrast", "Axial", "CT", None, False, "axial"),
    ("MR - Montage of Images", "Multiple or Montage", None, None, False, None),
])
def test_figure_kind_reads_what_sources_call_their_images(words: str, plane: str | None, kind: str | None,
                                                           seq: str | None, contrast: bool,
                                                           want_plane: str | None) -> None:
    k = figure_kind(words, plane)
    assert (k.kind, k.sequence, k.contrast, k.plane) == (kind, seq, contrast, want_plane)


@pytest.mark.parametrize(("caption", "kind", "plane"), [
    ("Axial diffusion-weighted MRI showing restricted diffusion in the left MCA territory (arrow).", "DWI", "axial"),
    ("Brain MRI, sagittal T1-weighted post-gadolinium image, demonstrating a ring-enhancing mass.", "T1C", "sagittal"),
    ("Magnetic resonance imaging of the brain: coronal FLAIR shows hyperintensity of both hippocampi.", "FLAIR",
     "coronal"),
    ("Non-contrast CT of the head shows a hyperdense right middle cerebral artery.", "CT", None),
    ("Contrast-enhanced axial CT demonstrating a rim-enhancing collection.", "CTC", "axial"),
    ("Axial FLAIR image with a lesion that had restricted diffusion.", "FLAIR", "axial"),
    # "CT performed with intravenous contrast" is no plain CT, though the table's patterns do not read it
    ("Axial CT performed with intravenous contrast shows a dense basal ganglia focus.", "CTC", "axial"),
    # several panels, several images, kinds or planes: a figure of panels names no kind
    ("(A) Axial FLAIR shows hyperintensity. (B) T1 after contrast shows enhancement.", None, None),
    ("A, Axial T2 image. B, Diffusion-weighted image.", None, None),
    ("Axial T2-weighted MRI shows lesions in the left (a) and right (b) thalamus.", None, None),
    ("Axial T2 and FLAIR images showing periventricular lesions.", None, None),
    ("Axial and coronal T1 after contrast.", None, None),
    ("Left image: axial T2; right image: axial FLAIR.", None, None),
    ("Axial T2 image through the midbrain. Coronal T2 shows the same lesion.", None, None),
    ("MRI of the brain showing a lesion in the pons.", None, None),
    ("Flow chart of included patients.", None, None),
    # the contrast as the caption states it, not as the table's MedPix patterns read prose ("post", "enhanced")
    ("Non-enhanced CT of the head shows a hyperdense middle cerebral artery.", "CT", None),
    ("Axial T1 of the posterior fossa shows a cyst.", "T1", "axial"),
    ("Post-operative T1-weighted image shows the resection cavity.", "T1", None),
    ("Axial T1 before contrast shows a hyperintense lesion.", "T1", "axial"),
    ("Axial CT after i.v. contrast shows a ring-enhancing lesion.", "CTC", "axial"),
    ("Coronal post-gad T1 demonstrates an enhancing mass.", "T1C", "coronal"),
    ("Axial CE-T1WI shows leptomeningeal enhancement.", "T1C", "axial"),
    # two states, two modalities, nuclear medicine, a plane that is anatomy, not the image's
    ("Axial T1 before and after gadolinium.", None, None),
    ("Axial CT and CTA show a dense basilar artery.", None, None),
    ("Brain CT and MRI showing a mass.", None, None),
    ("FDG PET/CT shows a hypermetabolic lesion.", None, None),
    ("Axial CT (left) and DSA (right) show an aneurysm.", None, None),
    ("Axial FLAIR A: pons B: midbrain.", None, None),
    ("CT showing sagittal synostosis.", "CT", None),
])
def test_a_case_report_figure_says_its_kind_only_where_its_caption_describes_one_image(
        caption: str, kind: str | None, plane: str | None) -> None:
    k = caption_kind(caption)
    assert (k.kind, k.plane) == (kind, plane)


@needs_medpix
def test_kinds_read_from_real_captions_agree_with_the_labels_their_source_gave() -> None:
    """MedPix states each image's modality and plane apart from its caption: read from the caption alone, the kind
    (where one is read) is the one MedPix states, but for the odd caption written for another image of the case."""
    import json

    said = read = agree = 0
    for d in json.loads((MEDPIX / "Descriptions.json").read_text(encoding="utf-8")):
        desc = d.get("Description") or {}
        truth = figure_kind(desc.get("Modality") or "", desc.get("Plane"))
        k = caption_kind(desc.get("Caption") or "")
        if k.kind and truth.kind:
            said += 1
            agree += k.kind == truth.kind
        read += bool(k.kind)
    assert read >= 60 and agree >= 0.95 * said, (read, agree, said)


def test_a_case_report_figure_of_one_image_goes_through_the_teaching_engine(tmp_path: Path) -> None:
    """A journal case report's figure whose caption says what one image is becomes a teaching figure, as a MedPix
    figure is (kind, plane, the items of the teaching templates); a figure of panels keeps no kind."""
    from .factories import png

    raw = tmp_path / "raw"
    raw.mkdir()
    png(raw / "g1.png", size=64)
    png(raw / "g2.png", size=64)
    figs = [("F1", "Axial FLAIR MRI shows a large hyperintense mass in the right frontal lobe with surrounding oedema "
                   "and mass effect on the right lateral ventricle.", "g1"),
            ("F2", "(A) Axial T2 and (B) DWI of the same lesion.", "g2")]
    fig_xml = "".join(f'<fig id="{i}"><label>Figure</label><caption><p>{c}</p></caption>'
                      f'<graphic xlink:href="{g}"/></fig>' for i, c, g in figs)
    (raw / "a.nxml").write_text(
        '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="case-report"><front><article-meta>'
        '<article-id pub-id-type="doi">10.1/x</article-id><title-group><article-title>A frontal mass'
        '</article-title></title-group></article-meta></front><body><sec><title>Case report</title>'
        '<p>A 60-year-old man had headaches for two months.</p></sec>' + fig_xml + '</body></article>',
        encoding="utf-8")
    (case,) = _ingest("case-reports", raw, tmp_path / "out")
    assert [(f.kind, f.plane) for f in case.figures] == [("FLAIR", "axial"), (None, None)]
    case.diagnosis = Diagnosis(primary="glioblastoma")
    engine = Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                   knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                                   diagnoses=str(DIAGNOSES)))
    items, _ = engine.generate(_rendered(case))
    made = {i.template_id for i in items}
    assert "teaching_findings" in made and all(t.startswith("teaching_") for t in made), made
    assert all(i.images == [case.figures[0].path] for i in items)


def test_a_case_report_whose_figures_do_not_say_what_they_show_makes_no_image_item(tmp_path: Path) -> None:
    """A journal article whose only figure is of panels that could not be cut: the finding its text names is not
    keyed on that figure (which panel shows it is unknown), where a teaching file's figure of the same text is."""
    from curation.nlp.extract import Extractor

    from .factories import figure_case, png

    engine = Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                   knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                                   diagnoses=str(DIAGNOSES)))
    extractor = Extractor(str(ROOT / "templates" / "knowledge" / "lexicon.yaml"))
    made = {}
    for source in ("radiopaedia", "case-reports"):
        case = figure_case(1, dx="glioblastoma", source=source)
        case.figures[0].caption = "(A) Axial T2 and (B) FLAIR of the right frontal mass."
        case.figures[0].renders[0].path = png(tmp_path / "f.png")
        case.notes = "MRI showed a large enhancing mass in the right frontal lobe with surrounding oedema."
        case.findings = extractor.findings(case.notes, "notes")
        made[source] = [i.template_id for i in engine.generate(case)[0] if i.images]
    assert made["radiopaedia"] and not made["case-reports"], made


def test_diagnoses_by_one_name_and_differentials_as_whole_diagnoses() -> None:
    d = Diagnoses(DIAGNOSES)
    assert d.name("Brain biopsy confirmed patient has glioblastoma multiforme.") == "Glioblastoma"
    assert d.name("Cerebellar hemangioblastoma (WHO Grade I)") == "Haemangioblastoma"
    assert d.name("Acute Stroke, Hemorrhage in Basal Ganglia") == "Hypertensive intracerebral haemorrhage"
    assert d.name("Dilated Virchow Robin Space") == "Dilated perivascular spaces"
    assert d.name("an unremarkable study") is None
    text = ("•  Calvarial Hemangioma\n•  Eosinophilic Granuloma - wrong age group\n"
            "•  Metastasis - unlikely since there is preservation of the trabeculae\n"
            "and infections such as tuberculosis")
    # whole diagnoses by their one names; a fragment is never an option
    assert d.differential([text]) == ["Calvarial haemangioma", "Eosinophilic granuloma", "Cerebral metastasis"]
    assert d.structure("Early subacute hemorrhage involving the left thalamus and basal ganglia") == "thalamus"
    # a structure the finding acts on is not where it lies
    assert d.structure("mass exerting mass effect upon the 4th ventricle in the cerebellar vermis") == "cerebellum"


def _teaching(dx: str, caption: str, kind: str = "CT") -> Case:
    fig = Figure(figure_id="f01", caption=caption, modality=kind, kind=kind, plane="axial",
                 renders=[Render(plane="figure", role="figure", path="r/f01.png", target="figure")])
    return Case(case_id="medpix-t", source=SourceName.medpix, license="MedPix", figures=[fig],
                diagnosis=Diagnosis(primary=dx), presentation="A 40-year-old man with headache.")


@pytest.mark.parametrize(("dx", "caption", "want"), [
    ("Subdural haematoma", "Axial CT shows a crescent-shaped hyperdense collection in the left subdural space.",
     "Extra-axial (meninges, CSF spaces)"),
    ("Colloid cyst", "Noncontrast CT shows a rounded hyperdense mass in the anterior third ventricle.",
     "Intraventricular (within a ventricle)"),
    # the table says extra-axial, the caption puts it in the suprasellar region: two right answers, no item
    ("Epidermoid cyst", "CT shows a cystic suprasellar mass with extension to the right temporal tip.", None),
    # wide ventricles are no lesion in a compartment
    ("Obstructive hydrocephalus", "Severe dilation of the third and lateral ventricles, with a narrowed aqueduct.",
     None),
    # a caption that calls it extra-axial under an intra-axial diagnosis: the key is not the table's to give
    ("Glioblastoma", "Large heterogeneous extra-axial appearing mass with oedema in the left frontal lobe.", None),
])
def test_the_compartment_key_is_the_tables_where_the_caption_agrees(dx: str, caption: str, want: str | None) -> None:
    f: dict = {"image": {}}
    teaching_facts(f, _teaching(dx, caption), Diagnoses(DIAGNOSES), Counter())
    assert f.get("compartment") == want
    if want:
        assert len(f["compartment_options"]) == 4 and want not in f["compartment_options"]


def _figures(dx: str, figs: list[tuple[str, str]]) -> Case:
    made = [Figure(figure_id=f"f{n:02d}", caption=caption, modality="CT" if kind.startswith("CT") else "MR",
                   kind=kind, plane="axial", qc=FigureQC(width=512, height=512),
                   renders=[Render(plane="figure", role="figure", path=f"r/f{n:02d}.png", target="figure")])
            for n, (kind, caption) in enumerate(figs, 1)]
    return Case(case_id="medpix-t", source=SourceName.medpix, license="MedPix", figures=made,
                diagnosis=Diagnosis(primary=dx), presentation="A 60-year-old man with a week of confusion.")


def test_a_diagnosis_is_asked_only_of_images_that_can_tell_it() -> None:
    """A glioblastoma on T2 alone (the table: a post-contrast image tells it from its mimics) makes no diagnosis,
    rationale, consult or two-sequence facts, and says why; with a post-contrast T1 it does."""
    d = Diagnoses(DIAGNOSES)
    t2 = ("T2", "T2 weighted image: heterogeneous hyperintense mass with oedema in the left frontal lobe.")
    flair = ("FLAIR", "FLAIR image: hyperintense oedema around a mass in the left frontal lobe.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [t2, flair]), d, Counter())
    assert f["dx"] == "Glioblastoma" and "key_caption" in f  # the case's diagnosis and its findings stay
    for fact in ("dx_figures", "consult_figures", "pair_first"):
        assert fact not in f["image"], fact
    assert f["refused"] == {"image.dx_figures": "no_deciding_sequence", "image.consult_figures": "no_deciding_sequence",
                            "pair_reference": "no_deciding_sequence"}
    t1c = ("T1C", "T1 weighted image after gadolinium: irregular ring-enhancing mass in the left frontal lobe.")
    f = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [t2, t1c]), d, Counter())
    assert "refused" not in f
    assert [e["series_id"] for e in f["image"]["dx_figures"]][0] == "f02"  # the kind that tells it, first
    assert f["image"]["consult_figures"][0]["series_id"] == "f02"


def test_an_open_diagnosis_item_weighs_the_cases_own_differential(tmp_path: Path) -> None:
    """Where the case's author weighed the diagnosis against others, the reasoning and two-sequence items ask what
    else the reader would consider and list those in the reference; without a differential they ask the diagnosis
    alone. Either way the reference lets a reasoned answer weigh others the images leave open."""
    t2 = ("T2", "T2 weighted image: heterogeneous hyperintense mass with oedema in the left frontal lobe.")
    t1c = ("T1C", "T1 weighted image after gadolinium: irregular ring-enhancing mass in the left frontal lobe.")
    engine = Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                   knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                                   diagnoses=str(DIAGNOSES)))
    case = _figures("Glioblastoma", [t2, t1c])
    for fig in case.figures:  # the engine shows the renders it is given
        (tmp_path / f"{fig.figure_id}.png").write_bytes(b"")
        fig.renders[0].path = str(tmp_path / f"{fig.figure_id}.png")
    plain = {i.template_id: i for i in engine.generate(case)[0]}
    case.diagnosis.differential = ["Glioblastoma", "Metastasis", "Lymphoma"]
    weighed = {i.template_id: i for i in engine.generate(case)[0]}
    for template in ("teaching_rationale", "teaching_two_sequences"):
        assert "consider" not in plain[template].question and "consider" not in plain[template].reference_answer
        assert "What else would you consider" in weighed[template].question.replace("what else", "What else")
        assert "The case's own differential: Metastasis, Lymphoma." in weighed[template].reference_answer  # as named
        assert weighed[template].answer == plain[template].answer  # the key is the case's diagnosis still
        # an open diagnosis is graded on its leading diagnosis; a differential the images leave open is no error
        for item in (plain[template], weighed[template]):
            assert (item.reference_answer or "").endswith("may be weighed beside it.")


@pytest.mark.parametrize(("written", "want"), [
    ("Metastasis", "Metastasis"),  # of a skull lesion: not the table's "Cerebral metastasis"
    ("Less likely lymphoma?", "Lymphoma"),
    ("Cerebral abscess (unlikely)", "Cerebral abscess"),
    ("AV malformation", "AV malformation"),
    ("PNET", "PNET"),
    # slang, a shout, or two diagnoses in one: the table's name
    ("Mets", "Cerebral metastasis"),
    ("METASTASIS", "Cerebral metastasis"),
    ("Epidermoid/Ependymoma", "Epidermoid cyst"),
])
def test_a_differential_is_listed_by_the_name_its_case_used(written: str, want: str) -> None:
    from curation.generate.teaching import _as_written

    [(name, words)] = Diagnoses(DIAGNOSES).differential_as_written([written]).items()
    assert _as_written(words, name) == want


def test_a_withheld_diagnosis_leaves_its_key_slot_to_a_case_that_can_show_it() -> None:
    """Each diagnosis is the key of a few items at most; cases whose images cannot tell it do not use them up."""
    d, asked = Diagnoses(DIAGNOSES), Counter()
    t2 = ("T2", "T2 weighted image: heterogeneous hyperintense mass with oedema in the left frontal lobe.")
    t1c = ("T1C", "T1 weighted image after gadolinium: irregular ring-enhancing mass in the left frontal lobe.")
    for _ in range(4):
        teaching_facts({"image": {}}, _figures("Glioblastoma", [t2]), d, asked)
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [t2, t1c]), d, asked)
    assert f.get("dx_with_history") == "Glioblastoma" and "dx_figures" in f["image"]


def test_a_diagnosis_past_its_share_of_choice_items_is_still_asked_from_an_image_that_names_it() -> None:
    """Each diagnosis keys a few choice items with the history at most (MAX_SAME_DX); a fourth stroke whose caption
    names it is still asked from the images alone, a template whose keys are capped apart, once (MAX_SAME_DIRECT);
    a fifth, and one whose caption does not name it, make no choice item."""
    d, asked = Diagnoses(DIAGNOSES), Counter()
    dwi = ("DWI", "Diffusion weighted image shows restricted diffusion in the left MCA territory, an acute infarct.")
    plain = ("DWI", "Diffusion weighted image shows a wedge of restricted diffusion in the left MCA territory.")
    adc = ("ADC", "The ADC map shows low signal in the same wedge of the left MCA territory.")
    made = []
    for figs in ([plain, adc], [plain, adc], [plain, adc], [plain, adc], [dwi], [dwi]):
        f: dict = {"image": {}}
        teaching_facts(f, _figures("Acute ischaemic stroke", figs), d, asked)
        made.append("dx_direct" if "dx_direct" in f else "dx_with_history" if "dx_with_history" in f else None)
    assert made == ["dx_with_history"] * 3 + [None, "dx_direct", None]


def test_a_reference_that_describes_no_finding_is_not_made() -> None:
    """A diagnosis is graded against what its images' captions describe; captions that, read for these images, say
    only what they lack and conclude ("no abnormal enhancement; this is consistent with an arachnoid cyst") give no
    reference, and the report (about other slices) does not stand in for them."""
    d = Diagnoses(DIAGNOSES)
    for cyst, described in (("Cystic lesion anterior to the left temporal lobe, of CSF signal.", True),
                            # (said of every sequence, the sentence is not read as these images')
                            ("Cystic lesion anterior to the left temporal lobe, of CSF signal on all sequences.", False)):
        t1c = f"{cyst} Following gadolinium there is no abnormal enhancement. This is consistent with an arachnoid cyst."
        case = _figures("Arachnoid cyst", [("T2", cyst), ("T1C", t1c)])
        case.sections["findings"] = "Incidental left middle fossa arachnoid cyst. Sinusitis."
        f: dict = {"image": {}}
        teaching_facts(f, case, d, Counter())
        assert bool(f.get("dx_reference")) is described, f.get("dx_reference")
        assert described is ("Cystic lesion" in f.get("dx_reference", ""))


def test_a_structure_keyed_twice_leaves_the_majority_guesser_a_tie_on_both_items() -> None:
    """A structure is the key of a second item only where both its items offer a structure keyed as often: the
    majority-answer guesser, leaving each item out, otherwise finds the second item's key on the first (+0.10 over
    chance on the dev cases laid out as case reports)."""
    d, asked = Diagnoses(DIAGNOSES), Counter()
    made = []
    for where in ("temporal lobe, abutting the frontal lobe", "frontal lobe", "temporal lobe", "parietal lobe",
                  "temporal lobe"):
        f: dict = {"image": {}}
        caption = f"T1 weighted image after gadolinium shows an irregular ring-enhancing mass in the left {where}."
        teaching_facts(f, _figures("Glioblastoma", [("T1C", caption)]), d, asked)
        made.append((f.get("structure"), f.get("structure_options")))
    # the first temporal item offers no frontal lobe (its caption names it): the frontal key does not let a second
    # temporal key in; a parietal key, which both offer, does
    assert made[0] == ("temporal lobe", ["parietal lobe", "occipital lobe", "insula"])
    assert made[2] == (None, None)
    assert made[4][0] == "temporal lobe" and "parietal lobe" in made[4][1]


def test_figures_under_one_caption_are_asked_together() -> None:
    """Two to six figures whose author wrote one caption for them are one finding item (the first four shown), with
    that caption as the reference; a caption under more figures than that describes a series, not these images."""
    d = Diagnoses(DIAGNOSES)
    caption = "FLAIR images: hyperintense swollen cortex and oedema in the right medial temporal lobe and insula."
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Herpes simplex encephalitis", [("FLAIR", caption)] * 3), d, Counter())
    assert [e["series_id"] for e in f["image"]["group_figures"]] == ["f01", "f02", "f03"]
    assert f["group_caption"] == caption and f["group_image_count"] == "three images"
    assert "key_caption" not in f  # no one figure's own description
    assert f["structure"] == "temporal lobe" and len(f["image"]["structure_figures"]) == 3
    f = {"image": {}}
    teaching_facts(f, _figures("Herpes simplex encephalitis", [("FLAIR", caption)] * 7), d, Counter())
    assert "group_figures" not in f["image"]


def test_two_sequences_of_a_series_under_one_caption_are_a_pair_graded_by_what_both_show() -> None:
    """A caption written for a series of T2 and post-contrast T1 images (three figures) gives the two-sequence item
    one of each, graded by the sentences either kind shows, not by one about diffusion; a caption that describes
    only the oedema, not the lesion, gives none."""
    d = Diagnoses(DIAGNOSES)
    caption = ("Irregular ring-enhancing mass in the left parietal lobe on post-gadolinium T1 images, with "
               "surrounding T2 hyperintense oedema and mild midline shift. DWI shows no restricted diffusion.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [("T2", caption), ("T2", caption), ("T1C", caption)]), d, Counter())
    assert {f["image"]["pair_first"]["series_id"], f["image"]["pair_second"]["series_id"]} == {"f01", "f03"}
    assert f["pair_reference"].startswith("Both images: Irregular ring-enhancing mass")
    assert "diffusion" not in f["pair_reference"]
    oedema = "Extensive vasogenic oedema around it on T2 and after gadolinium."
    f = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [("T2", oedema), ("T2", oedema), ("T1C", oedema)]), d, Counter())
    assert "pair_first" not in f["image"]


@pytest.mark.parametrize(("caption", "findings", "want"), [
    ("DWI: abnormal hyperintense cortical ribbon of the right occipital lobe.", "", "occipital lobe"),
    # a finding taken on into a neighbouring structure spans both: either is a fair answer
    ("DWI: abnormal hyperintense cortical ribbon of the right occipital lobe with extension into the right posterior "
     "temporal lobe.", "", None),
    # the case's report puts its abnormality in a neighbour and never where the caption does
    ("T1: well defined water signal lesion in the inferior left frontal lobe.",
     "Small cystic lesion in the medial left temporal lobe with signal that follows CSF on all sequences.", None),
    ("T1: well defined water signal lesion in the inferior left frontal lobe.",
     "Small cystic lesion in the inferior left frontal lobe; a second one in the left temporal lobe.", "frontal lobe"),
    # the case joins the lobe and its neighbour in one word: a lesion across both, either a fair answer
    ("T1C: ring-enhancing cystic lesion in the left parietal lobe.",
     "Ring-enhancing lesion in the left frontoparietal region with surrounding oedema.", None),
    ("T1C: ring-enhancing cystic lesion in the left parietal lobe.",
     "Ring-enhancing lesion in the left parietal lobe; old infarct in the right temporo-occipital cortex.",
     "parietal lobe"),
])
def test_a_structure_is_asked_only_where_neither_the_caption_nor_the_report_disputes_it(
        caption: str, findings: str, want: str | None) -> None:
    f: dict = {"image": {}}
    case = _figures("Glioblastoma", [(caption.split(":")[0], caption)])  # the kind its caption names
    case.sections = {"findings": findings}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f  # the figure is described: the structure alone decides
    assert f.get("structure") == want


@pytest.mark.parametrize(("caption", "plane", "want"), [
    ("T2 weighted image: hyperintense mass with oedema in the left frontal lobe.", "axial", "Left"),
    ("T2 weighted image: abnormal hyperintensity of both thalami and the periaqueductal grey matter.", "coronal",
     "Both sides"),
    # a sagittal slice shows no side
    ("T2 weighted image: hyperintense mass with oedema in the left frontal lobe.", "sagittal", None),
    # capitalised sides, and the other side named as what the mass acts on: no key
    ("T2 weighted image: Right frontal haematoma with oedema and mass effect on the left lateral ventricle.", "axial",
     None),
    ("T2 weighted image: Right frontal haematoma with surrounding oedema.", "axial", "Right"),
    # "both" of tissues, not of sides
    ("T2 weighted image: expansile hyperintense lesion of the pons involving both grey and white matter.", "axial",
     None),
    # a mass of a midline structure has no one side, whichever way it extends; without a side it is on the midline
    ("T2 weighted image: cystic suprasellar mass with extension to the right temporal tip.", "axial", None),
    ("T2 weighted image: cystic hyperintense suprasellar mass, larger on the right.", "axial", None),
    ("T2 weighted image: abnormal signal in the interpeduncular cistern, extending 1.5 cm to the right.", "axial",
     None),
    ("T2 weighted image: rounded hyperintense mass in the anterior third ventricle.", "axial", "On the midline"),
    # the side of an extension is not where the finding lies
    ("T2 weighted image: abnormal signal in the interpeduncular cistern, extending toward the right.", "axial", None),
    # nor a second place's side: the first place named has none ("Left" here failed two clinical reads)
    ("T2 weighted image: expansile hyperintense mass of the clivus and a portion of the left petrous bone.", "axial",
     None),
    # two sides named, neither as the finding's one side: no key
    ("T2 weighted image: hyperintense oedema in the right temporal lobe and insula, right worse than left.", "axial",
     None),
])
def test_the_side_is_asked_only_where_the_figure_and_its_caption_show_one(caption: str, plane: str,
                                                                           want: str | None) -> None:
    f: dict = {"image": {}}
    case = _figures("Glioblastoma", [("T2", caption)])
    case.figures[0].plane = plane
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f  # the figure is described: the side alone decides
    assert f.get("side") == want
    if want:
        assert sorted([want, *f["side_options"]]) == ["Both sides", "Left", "On the midline", "Right"]
        assert [e["series_id"] for e in f["image"]["side_figures"]] == ["f01"]


def test_no_side_where_the_case_puts_its_findings_on_both_sides() -> None:
    """A case whose other captions put an abnormality on the other side (a second finding, or a source that
    contradicts itself) asks no side."""
    case = _figures("Hypertensive intracerebral haemorrhage", [
        ("CT", "Noncontrast CT: acute hyperdense haematoma in the right basal ganglia with surrounding oedema."),
        ("T2", "T2 weighted image: old haemorrhage with a hypointense rim in the left basal ganglia.")])
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f and "side" not in f
    del case.figures[1]
    f = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert f["side"] == "Right"


@pytest.mark.parametrize(("text", "want"), [
    ("Well defined water signal lesion in the inferior left frontal lobe.",
     "Well defined water signal lesion in the inferior frontal lobe."),
    ("Left frontal mass. R PCA territory infarct.", "Frontal mass. PCA territory infarct."),
    ("A right-sided mass, and a smaller one on the left.", "A mass, and a smaller one."),
    ("A left insular mass; e.g. left frontal.", "An insular mass; e.g. frontal."),
    # a direction, the two sides compared, or a panel is no side the finding lies on
    ("Midline shift to the right.", "Midline shift to the right."),
    ("Both the left and right thalami, left greater than right.", "Both the left and right thalami, left greater "
                                                                  "than right."),
    ("Extends from the left to the right hemisphere, slightly left of midline.",
     "Extends from the left to the right hemisphere, slightly left of midline."),
    ("Right-to-left shunt; L > R asymmetry; left image.", "Right-to-left shunt; L > R asymmetry; left image."),
])
def test_a_reference_under_sagittal_images_names_no_side(text: str, want: str) -> None:
    assert sideless(text) == want


@pytest.mark.parametrize(("caption", "score"), [
    ("Large enhancing mass without surrounding oedema.", 2),  # mass, enhancing; not the oedema it is without
    ("No haemorrhage, mass or infarct.", 0),
    ("Normal signal in the pons.", 0),
    ("A non-enhancing mass; no haemorrhage.", 1),
])
def test_a_caption_shows_what_it_names_and_does_not_negate(caption: str, score: int) -> None:
    assert caption_score(caption) == score


@pytest.mark.parametrize(("caption", "principal"), [
    # mass effect is what a lesion does, not a lesion
    ("Diffuse low attenuation in the temporal lobes. Mass effect is noted with left uncal herniation.",
     "Diffuse low attenuation in the temporal lobes."),
    # a lesion said without doubt before one it hedges
    ("There seems to be a hypodense centre in the mass. An obvious hyperdense mass in the posterior fossa.",
     "An obvious hyperdense mass in the posterior fossa."),
    # a lesion only supposed is not the principal finding
    ("Severe oedema, and signal in the right hemisphere may represent tumour extension. Increased white matter "
     "signal in the left frontoparietal region with mild midline shift.",
     "Increased white matter signal in the left frontoparietal region with mild midline shift."),
    # what a lesion does comes after the lesion
    ("Marked hydrocephalus with dilatation of the lateral ventricles. Hypodense regions in the centre of the mass.",
     "Hypodense regions in the centre of the mass."),
])
def test_the_principal_finding_is_a_lesion_said_without_doubt(caption: str, principal: str) -> None:
    from curation.generate.teaching import _finding_sentence

    assert _finding_sentence(caption) == principal


@pytest.mark.parametrize(("caption", "made"), [
    ("There seems to be a hypodense region in the centre of the mass.", False),
    ("Bilateral chronic subdural collections, with a focal high density suggestive of a recent bleed.", True),
])
def test_an_answer_the_caption_doubts_is_no_key(caption: str, made: bool) -> None:
    from curation.generate.teaching import _set_sure

    f: dict = {}
    _set_sure(f, "key_caption_first", caption)
    assert ("key_caption_first" in f) == made


@pytest.mark.parametrize(("caption", "dx", "plain"), [
    ("Periventricular lesions typical of multiple sclerosis.", "Multiple sclerosis", True),
    ("This may represent multiple sclerosis.", "Multiple sclerosis", False),  # a guess
    ("This may represent a variety of lesions: hypertensive small vessel ischemia; multiple sclerosis (MS); etc.",
     "Multiple sclerosis", False),  # a differential, not a reading of the image as one disease
    # a name of a group the disease shares with its mimics (an amyloid or a cavernoma bleed is a haemorrhagic stroke)
    ("Increased attenuation in the right basal ganglia is consistent with hemorrhagic stroke.",
     "Hypertensive intracerebral haemorrhage", False),
    ("Right putaminal bleed, consistent with a hypertensive hemorrhage.", "Hypertensive intracerebral haemorrhage",
     True),
])
def test_a_caption_reads_the_image_as_a_diagnosis_only_when_it_names_it_plainly(caption: str, dx: str,
                                                                                 plain: bool) -> None:
    from curation.generate.teaching import _names_plainly

    assert _names_plainly(caption, dx, Diagnoses(DIAGNOSES)) == plain


def test_a_broad_name_must_be_one_of_the_diagnosis_names(tmp_path: Path) -> None:
    table = tmp_path / "diagnoses.yaml"
    table.write_text("diagnoses:\n  Stroke A: {aka: [infarct], broad: [stroke], site: intra-axial, mimics: []}\n")
    with pytest.raises(ParamsError, match="broad names"):
        Diagnoses(table)


def test_a_reference_keeps_a_finding_said_beside_what_it_lacks() -> None:
    text = "Large mass in the left frontal lobe without surrounding oedema. No haemorrhage. Normal ventricles."
    assert visible_sentences(text, {"T2"}, negatives=False) == "Large mass in the left frontal lobe without " \
                                                                 "surrounding oedema."


def test_a_finding_item_on_a_sagittal_image_grades_no_side() -> None:
    """A single sagittal slice does not show the side: the reference of an item that shows only sagittal images
    keeps the finding and its place, not the side its caption names."""
    case = _figures("Dilated perivascular spaces", [
        ("T1", "T1 weighted image: well defined water signal lesion in the inferior left frontal lobe, consistent "
               "with a dilated perivascular space.")])
    case.figures[0].plane = "sagittal"
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "inferior frontal lobe" in f["key_caption"] and "left" not in f["key_caption"].lower()
    case.figures[0].plane = "axial"
    f = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "inferior left frontal lobe" in f["key_caption"]


ENHANCING_GBM = "Ring-enhancing mass with oedema in the left frontal lobe."


def test_compartment_keys_spread_over_the_compartments() -> None:
    """Intra-axial diseases are most of a teaching file: one compartment leads the others by one at most, beyond
    its share."""
    d, asked = Diagnoses(DIAGNOSES), Counter()
    keys = []
    for _ in range(4):
        f: dict = {"image": {}}
        teaching_facts(f, _teaching("Glioblastoma", ENHANCING_GBM, "CTC"), d, asked)
        keys.append(f.get("compartment"))
    assert keys == ["Intra-axial (brain parenchyma)"] + [None] * 3
    meningioma = "Large hyperdense extra-axial mass over the left convexity."
    for _ in range(2):
        teaching_facts({"image": {}}, _teaching("Meningioma", meningioma), d, asked)
    f = {"image": {}}
    teaching_facts(f, _teaching("Glioblastoma", ENHANCING_GBM, "CTC"), d, asked)
    assert f.get("compartment") == "Intra-axial (brain parenchyma)"


def test_medpix_layout_quarantines_bad_records(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "Case_topic.json").write_text(
        '[{"U_id": "MPX1", "MRI": ["MPX1_a"], "Case": {"Case Diagnosis": "Colloid cyst", "History": "Headache.",'
        ' "Findings": "N/A"}}, {"U_id": "MPX2", "Case": {"Title": 7}}, "not a record",'
        ' {"U_id": "MPX3", "Case": {"Case Diagnosis": "N/A", "Findings": "N/A"}}]')
    (raw / "Descriptions.json").write_text(
        '[{"U_id": "MPX1", "image": "MPX1_a", "Type": "MR", "Description": {"Modality": "MR - FLAIR",'
        ' "Plane": "Axial", "Caption": "A rounded mass at the foramen of Monro.", "Age": "40", "Sex": "female"}}]')
    (raw / "images" / "MPX1_a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (raw / "images" / "stray.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    report = run(IngestParams(max_failure_rate=1.0), "medpix", raw, tmp_path / "out")
    cases = list(read_jsonl(tmp_path / "out" / "cases.jsonl", Case))
    assert [c.diagnosis.primary for c in cases] == ["Colloid cyst"]
    fig = cases[0].figures[0]
    assert (fig.kind, fig.sequence, fig.plane) == ("FLAIR", "FLAIR", "axial")
    assert cases[0].patient.age == 40 and cases[0].patient.sex == "F"
    assert "findings" not in cases[0].sections  # "N/A" is no text
    assert "MPX1" in (cases[0].attribution or "") and "MedPix" in (cases[0].attribution or "")
    assert "Radiopaedia" not in (cases[0].attribution or "")
    rep = report.as_dict()
    assert rep["failures_by_reason"] == {"case_malformed": 2, "case_missing_field": 1}
    assert rep["skipped_by_reason"] == {"skipped:unreferenced_image": 1}


@pytest.mark.parametrize(("modality", "image_type", "caption", "kind"), [
    # a label that names no sequence: the caption's one kind (MedPix MPX2272, MPX2388)
    ("MRI", "MR", "Axial T1W MR after Gadolinium.\nOn the left, there is an extraaxial mass.", "T1C"),
    ("MR", "MR", "Infarcts in the left cerebellum can be clearly seen on this T1 weighted MRI.", "T1"),
    ("MR - Other Pulse Seq.", "MR", "MRV reveals a hypoplastic left internal jugular vein.", "MRA"),
    # a caption of two kinds, a kind of another modality, or a montage's caption: no kind
    ("MRI", "MR", "T1 and T2 weighted images demonstrate two lesions.", None),
    ("MRI", "MR", "Noncontrast CT shows a hyperdense mass.", None),
    ("MRI", "MR", "Sagittal T2 shows a syrinx.", None),  # another plane than the label's: another image
    ("CT - Montage", "CT", "Axial noncontrast CT shows a haemorrhage in the right occipital lobe.", None),
])
def test_a_medpix_image_whose_label_names_no_sequence_takes_its_captions_kind(
        tmp_path: Path, modality: str, image_type: str, caption: str, kind: str | None) -> None:
    raw = tmp_path / "raw"
    (raw / "images").mkdir(parents=True)
    (raw / "Case_topic.json").write_text(json.dumps(
        [{"U_id": "MPX1", "MRI": ["MPX1_a"], "Case": {"Case Diagnosis": "Epidermoid cyst", "History": "Headache."}}]))
    (raw / "Descriptions.json").write_text(json.dumps(
        [{"U_id": "MPX1", "image": "MPX1_a", "Type": image_type,
          "Description": {"Modality": modality, "Plane": "Axial", "Caption": caption}}]))
    (raw / "images" / "MPX1_a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    run(IngestParams(max_failure_rate=1.0), "medpix", raw, tmp_path / "out")
    fig = next(iter(read_jsonl(tmp_path / "out" / "cases.jsonl", Case))).figures[0]
    assert fig.kind == kind
    assert fig.plane == "axial"  # the label's plane stands


@needs_medpix
def test_medpix_dev_ingests_every_case_and_figure(tmp_path: Path) -> None:
    cases = _ingest("medpix", MEDPIX, tmp_path / "o")
    assert len(cases) == 77
    figs = [f for c in cases for f in c.figures]
    assert len(figs) == 278 and not any(f.missing for f in figs)
    assert sum(1 for f in figs if f.kind) >= 250
    assert all(c.source.value == "medpix" and "MedPix" in (c.attribution or "") for c in cases)


@pytest.mark.skipif(not (MEDPIX.is_dir() and JATS.is_dir()), reason="shared fixtures absent")
def test_every_template_on_every_real_case_skips_only_for_missing_data(tmp_path: Path) -> None:
    cases = _ingest("medpix", MEDPIX, tmp_path / "m") + _ingest("case-reports", JATS, tmp_path / "j")
    params = GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                            knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                            diagnoses=str(DIAGNOSES))
    engine = Engine(params)
    skipped: Counter[str] = Counter()
    made: Counter[str] = Counter()
    items_made: list = []
    for case in cases:
        items, why = engine.generate(_rendered(case))
        skipped.update(why)
        made.update(i.task_type.value for i in items if i.source.value == "medpix")
        items_made += items
        for i in items:
            assert all(Path(p).is_file() for p in i.images)
            if i.options:
                assert i.answer in i.options and len(set(i.options)) == len(i.options)
    errors = [k for k in skipped if "render_error" in k or "Error" in k]
    assert not errors, errors
    # the teaching templates make items of several task types from real cases
    assert len(made) >= 7 and sum(made.values()) >= 150, made
    # compartment keys spread: none is the key of more than a third of the compartment items
    keys = Counter(i.answer for i in items_made if i.template_id == "teaching_compartment")
    assert len(keys) >= 4 and max(keys.values()) <= sum(keys.values()) / 3, keys
    # a diagnosis is asked only of images that include a kind telling it from its mimics, where the table names one
    table = Diagnoses(DIAGNOSES)
    kinds = {(c.case_id, f.figure_id): f.kind for c in cases for f in c.figures}
    asked_dx = 0
    for i in items_made:
        entry = table.entry(i.facts.get("dx") or i.facts.get("dx_with_history") or i.facts.get("dx_direct"))
        if entry and entry.shown_by and i.source.value == "medpix":
            asked_dx += 1
            shown = {kinds[(i.case_id, e.series_id)] for e in i.evidence}
            assert shown & set(entry.shown_by), (i.template_id, i.case_id, shown, entry.shown_by)
    assert asked_dx >= 40
    assert skipped[Skip("teaching_diagnosis", "refused_image.dx_figures:no_deciding_sequence")] >= 3, skipped
    # the figures one caption was written for are shown together, and graded against that caption
    sets = [i for i in items_made if i.template_id == "teaching_findings_set"]
    assert len(sets) >= 8
    for i in sets:
        assert 2 <= len(i.images) <= 4


@needs_medpix
@pytest.mark.integration
def test_a_release_of_real_teaching_cases_credits_each_item_to_its_true_origin(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Items of real MedPix cases, released: each row carries its licence, an attribution naming its own origin (the
    MedPix case; never another site) and that origin. The real JATS case reports come without their figure files, so
    they make no image items: their cases are checked instead (the article's DOI as origin, its authors and DOI in the
    attribution, the licence the article states)."""
    from curation.release import read
    from curation.release.build import run as build

    from .factories import project_params, without_git, write_items

    monkeypatch.chdir(tmp_path)  # the release takes images from inside the project folder only
    for case in _ingest("case-reports", JATS, Path("j")):
        doi = case.publication.doi if case.publication else None
        assert doi and case.origin == f"https://doi.org/{doi}" and case.attribution
        assert f"doi:{doi}" in case.attribution and "Radiopaedia" not in case.attribution
        assert case.license == "CC BY-NC-ND 4.0"  # as each article's <license> states
    cases = _ingest("medpix", MEDPIX, Path("m"))[:8]
    engine = Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                   knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                                   diagnoses=str(DIAGNOSES)))
    items = []
    for case in cases:
        items += engine.generate(_rendered(case))[0]
    items = engine.finalize(items)
    for it in items:
        it.status, it.split = "kept", "test"
    write_items("review", items)
    with without_git():
        build(project_params().release.model_copy(update={"arrow_copy": False}), Path("review"), Path("releases"))
    rows = list(read.rows(Path("releases") / "neuro-bench-0.1.0"))
    origins = {c.case_id: c.origin for c in cases}
    assert len(rows) == len(items) >= 10
    for r in rows:
        uid = r.origin.removeprefix("MedPix ")
        assert r.origin == origins[r.case_id] and uid.startswith("MPX"), r.item_id
        assert r.license.startswith("MedPix terms") and r.license_class == "no_licence_stated"
        assert f"MedPix teaching case {uid}," in r.attribution and "Radiopaedia" not in r.attribution


@needs_medpix
def test_the_items_made_do_not_change_with_the_secret(tmp_path: Path) -> None:
    """Case ids are keyed hashes, so that under another project secret the cases come in another order; generation
    spreads each template's keys over the cases in the order it meets them, so it meets them in the source's own
    order (MedPix case numbers) and makes the same items whatever the secret (199 or 205 on the dev cases before),
    with the same options in the same places."""
    from curation.generate.stage import run as generate
    from curation.jsonio import write_jsonl

    cases = [_rendered(c) for c in _ingest("medpix", MEDPIX, tmp_path / "m")]
    ids = sorted(c.case_id for c in cases)
    params = GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                            knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                            diagnoses=str(DIAGNOSES))
    made = []
    for name, renamed in (("one", ids), ("other", ids[::-1])):  # another secret: the ids fall in another order
        src = tmp_path / name / "extract"
        again = sorted((c.model_copy(update={"case_id": renamed[ids.index(c.case_id)]}) for c in cases),
                       key=lambda c: c.case_id)  # as extract writes them
        write_jsonl(src / "cases.jsonl", again)
        generate(params, src, tmp_path / name / "generate")
        made.append(sorted((i["origin"], i["template_id"], i["answer"], i["options"], i["answer_index"])
                           for i in read_jsonl(tmp_path / name / "generate" / "items.jsonl")))
    assert len(made[0]) >= 150 and made[0] == made[1]


def test_no_option_is_the_key_or_another_option_in_more_words() -> None:
    from curation.generate.teaching import _distinct

    options = ["Isolated optic pathway glioma", "Optic pathway glioma", "Neurofibromatosis type 2", "Glioma"]
    assert _distinct(options, "Neurofibromatosis type 1") == ["Isolated optic pathway glioma",
                                                              "Neurofibromatosis type 2"]
    assert _distinct(["Optic pathway glioma", "Meningioma"], "Isolated optic pathway glioma") == ["Meningioma"]


_MOTOR = ["frontal lobe", "parietal lobe", "internal capsule", "basal ganglia", "thalamus"]


@pytest.mark.parametrize(("deficit", "made"), [
    ({"label": "weakness", "side": "right", "kind": "contralateral", "hemisphere": "left", "structures": _MOTOR}, True),
    ({"label": "aphasia", "side": None, "kind": "dominant", "hemisphere": "left",
      "structures": ["frontal lobe", "temporal lobe"]}, True),
    # a deficit on the lesion's own side is not explained by it: no item says that it is
    ({"label": "weakness", "side": "left", "kind": "contralateral", "hemisphere": "right", "structures": _MOTOR},
     False),
    # nor one its structure does not give (an occipital lesion, no hemiparesis)
    ({"label": "weakness", "side": "right", "kind": "contralateral", "hemisphere": "left",
      "structures": ["internal capsule"]}, False),
    (None, False),
])
def test_the_lesion_that_explains_the_deficit_is_asked_where_its_side_does(deficit: dict | None, made: bool) -> None:
    """A figure whose description puts its finding in one hemisphere on the side the history's deficit points to
    is asked which abnormality accounts for it, and why (a mechanism linking image and history)."""
    t2 = ("T2", "T2 weighted image: hyperintense mass with oedema in the left frontal lobe.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [t2]), Diagnoses(DIAGNOSES), Counter(), deficit)
    assert ("mechanism_figure" in f["image"]) == made
    if made:
        assert f["mechanism_finding"].startswith("T2 weighted image: hyperintense mass")
        assert f["mechanism_deficit"] == deficit


def test_a_figure_whose_side_the_case_contradicts_is_not_used() -> None:
    """A teaching case with another patient's images: two captions put the bleed in the left basal ganglia, one
    caption under two figures in the right (a caption under several figures counts once: two against one), so the
    figures of the side the others contradict are left out; on a tie, the side the history's deficit points to wins,
    and without one no figure naming a side is used."""
    left_a = ("FLAIR", "Appearance of left basal ganglia hemorrhage on axial FLAIR.")
    left_b = ("CT", "Focal high density in the region of the left basal ganglia with mass effect.")
    right = ("CT", "Increased attenuation in the right basal ganglia is consistent with hemorrhage.")
    d = Diagnoses(DIAGNOSES)
    case = _figures("Hypertensive intracerebral haemorrhage", [left_a, left_b, right, right])
    from curation.generate.teaching import _agreeing

    assert [g.figure_id for g in _agreeing(case.figures, case, d, None)] == ["f01", "f02"]
    case = _figures("Hypertensive intracerebral haemorrhage", [left_a, right, right])  # one caption each: a tie
    weakness = {"label": "weakness", "side": "right", "kind": "contralateral", "hemisphere": "left",
                "structures": ["basal ganglia", "internal capsule"]}
    assert [g.figure_id for g in _agreeing(case.figures, case, d, weakness)] == ["f01"]
    assert [g.figure_id for g in _agreeing(case.figures, case, d, None)] == []
    # the report's side comes first; a disease the case calls bilateral is no contradiction
    case.sections = {"findings": "Acute haemorrhage in the right basal ganglia."}
    assert [g.figure_id for g in _agreeing(case.figures, case, d, weakness)] == ["f02", "f03"]
    case.sections = {"findings": "Bilateral globus pallidus necrosis."}
    assert len(_agreeing(case.figures, case, d, None)) == 3


def test_a_ct_with_intravenous_contrast_is_named_so() -> None:
    """A caption's "CT performed with intravenous contrast" names a post-contrast CT: under a figure labelled so it
    agrees with its label (it did not, and a haemorrhage's one acute image was left out of every item)."""
    from curation.figure_kinds import kinds_named

    assert "CTC" in kinds_named("Axial CT performed with intravenous contrast demonstrates focal high density.")
    assert "CTC" not in kinds_named("Axial CT without intravenous contrast demonstrates focal high density.")


def test_a_disease_only_histology_tells_is_never_a_diagnosis_key() -> None:
    """A chordoid glioma (diagnoses.yaml ``histology``) is an enhancing third-ventricle mass that its mimics also are:
    its findings are asked, its diagnosis is not, and the report says why."""
    t1c = ("T1C", "T1 weighted image after gadolinium: homogeneously enhancing mass in the third ventricle.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Chordoid glioma", [t1c]), Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f
    assert not {"dx_with_history", "dx_direct", "dx_told_ok"} & set(f)
    assert f["refused"]["dx_with_history"] == "decided_by_histology"


def test_a_disease_defined_by_one_structure_is_asked_only_where_an_image_shows_it() -> None:
    """A Mondini deformity is an incompletely partitioned cochlea (diagnoses.yaml ``seen_in``); a dilated vestibule and
    canals are shared by its mimics: of images described by those alone no diagnosis item is made, and the report
    says why; where a described image names the cochlea, it is."""
    d = Diagnoses(DIAGNOSES)
    vestibule = ("CT", "Axial CT of the left temporal bone: the vestibule and the lateral semicircular canal are "
                       "dilated.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Mondini deformity", [vestibule, vestibule]), d, Counter())
    assert not {"dx", "dx_with_history", "dx_direct", "dx_told_ok"} & set(f)
    assert f["refused"]["dx_told_ok"] == "defining_structure_not_shown"
    cochlea = ("CT", "Axial CT of the left temporal bone: the cochlea is dysplastic, with an abnormal small apical "
                     "turn.")
    f = {"image": {}}
    teaching_facts(f, _figures("Mondini deformity", [cochlea, vestibule]), d, Counter())
    assert f["dx"] == "Mondini deformity" and "refused" not in f
    # (a disease the table names no such structure for is not refused for it)
    f = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [("T1C", "Axial T1 after contrast.")]), d, Counter())
    assert "defining_structure_not_shown" not in (f.get("refused") or {}).values()


def test_no_structure_where_the_description_places_a_second_lesion_elsewhere() -> None:
    """"Low attenuation focus in the left parietal lobe. Second lesion in the left temporal lobe": which one is
    principal is the reader's call (a clinical read found the temporal key, with parietal not offered, unfair)."""
    ct = ("CT", "CT: Low attenuation focus in the left parietal lobe with surrounding oedema. Second lesion in the "
                "left temporal lobe with central high attenuation.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [ct]), Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f and "structure" not in f


@pytest.mark.parametrize(("kind", "caption", "want"), [
    ("T1", "Coronal T1 shows a hyperintense left putamen, consistent with hyperglycaemic striatopathy.", "Whiter"),
    ("SWI", "Gradient echo image shows a low signal focus in the right thalamus from haemosiderin.", "Darker"),
    ("CT", "Noncontrast CT shows a crescent-shaped hyperdense collection in the left subdural space.", "Whiter"),
    # the brightness of a part (oedema, a rim) is not the abnormality's
    ("T2", "Large mass in the left frontal lobe with surrounding hyperintense oedema.", None),
    ("T2", "Cystic mass in the right cerebellum with a hypointense rim.", None),
    # two brightnesses on one image, a negated or a doubted one, or one between two grades: no key
    ("T1", "Mass in the vermis, hypointense, with a hyperintense focus of blood in the pons.", None),
    ("T2", "Mass in the left temporal lobe without hyperintense signal.", None),
    ("T2", "There may be a hyperintense lesion in the left thalamus.", None),
    ("T1", "Hypointense to isointense extra-axial mass over the planum sphenoidale.", None),
    # a dark finding beside it (air by a thin subdural) may be taken for the principal one
    ("CT", "CT shows a thin hyperdense subdural collection on the left. There is air in the subdural space.", None),
    # a post-contrast image's bright part is its enhancement, under any label
    ("T1C", "Post-gadolinium T1 shows a hyperintense mass in the left frontal lobe.", None),
    ("T1", "Post-contrast T1 shows a hyperintense mass in the left frontal lobe.", None),
    # another sequence's brightness: an infarct bright on DWI is dark on the ADC map under it
    ("ADC", "Hyperintense DWI signal in the left frontal lobe, an acute infarct.", None),
    ("T1", "T2 hyperintense lesion in the left frontal lobe, not seen on T1.", None),
    # "high T2 signal" and "low T1 signal" are brightnesses too: two of them, no key
    ("T2", "Mass in the left frontal lobe with high T2 signal and low signal in the right caudate.", None),
    ("CT", "Noncontrast CT shows a hypodense lesion in the left parietal lobe. No air.", "Darker"),
])
def test_the_brightness_of_a_finding_is_asked_where_its_caption_says_it_of_the_whole(kind: str, caption: str,
                                                                                     want: str | None) -> None:
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [(kind, caption)]), Diagnoses(DIAGNOSES), Counter())
    assert (f.get("signal") or "").split(" ")[0] == (want or "")
    if want:
        assert len(f["signal_options"]) == 1 and f["signal_options"][0] != f["signal"]
        assert f["image"]["signal_figure"]["series_id"] == "f01"


def test_no_brightness_is_asked_of_a_thumbnail() -> None:
    case = _figures("Glioblastoma", [("FLAIR", "Axial FLAIR shows a hyperintense lesion in the right frontal lobe.")])
    case.figures[0].qc = FigureQC(width=256, height=256)
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "key_caption" in f and "signal" not in f


def test_a_thumbnail_beside_a_full_size_figure_is_not_shown() -> None:
    """A case's 256-pixel thumbnail shows no finding where it has a full-size figure; a case of thumbnails keeps
    them. (Which sequence a thumbnail is may still be asked: that needs no finding read on it.)"""
    case = _figures("Glioblastoma", [("T2", "T2 weighted image: large hyperintense mass in the right frontal lobe."),
                                     ("FLAIR", "FLAIR image: large hyperintense mass in the right frontal lobe.")])
    case.figures[0].qc = FigureQC(width=256, height=256)
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    shown = {e["series_id"] for k, v in f["image"].items() if k != "kind_figure"
             for e in (v if isinstance(v, list) else [v])}
    assert shown and "f01" not in shown
    case.figures[1].qc = FigureQC(width=256, height=256)
    f = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "f01" in {e["series_id"] for k, v in f["image"].items() if k != "kind_figure"
                     for e in (v if isinstance(v, list) else [v])}


def test_brightness_keys_stay_within_one_of_each_other() -> None:
    """Bright findings are the commoner: a second "brighter" key waits for a "darker" one."""
    asked: Counter[str] = Counter()
    bright = "Axial FLAIR shows a hyperintense lesion in the right frontal lobe white matter."
    made = []
    for caption in (bright, bright, "Axial T1 shows a hypointense lesion in the left parietal lobe.", bright):
        f: dict = {"image": {}}
        teaching_facts(f, _figures("Glioblastoma", [("FLAIR" if "FLAIR" in caption else "T1", caption)]),
                       Diagnoses(DIAGNOSES), asked)
        made.append((f.get("signal") or "-").split(" ")[0])
    assert made == ["Whiter", "-", "Darker", "Whiter"]


@pytest.mark.parametrize(("dx", "history"), [
    ("Idiopathic intracranial hypertension", "Obese woman with headache. Moderate optic disk edema 360 degrees OU."),
    ("Methanol poisoning", "Alcoholic man found down. Profound metabolic acidosis and bilateral blindness."),
    ("Acute ischaemic stroke", "Worst headache of his life. TTE and TEE both showed no clots."),
])
def test_a_history_that_gives_the_diagnosis_away_is_told_with_no_diagnosis_item(dx: str, history: str) -> None:
    assert Diagnoses(DIAGNOSES).given_by(dx, history)


def test_a_non_enhancing_finding_under_a_label_that_shows_none_is_shown() -> None:
    case = _figures("Low-grade glioma", [("FLAIR", "Non-enhancing hyperintense mass in the right temporal lobe."),
                                         ("T2", "T2 weighted image: hyperintense mass in the right temporal lobe.")])
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "f01" in {e["series_id"] for e in f["image"]["dx_figures"]}


def test_an_enhancement_said_under_a_label_that_shows_none_is_not_shown() -> None:
    """A figure labelled non-contrast CT whose caption's principal finding is a ring-enhancing lesion is mislabelled
    or miscaptioned: no item shows it (it was a post-contrast T1 MRI in a clinical read)."""
    case = _figures("Neurocysticercosis", [("T2", "Well demarcated round cystic lesion in the right temporal lobe, "
                                                  "with mild perilesional oedema."),
                                           ("CT", "Round, smooth ring-enhancing lesion with a thin rim.")])
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    shown = {e["series_id"] for k, v in f["image"].items() if k != "kind_figure"
             for e in (v if isinstance(v, list) else [v])}
    assert "f01" in shown and "f02" not in shown


def test_a_differential_names_a_disease_where_the_cases_lies() -> None:
    """A skull lesion's differential "metastasis" is offered as a skull metastasis, not the table's cerebral one."""
    case = _figures("Eosinophilic granuloma", [("CT", "Axial CT in bone window shows a lytic lesion with bevelled "
                                                      "edges in the right parietal bone.")])
    case.diagnosis.differential = ["Metastasis\nMultiple myeloma\nOsteomyelitis"]
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "Skull metastasis" in f["dx_options"] and "Cerebral metastasis" not in f["dx_options"]
    # a metastasis the caption itself entertains is a second right answer, by that name too
    case.figures[0].caption += " This may represent metastasis or myeloma."
    f = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert "Skull metastasis" not in f["dx_options"]


@pytest.mark.parametrize(("caption", "made"), [
    ("Large dural based extra-axial mass over the left frontal lobe, with extensive vasogenic oedema.", True),
    # what the mass does, and not the mass: nothing of what tells a meningioma is described
    ("Note the extensive intraaxial vasogenic oedema in the left frontal lobe, with subfalcine herniation.", False),
])
def test_two_images_under_one_caption_are_asked_together_where_it_names_the_lesion(caption: str, made: bool) -> None:
    case = _figures("Meningioma", [("T2", caption), ("T1C", caption)])
    f: dict = {"image": {}}
    teaching_facts(f, case, Diagnoses(DIAGNOSES), Counter())
    assert ("pair_reference" in f) == made


def test_two_images_under_one_caption_are_asked_together_where_it_says_where_the_lesion_lies() -> None:
    """A DWI and its ADC map under "a corresponding focus of restricted diffusion" (a real MedPix caption): with a
    history of sudden hemiparesis, the reference without a place left the history all the answer (a clinical read)."""
    d = Diagnoses(DIAGNOSES)
    said = ("Diffusion weighted and associated ADC map axial MR images show a corresponding focus of restricted "
            "diffusion, consistent with an acute infarct.")
    for caption, made in ((said, False), (said.replace("diffusion, consistent", "diffusion in the right frontal "
                                                                                 "lobe, consistent"), True)):
        f: dict = {"image": {}}
        teaching_facts(f, _figures("Acute ischaemic stroke", [("DWI", caption), ("ADC", caption)]), d, Counter())
        assert ("pair_reference" in f) == made, caption


def test_a_disease_one_image_decides_is_asked_of_one_image() -> None:
    f: dict = {"image": {}}
    asked: Counter[str] = Counter({"direct:Colloid cyst": 1})  # its one image-only item already made
    teaching_facts(f, _figures("Colloid cyst", [("CT", "Noncontrast CT shows a rounded hyperdense mass in the "
                                                       "anterior third ventricle.")]), Diagnoses(DIAGNOSES), asked)
    assert f.get("dx_with_history") == "Colloid cyst"


def test_a_choice_among_mimics_is_not_asked_of_one_image() -> None:
    """One post-contrast slice of a cystic sellar mass does not tell a craniopharyngioma from an adenoma: no
    diagnosis choice of one image and no reasoning to it (the consult, graded against the case's differential,
    stays); with a second image both are asked. A disease one image decides is reasoned out from one image."""
    d = Diagnoses(DIAGNOSES)
    t1c = ("T1C", "Axial T1 weighted image after gadolinium: partially cystic enhancing suprasellar mass.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Craniopharyngioma", [t1c]), d, Counter())
    assert "dx_with_history" not in f and f["refused"]["dx_with_history"] == "one_image"
    assert "dx_reference" not in f and f["refused"]["dx_reference"] == "one_image"
    assert "dx_figures" in f["image"] and f.get("dx_told_ok") and "consult_caption" in f
    ct = ("CT", "Noncontrast CT shows a suprasellar mass with peripheral calcification.")
    f = {"image": {}}
    teaching_facts(f, _figures("Craniopharyngioma", [t1c, ct]), d, Counter())
    assert f["dx_with_history"] == "Craniopharyngioma" and f["dx_reference"]
    f = {"image": {}}
    teaching_facts(f, _figures("Colloid cyst", [("CT", "Noncontrast CT shows a rounded hyperdense mass in the "
                                                       "anterior third ventricle.")]), d, Counter())
    assert f["dx_reference"].startswith("First image: Noncontrast CT shows a rounded hyperdense mass")


@pytest.mark.parametrize("caption", [
    "CT s/p MVC shows a biconvex hyperdense collection over the left temporal lobe.",
    "No postoperative change. Biconvex hyperdense collection over the left temporal lobe.",
])
def test_a_trauma_or_a_negated_operation_is_no_image_after_treatment(caption: str) -> None:
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Epidural haematoma", [("CT", caption)]), Diagnoses(DIAGNOSES), Counter())
    assert "postoperative_images" not in (f.get("refused") or {}).values()


def test_an_image_before_treatment_that_describes_nothing_does_not_hide_the_one_after() -> None:
    d = Diagnoses(DIAGNOSES)
    case = _figures("Oligodendroglioma", [("CT", "Postoperative CT demonstrates a mass with coarse calcifications in "
                                                 "the right temporal lobe."), ("T2", "Preoperative MRI of the brain.")])
    f: dict = {"image": {}}
    teaching_facts(f, case, d, Counter())
    assert f["refused"]["dx"] == "postoperative_images" and "key_caption" in f


def test_images_after_surgery_make_no_diagnosis_item() -> None:
    """A postoperative CT shows what surgery left (air, a cavity), not the disease as diagnosed: a case of such images
    makes no diagnosis item and says why (its findings are still asked); beside a preoperative image it is left out."""
    d = Diagnoses(DIAGNOSES)
    postop = ("CT", "Postoperative CT demonstrates a mass with coarse calcifications in the right temporal lobe.")
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Oligodendroglioma", [postop]), d, Counter())
    assert f["refused"]["dx_told_ok"] == "postoperative_images" and "dx" not in f
    assert "key_caption" in f
    before = ("CT", "Noncontrast CT shows a right temporal mass with coarse chunky calcifications and mild oedema.")
    f = {"image": {}}
    teaching_facts(f, _figures("Oligodendroglioma", [postop, before]), d, Counter())
    assert [e["series_id"] for e in f["image"]["dx_figures"]] == ["f02"]
    irradiated = ("T1C", "Ring-enhancing lesion at the site of the glioma, previously treated with radiation.")
    f = {"image": {}}
    teaching_facts(f, _figures("High-grade glioma", [irradiated]), d, Counter())
    assert f["refused"]["dx_told_ok"] == "postoperative_images"


@pytest.mark.parametrize(("caption", "want"), [
    ("Axial T1 after gadolinium: irregular ring-enhancing lesion in the left parietal lobe.",
     "Enhancement of a rim around a dark centre"),
    ("Sagittal post-gad T1: large heterogeneously enhancing solid mass in the cerebellar vermis.",
     "Uneven, patchy enhancement of the lesion"),
    ("Post-gadolinium T1: homogeneously enhancing mass in the region of the third ventricle.",
     "Even enhancement of the whole lesion"),
    ("T1 after gadolinium: large cystic mass in the right cerebellar hemisphere with an enhancing mural nodule.",
     "An enhancing nodule in the wall of a cyst"),
    ("T1 after gadolinium: hypointense mass with irregular borders in the left cerebellopontine angle. There is no "
     "enhancement.", "No enhancement anywhere in the lesion"),
    # two patterns, or one beside words that make it another: two answers, no item
    ("T1 after gadolinium: non-enhancing cystic lesion in the left parietal lobe, with enhancement around it.", None),
    ("T1 after gadolinium: heterogeneously enhancing necrotic mass in the left frontal lobe.", None),
    # a ring with its dark centre is one pattern
    ("T1 after gadolinium: ring-enhancing mass with a non-enhancing necrotic centre in the left parietal lobe.",
     "Enhancement of a rim around a dark centre"),
    # a pattern doubted or denied, said of the meninges beside the lesion, a nodule of no cyst, or no pattern said
    ("T1 after gadolinium: possible ring enhancement of a lesion in the left frontal lobe.", None),
    ("T1 after gadolinium: mass in the left frontal lobe. Possible ring enhancement.", None),
    ("T1 after gadolinium: mass in the left frontal lobe, with no evidence of ring enhancement.", None),
    ("T1 after gadolinium: hypointense mass in the left frontal lobe, with no enhancement of the adjacent meninges.",
     None),
    ("T1 after gadolinium: multiple enhancing nodules at the grey-white junction of the left frontal lobe.", None),
    ("T1 after gadolinium: non-homogeneously enhancing mass in the left frontal lobe.", None),
    ("T1 after gadolinium: intensely enhancing mass in the left frontal lobe.", None),
    # a mass at the periphery, not a rim
    ("T1 after gadolinium: peripheral enhancing mass, dural based, over the left frontal lobe.", None),
])
def test_how_a_lesion_enhances_is_asked_where_its_caption_says_one_pattern(caption: str, want: str | None) -> None:
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [("T1C", caption)]), Diagnoses(DIAGNOSES), Counter())
    assert f.get("enhancement") == want
    if want:
        assert len(f["enhancement_options"]) == 4 and want not in f["enhancement_options"]
        assert f["enhancement_kind_name"] == "T1-weighted MRI after gadolinium"
        assert f["image"]["enhancement_figure"]["series_id"] == "f01"


def test_enhancement_keys_spread_over_the_patterns() -> None:
    """No pattern is keyed more than one above the mean of the five: ring-enhancing cases after ring-enhancing cases
    make items only while the others keep up."""
    d = Diagnoses(DIAGNOSES)
    ring = ("T1C", "Axial T1 after gadolinium: irregular ring-enhancing lesion in the left parietal lobe.")
    asked: Counter[str] = Counter()
    made = 0
    for _ in range(4):
        f: dict = {"image": {}}
        teaching_facts(f, _figures("Glioblastoma", [ring]), d, asked)
        made += "enhancement" in f
    assert made == 1 and asked["enhancement:ring"] == 1
    # once the others have caught up (one ring, three more keys: a second ring is one above the mean of five), it is
    asked.update({"enhancement:none": 1, "enhancement:nodule": 1, "enhancement:homogeneous": 1})
    f = {"image": {}}
    teaching_facts(f, _figures("Glioblastoma", [ring]), d, asked)
    assert "enhancement" in f and asked["enhancement:ring"] == 2


@pytest.mark.parametrize(("caption", "abnormal"), [
    # the signs that name a cavernous malformation (MedPix MPX2532's own captions, and the usual wording)
    ("GRE image demonstrates magnetic susceptibility blooming due to the presence of hemosiderin.", True),
    ("On T2 this lesion looks like a piece of popcorn.", True),
    ("Filling defect in the superior sagittal sinus consistent with thrombus.", True),
    ("Ring-like collection consistent with abscess.", True),
    ("Chronic encephalomalacia and gliosis of the left frontal lobe.", True),
    # a sequence's name is no finding, nor is an absent sign
    ("Susceptibility-weighted image at the level of the basal ganglia.", False),
    ("No evidence of thrombus.", False),
])
def test_the_signs_a_caption_names_are_read_as_findings(caption: str, abnormal: bool) -> None:
    """A caption that names a sign (blooming, hemosiderin, popcorn, thrombus, abscess, gliosis) describes an
    abnormality; one that names only a sequence, or denies the sign, does not."""
    assert (caption_score(caption) >= 1) is abnormal, caption


@pytest.mark.parametrize(("sentence", "structure"), [
    ("Enhancing mass in the left cavernous sinus.", "cavernous sinus"),
    ("Expansile lesion of the right petrous apex.", "petrous apex"),
    ("Extra-axial mass in the midline of the planum sphenoidale.", "anterior cranial fossa"),
    ("Markedly increased fluid in the optic nerve sheaths.", "orbit"),
    ("Haemorrhage in the basal cisterns.", "subarachnoid space"),
    ("Filling defect in the superior sagittal sinus.", "dural venous sinuses"),
    ("Lesion in the left lateral geniculate body.", "lateral geniculate body"),
    ("Intradural mass at the level of the conus medullaris.", "spinal cord"),
    ("Herniation of the L5-S1 intervertebral disc.", "intervertebral disc"),
    # the optic disc is the eye's, not the spine's
    ("Swelling of the optic disc.", None),
    # a structure named before the lesion, as radiology writes a place
    ("Contrast enhanced axial MRI showing a partially cystic suprasellar mass.", "sella and suprasellar cistern"),
    ("Acute left thalamic haemorrhage.", "thalamus"),
    ("Crescent-shaped subdural collection.", "subdural space"),
    ("Temporal bone lesion.", None),
    # the place named first is the lesion's; a denied lesion, or a structure the lesion obstructs, is none
    ("Acute left thalamic haemorrhage with blood layering in the occipital horns.", "thalamus"),
    ("Pineal region mass with obstruction of the cerebral aqueduct.", "pineal region"),
    ("Enhancing extra-axial mass with no subdural collection.", None),
])
def test_a_finding_is_placed_in_the_structures_of_the_whole_head_and_spine(sentence: str,
                                                                            structure: str | None) -> None:
    """The structure table knows the skull base, the meninges and CSF spaces, the venous sinuses, the visual
    pathway and the spine, not only the brain's lobes and ventricles; a word that names two things ("disc") is not
    read as either."""
    assert Diagnoses(DIAGNOSES).structure(sentence) == structure


_MASS = "T2 weighted image: large heterogeneous mass in the left frontal lobe"


@pytest.mark.parametrize(("dx", "captions", "effects"), [
    ("Glioblastoma", [("T2", f"{_MASS} causing midline shift and subfalcine herniation.")], ["Midline shift"]),
    ("Medulloblastoma", [("CT", "CT: hyperdense mass in the fourth ventricle with obstructive hydrocephalus and "
                                "transependymal oedema.")], ["Hydrocephalus", "Transependymal oedema"]),
    ("Hypertensive intracerebral haemorrhage", [("CT", "CT: acute haemorrhage in the left thalamus extending into the "
                                                       "third and lateral ventricles.")],
     ["Intraventricular extension"]),
    ("Cerebral metastasis", [("T2", "T2: round mass in the right parietal lobe with surrounding vasogenic oedema.")],
     ["Vasogenic oedema"]),
    # oedema beside the disease the sentence names, not oedema alone
    ("Meningioma", [("T2", "T2: extensive vasogenic oedema of the left frontal lobe from this meningioma.")],
     ["Vasogenic oedema"]),
    ("Meningioma", [("T2", "T2: extensive vasogenic oedema of the left frontal lobe.")], []),
    # said of the lesion, not of what it does: denied, doubted, or a tumour's own growth into a ventricle; oedema
    # that is the disease (foci of PRES) and not around a lesion
    ("Posterior reversible encephalopathy syndrome", [("FLAIR", "FLAIR: hyperintense foci in both occipital lobes "
                                                                "with a vasogenic oedema pattern.")], []),
    ("Glioblastoma", [("T2", f"{_MASS}, without midline shift.")], []),
    ("Glioblastoma", [("T2", f"{_MASS}; possible early hydrocephalus.")], []),
    ("Central neurocytoma", [("T2", "T2 weighted image: lobulated mass in the septum pellucidum extending into the "
                                    "lateral ventricles.")], []),
    # slight: one slice need not show it (but slight oedema on T2 and FLAIR, which show it); a herniation beside
    # another effect (its level need not be on the slice)
    ("Glioblastoma", [("CT", "CT: hypodense mass in the left frontal lobe with mild midline shift.")], []),
    ("Cerebral metastasis", [("T2", "T2: round mass in the right parietal lobe with mild surrounding oedema.")],
     ["Vasogenic oedema"]),
    ("Glioblastoma", [("T2", f"{_MASS} causing subfalcine and transtentorial herniation.")], []),
    # nor where the caption says, in another sentence, an effect no item may ask: the reference would leave it out
    ("Meningioma", [("T2", "T2: extra-axial mass with extensive surrounding vasogenic oedema. The swelling is causing "
                           "subfalcine and transtentorial herniation.")], []),
    # "mass effect" alone names no effect a reader can grade
    ("Glioblastoma", [("T2", f"{_MASS} and mass effect.")], []),
    # the disease's own sign is no complication: a hydrocephalus case's hydrocephalus and its transependymal oedema,
    # a Chiari malformation's tonsils, diffuse oedema's herniation
    ("Obstructive hydrocephalus", [("CT", "CT: marked hydrocephalus of the lateral and third ventricles with "
                                          "transependymal oedema; the fourth ventricle is normal.")], []),
    ("Chiari I malformation", [("T1", "Sagittal T1: tonsillar herniation through the foramen magnum with a syrinx.")],
     []),
    ("Hypoxic-ischaemic encephalopathy", [("CT", "CT: loss of grey-white differentiation with effacement of the "
                                                 "basal cisterns and descending transtentorial herniation.")], []),
])
def test_what_a_lesion_does_around_it_is_asked_with_its_mechanism(dx: str, captions: list[tuple[str, str]],
                                                                 effects: list[str]) -> None:
    """A focal lesion's complication that a caption says (hydrocephalus, midline shift, herniation, a haemorrhage
    broken into the ventricles) is asked with the reason it comes about; not one denied or doubted, a tumour's own
    growth, a vague "mass effect", or the disease's own sign."""
    f: dict = {"image": {}}
    teaching_facts(f, _figures(dx, captions), Diagnoses(DIAGNOSES), Counter())
    assert [r.split(":")[0] for r in f.get("complication_reasons", [])] == effects
    assert ("complication_figures" in f["image"]) == bool(effects)


def test_a_complication_is_asked_of_the_figures_its_caption_was_written_for() -> None:
    """A caption under two figures of two kinds shows both; under three of a series (whose caption no one slice need
    show whole), none."""
    caption = "Extra-axial mass over the left convexity. The oedema around it is causing subfalcine herniation."
    d = Diagnoses(DIAGNOSES)
    f: dict = {"image": {}}
    teaching_facts(f, _figures("Meningioma", [("T2", caption), ("T1C", caption)]), d, Counter())
    assert [e["series_id"] for e in f["image"]["complication_figures"]] == ["f01", "f02"]
    assert [r.split(":")[0] for r in f["complication_reasons"]] == ["Midline shift"]
    f = {"image": {}}
    teaching_facts(f, _figures("Meningioma", [("T2", caption), ("T2", caption), ("T1C", caption)]), d, Counter())
    assert "complication_figures" not in f["image"]


def test_a_vertebral_artery_figure_is_no_spine_image() -> None:
    """The vertebral artery and the cervical carotid are vessels of the neck: a dissection's angiogram is used; a
    figure of the cervical spine is still left out of a brain case."""
    from curation.generate.teaching import SPINE

    assert not SPINE.search("MIP of the neck vessels: occlusion of the right vertebral artery")
    assert not SPINE.search("dissection of the cervical internal carotid artery")
    assert SPINE.search("Sagittal T2 of the cervical spine") and SPINE.search("C2 vertebral body fracture")


@pytest.mark.parametrize(("caption", "full"), [
    ("T2: heterogeneous mass with oedema in the left frontal lobe.", True),  # two abnormality words and a place
    ("Noncontrast CT shows hypodensity in L parietal lobe with surrounding oedema.", True),
    # thin, as clinical reads found: no place, too few words, or one abnormality word however long the sentence
    ("Large left parietal mass", False),
    ("Signs of cerebellar infarction on CT", False),
    ("Axial T2 MRI demonstrates ventricular enlargement with no evidence of transependymal flow.", False),
    ("Basically normal - arguable subtle loss of gray matter intensity in the right occipital and posterior temporal "
     "region.", False),
    ("Infarcts in the left cerebellum in the PICA distribution can be clearly seen on this T1 weighted MRI.", False),
])
def test_a_reference_says_what_where_and_how(caption: str, full: bool) -> None:
    """A caption is a reference for a findings item where it says what the finding is, where it lies and how it
    appears: two abnormality words and a place in seven words or more."""
    from curation.generate.teaching import _full

    assert _full(caption, Diagnoses(DIAGNOSES)) == full


@pytest.mark.parametrize(("dx", "caption", "effects"), [
    ("Glioblastoma", "CT: left frontal mass. Status post shunt for hydrocephalus.", []),
    ("Glioblastoma", "CT: left frontal mass; the hydrocephalus has since resolved.", []),
    ("Glioblastoma", "CT: left frontal mass. There is no significant mass effect on the adjacent lateral ventricle or "
                     "midline shift.", []),
    ("Glioblastoma", "T2: left frontal mass with little surrounding edema for its size.", []),
    ("Glioblastoma", "CT: left temporal mass; the patient is at risk of uncal herniation.", []),
    ("Glioblastoma", "CT: left frontal mass. Midline shift is minimal.", []),
    ("Medulloblastoma", "CT: vermian mass with upward transtentorial herniation of the vermis.", []),
    ("Acute ischaemic stroke", "CT: right cerebellar infarct with downward herniation of the cerebellar tonsils.",
     ["Tonsillar herniation"]),
    ("Acute ischaemic stroke", "T2: cerebellar infarct with surrounding edema.", []),
    ("Acute ischaemic stroke", "CT: old left MCA infarct with hydrocephalus ex vacuo.", []),
    ("Meningioma", "T1C: convexity meningioma. Incidental hydrocephalus from long-standing aqueductal stenosis.", []),
    ("Cerebral metastasis", "CT: haemorrhagic metastasis extending into the frontal horn.", []),
    ("Subdural haematoma", "CT: interhemispheric subdural haematoma in the subfalcine space.", []),
    ("Subarachnoid haemorrhage", "CT: blood fills and effaces the sulci of both convexities.", []),
    ("Ependymoma", "T2: fourth ventricular mass with transependymal extension into the cerebellar white matter.", []),
    ("Normal pressure hydrocephalus", "FLAIR: ventriculomegaly with effacement of the high convexity sulci.", []),
    ("Glioblastoma", "Postoperative CT: resection cavity with pneumocephalus and 8 mm midline shift.", []),
])
def test_an_effect_is_asked_only_as_there_now_and_of_the_lesion(dx: str, caption: str, effects: list[str]) -> None:
    """What a hostile reading found: an effect treated, resolved, denied further back than a negation reaches, slight,
    expected, upward, of an infarct's own oedema, ex vacuo, incidental, a tumour's growth, a place named subfalcine,
    filled sulci, a tumour's spread, a disease with no focal lesion, or after surgery is no complication asked; tonsils
    herniating downward are tonsillar."""
    kind = caption.split(":")[0].split()[-1]
    f: dict = {"image": {}}
    teaching_facts(f, _figures(dx, [(kind, caption)]), Diagnoses(DIAGNOSES), Counter())
    assert [r.split(":")[0] for r in f.get("complication_reasons", [])] == effects
