"""The facts a teaching case gives (a case whose figures say what they are: MedPix, and any source whose
ingest fills ``Figure.kind``): its diagnosis by its one name, the whole diagnoses its differential weighs, where the
disease lies, and the figures an item shows, chosen by what their captions say they show.

A figure is chosen for a finding only when its caption describes something abnormal (a lesion, a signal or density
change, a malformation) and is not a montage, a drawing, an angiogram (unless the disease is vascular), a spine
image (unless the disease is spinal), a thumbnail beside full-size figures, or an image after surgery or radiation
beside images before it (a case shown only after treatment is asked its findings, not its diagnosis). The caption is
then what the image shows, in its author's words: the reference an open answer is graded against."""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from curation.figure_kinds import all_kinds, kind_name, kinds_named
from curation.generate.presentation import deid_artefacts
from curation.nlp.context import Context
from curation.nlp.diagnoses import Diagnoses, DiagnosisEntry, fold
from curation.schema import Case, Evidence, Figure

# what a caption says when it shows an abnormality (one sentence at a time; what the sentence negates is not shown:
# ConText's negation, curation.nlp.context)
ABNORMAL = re.compile(
    r"\b(lesions?|mass(es)?|tumou?rs?|hyperintens\w*|hypointens\w*|hyperdens\w*|hypodens\w*|hypoattenuat\w*|"
    r"hyperattenuat\w*|enhanc\w*|infarct\w*|ha?emorrhag\w*|ha?ematoma|o?edema|cyst\w*|restrict\w*|dilat\w*|"
    r"enlarge\w*|herniat\w*|fractur\w*|atroph\w*|calcifi\w*|abnormal\w*|thicken\w*|displac\w*|malformation|"
    r"ectopia|hydrocephalus|narrow\w*|stenosis|occlu\w*|aneurysm\w*|expansi\w*|destruct\w*|eros\w*|"
    r"agenesis|hypoplas\w*|absen\w*|signal|shortening|prolongation|collection|fluid|necro\w*|blood|focus|foci|"
    r"nodul\w*|deform\w*|compress\w*|effac\w*|shift|lucen\w*|sclero\w*|attenuation|widen\w*|ectop\w*|"
    r"intensity|density|lysis|osteoly\w*|loss|bloom\w*|ha?emosiderin|popcorn|thromb(?:us|i|osis|osed)|dissect\w*|"
    r"pseudoaneurysm\w*|abscess\w*|ischa?emi\w*|gliosis|encephalomalaci\w*|leukomalaci\w*|demyelinat\w*|plaques?|"
    r"ventriculomegaly|pneumocephal\w*|siderosis|embol(?:us|i|ism|ic)|vasogenic|cytotoxic|hyperostosis|"
    r"inflamma\w*|flatten\w*|tortuos\w*|empty sella)\b", re.I)
# a sentence that names no abnormality it does not negate, and says one of these, says only what is not there
NEGATED = re.compile(r"\b(no|not|without|normal(ly)?|unremarkable|negative)\b", re.I)
# T1 and T2 name sequences, not thoracic levels; the vertebral artery and the cervical carotid are vessels of the
# neck, not the spine (a vertebral artery dissection's figures were all left out as spine images)
SPINE = re.compile(r"\b((?i:spine|spinal|cervical(?!\s+(?:(?:internal\s+)?carotid|ICA|arter(?:y|ies))\b)|thoracic|"
                   r"lumbar|sacral|vertebra\w*(?<!vertebral)|vertebral(?!\s+(?:arter(?:y|ies)|veins?)\b)|cord)|"
                   r"C[1-7]|L[1-5]|S1)\b")
MR_KINDS = ("T1", "T1C", "T2", "FLAIR", "DWI", "ADC", "SWI", "MRA")
# of the sequences asked least so far, the rarer among teaching figures is asked first (keys spread over sequences)
KIND_RARITY = ("ADC", "SWI", "MRA", "DWI", "FLAIR", "T1C", "T1", "T2")
COMMON_KINDS = ("FLAIR", "T1C", "T1", "T2")
CONFUSABLE_KINDS = frozenset({"T1", "T1C", "T2"})
_CONTRAST = re.compile(r"enhanc|contrast|gadolin|\bgd\b", re.I)
MAX_SAME_KEY = 2
# the wrong options of a structure item (of generate's n_options, 5: the key and four)
STRUCTURE_OPTIONS = 4
# a diagnosis is the key of at most three choice items (on the 77 MedPix dev cases the commonest-answer guesser
# then scores 0.04 over chance on the diagnosis template)
MAX_SAME_DX = 3
# and of one image-only item: that template is small (a dozen items on 77 cases), and a diagnosis keyed there twice
# is what its majority-answer guesser picks (0.17 over chance with two strokes and two hydrocephalus cases)
MAX_SAME_DIRECT = 1
# where a case's report puts its abnormalities (one structure a sentence), and the lobes it joins in one word
Reported = tuple[set[str | None], frozenset[str]]
# the compartments a compartment item offers, all five on every item (the key is the diagnosis table's site)
COMPARTMENTS = {"intra-axial": "Intra-axial (brain parenchyma)",
                "extra-axial": "Extra-axial (meninges, CSF spaces)",
                "intraventricular": "Intraventricular (within a ventricle)",
                "sellar": "Sellar or suprasellar region",
                "bone": "Skull bone (vault or skull base)"}
# a compartment leads every other by one key at most, beyond this share of the compartment items: most teaching
# diseases are intra-axial, and a guesser would pick that wherever it is offered
MAX_COMPARTMENT_SHARE = 0.28
_SAID_SITE = {"extra-axial": re.compile(r"\bextra-?\s?axial\b", re.I),
              "intra-axial": re.compile(r"\bintra-?\s?axial\b|\bparenchyma\w*", re.I),
              "intraventricular": re.compile(r"\bintra-?\s?ventricular\b", re.I),
              "sellar": re.compile(r"\b(?:supra|para|intra)?sellar\b|\bpituitary\b", re.I),
              "bone": re.compile(r"\b(?:intra-?)?osseous\b|\bdiplo\w*|\bcalvari\w*", re.I)}
# ventricles that are wide: the principal abnormality of hydrocephalus is their size, not a lesion in a compartment
_WIDE_VENTRICLES = re.compile(r"\bhydrocephal\w*|\bventriculomegaly\b|\b(?:dilat|enlarg)\w*\b[^.;]*\bventric", re.I)
_ORDINAL = ("first", "second", "third")
# how far the sequence asked most may lead the least asked common one (in keys): enough that a case whose only
# sequence is a common one still gets its item, little enough that the key stays a guess; the blind gate's
# majority-answer guesser checks what is left (on the 77 MedPix dev cases 3 and 4 both leave the sequence template at
# chance; 4 asks one case more)
MAX_SEQUENCE_LEAD = 4
# the short side a figure needs for a finding to be read on it: on MedPix's 256-pixel thumbnails clinical reads found
# findings too faint to judge (items whose smallest image was under 320 pixels: 5 of 10 valid in one read of 60,
# against 40 of 50; under 400 pixels, 7 of 19 in two earlier reads, against 70 of 101)
LEGIBLE_PIXELS = 320


def teaching_case(case: Case) -> bool:
    """Whether the case's source says what its figures are (their modality at least)."""
    return any(fig.modality for fig in case.figures)


# what reading a figure takes, from what its caption says it shows (Med-CMR's visual dimensions)
_SMALL = re.compile(r"\b(small|tiny|punctate|millimet\w*|dot-like|subtle|foci|focus|(?:[1-9]|10)(?:\.\d)?\s?mm|"
                    r"(?:0\.\d|1(?:\.0)?)\s?cm)\b", re.I)
_DETAIL = re.compile(r"\b(hyperintens\w*|hypointens\w*|hyperdens\w*|hypodens\w*|hypoattenuat\w*|enhanc\w*|"
                     r"signal|attenuation|restrict\w*|calcif\w*|heterogen\w*|blooming|susceptibility|flow voids?|"
                     r"density|fluid level|rim|septa\w*|ground glass|trabecula\w*|margins?|dark|bright|o?edema|"
                     r"swelling|gr[ae]y-white|discrimin\w*|differentiation)\b", re.I)
_SIDE = re.compile(r"\b(left|right|bilateral|midline|L|R)\b")
_FORM = re.compile(r"\b(absen\w*|hypoplas\w*|agenesis|displac\w*|herniat\w*|deform\w*|narrow\w*|dilat\w*|enlarg\w*|"
                   r"widen\w*|expan\w*)\b", re.I)


def figure_dims(caption: str, dx_table: Diagnoses) -> list[str]:
    """The visual dimensions reading a figure takes, by what its caption says it shows: a small finding
    (small_object), its signal, density or enhancement (fine_detail), where it lies or the form of a structure
    (spatial)."""
    dims = []
    if _SMALL.search(caption):
        dims.append("small_object")
    if _DETAIL.search(caption):
        dims.append("fine_detail")
    if _SIDE.search(caption) or _FORM.search(caption) or _structure(caption, dx_table):
        dims.append("spatial")
    return dims


# a caption's sentences, clauses after ";" and its bullet points (a bullet list read as one sentence ran a finding
# into the next bullet's "without mass effect")
CLAUSES = re.compile(r"(?<=[.!?;])\s+|\n+|\s*\u2022\s*")


def affirmed(sentence: str) -> list[str]:
    """The abnormality words of ``sentence`` that it does not negate ("mass without oedema": mass)."""
    return [word for word, said in Context.default().mentions(sentence, ABNORMAL) if not said["negated"]]


def _affirms(text: str, pattern: re.Pattern[str]) -> bool:
    """Whether ``text`` says something ``pattern`` matches, clause by clause, and does not negate it ("No
    postoperative change", "non-enhancing")."""
    return any(not a["negated"] for s in CLAUSES.split(text) for _, a in Context.default().mentions(s, pattern))


def caption_score(caption: str) -> int:
    """How many abnormality words a caption's sentences hold, leaving out those they negate."""
    return sum(len(affirmed(sentence)) for sentence in CLAUSES.split(caption))


def first_sentence(text: str, limit: int = 240) -> str:
    s = re.split(r"(?<=[.!?])\s+(?=[A-Z])", " ".join(text.split()))[0]
    return s if len(s) <= limit else s[:limit].rsplit(" ", 1)[0] + " ..."


# a lesion itself, which is the principal abnormality where a caption also tells what it does (the hydrocephalus a
# posterior fossa mass causes is not the principal abnormality: a clinical read)
LESION = re.compile(r"\b(mass(es)?(?![\s-]+effect)|lesions?|tumou?rs?|cysts?|ha?emorrhag\w*|ha?ematoma|infarct\w*|"
                    r"nodules?|malformation|fractur\w*|collection|abscess\w*|plaques?|aneurysm)\b", re.I)


def _abnormal_sentences(caption: str) -> list[str]:
    """The caption's sentences that describe an abnormality: those naming a lesion first, then those saying an
    abnormality without doubt. A lesion comes before what it does (the hydrocephalus a posterior fossa mass causes is
    not the principal abnormality: a clinical read), but a lesion the caption only supposes does not ("This most
    likely represents a venous malformation", "may represent tumour extension")."""
    found = [s for s in CLAUSES.split(caption) if affirmed(s)]
    return sorted(found, key=lambda s: (not _names_lesion(s), not _surely(s)))


def _names_lesion(sentence: str) -> bool:
    """Whether the sentence names a lesion it neither negates nor hedges."""
    return any(not (said["negated"] or said["hedged"]) for _, said in Context.default().mentions(sentence, LESION))


def _surely(sentence: str) -> bool:
    """Whether the sentence says an abnormality and hedges none ("There seems to be a hypodense centre")."""
    said = [a for _, a in Context.default().mentions(sentence, ABNORMAL)]
    return any(not a["negated"] for a in said) and not any(a["hedged"] for a in said)


def _finding_sentence(caption: str) -> str:
    """The caption's principal finding: its first sentence naming a lesion, else describing an abnormality (not
    "Routine MRI of the brain was performed.")."""
    found = _abnormal_sentences(caption)
    return first_sentence(found[0] if found else caption)


# a finding that is not the disease asked: an old or incidental one, or one the caption adds
_INCIDENTAL = re.compile(r"\b(old|incidental\w*|additional\w*|also|second|another|chronic|prior|remote)\b", re.I)


def _supporting_sentence(caption: str) -> str:
    """The caption's first sentence describing a lesion that is not an old, incidental or additional one (an old
    lacune is no reason for a hemichorea), else its principal finding."""
    found = _abnormal_sentences(caption)
    pick = [x for x in found if not _INCIDENTAL.search(x)] or found
    return first_sentence(pick[0] if pick else caption)


# a sentence that only concludes, naming the diagnosis and no finding ("This is consistent with an arachnoid cyst")
_CONCLUSION = re.compile(r"^\W*(?:this|these|it|(?:the\s+)?(?:findings?|appearances?|features?))\s+(?:is|are|was|were|"
                         r"appears?|seems?)?\s*(?:(?:most|more|very)\s+)?(?:likely\s+)?(?:consistent|compatible|"
                         r"diagnostic|typical|characteristic|suggestive|in keeping|pathognomonic|represents?)\b", re.I)


def _finds(text: str) -> bool:
    """Whether ``text`` describes a finding: a clause that says an abnormality without negating it and is not only a
    conclusion naming the diagnosis."""
    return any(affirmed(s) for s in CLAUSES.split(text) if not _CONCLUSION.search(s))


def _set_sure(f: dict[str, Any], name: str, text: str) -> None:
    """``f[name]``, the supporting sentence of ``text``, where it says its first abnormality without doubt: an answer
    the caption itself doubts ("There seems to be a hypodense centre in the mass") is no key, so its item is not
    made; a doubt about a second finding ("chronic subdural collections, and a high density suggestive of a recent
    bleed") leaves the sentence a key."""
    sentence = _supporting_sentence(text)
    said = [a for _, a in Context.default().mentions(sentence, ABNORMAL) if not a["negated"]]
    if said and not said[0]["hedged"]:  # what the sentence is about, said without doubt
        f[name] = sentence


def clip(text: str, limit: int = 700) -> str:
    """Whole sentences of ``text`` up to about ``limit`` characters."""
    out = ""
    for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        if out and len(out) + len(s) > limit:
            break
        out = f"{out} {s}".strip()
    return out


def _structure(caption: str, dx_table: Diagnoses) -> str | None:
    """Where the caption's principal finding lies (its first sentence naming a lesion, else an abnormality)."""
    found = _abnormal_sentences(caption)
    return dx_table.structure(found[0]) if found else None


def _legible(figs: list[Figure]) -> list[Figure]:
    """The figures large enough to read a finding on, where the case has any: a thumbnail beside a full-size figure
    is left out (faint foci, a thin subdural, an infarct on a noisy ADC map: ``LEGIBLE_PIXELS``); a case of thumbnails
    only keeps them."""
    large = [g for g in figs if _short_side(g) >= LEGIBLE_PIXELS]
    return large or figs


def _short_side(fig: Figure) -> int:
    return min(fig.qc.width or 0, fig.qc.height or 0)


def _usable(fig: Figure, site: str | None) -> bool:
    if fig.missing or not fig.renders or fig.kind is None or not _label_agrees(fig):
        return False
    if fig.kind in ("MRA", "CTA") and site != "vascular":
        return False
    where = f"{fig.caption} {fig.label or ''}"
    if SPINE.search(where) and site != "spine":
        return False
    # a caption whose principal finding is an enhancement, under a label that shows none and naming no kind itself:
    # one of the two is wrong (a "CT" of a ring-enhancing lesion was a post-contrast T1, a clinical read)
    return not (fig.kind in _NO_ENHANCEMENT_KINDS and not kinds_named(fig.caption)
                and _affirms(_finding_sentence(fig.caption), _ENHANCES))


def _agreeing(figs: list[Figure], case: Case, dx_table: Diagnoses, deficit: dict[str, Any] | None) -> list[Figure]:
    """``figs`` less those whose caption puts the principal finding in a structure on the side that the case
    contradicts ("right basal ganglia" under two figures, "left basal ganglia" under two: a teaching case with another
    patient's images, a clinical read found). The side the report's findings name wins, then the one the history's
    deficit points to (for a structure whose lesion gives it), then the one most captions name (a caption under
    several figures counts once); else no figure naming a side is used. A case that calls its disease bilateral,
    or a finding old or second, is no contradiction."""
    texts = [case.sections.get("findings", ""), case.title or "", case.diagnosis.primary or "",
             *(g.caption for g in case.figures)]
    if any(_BILATERAL.search(t) for t in texts):
        return figs

    def placed(caption: str) -> tuple[str, str] | None:
        sentence = _finding_sentence(caption)
        if _INCIDENTAL.search(sentence):
            return None
        side, where = _one_side(sentence), dx_table.structure(sentence)
        return (where, side) if where and side else None

    said = {fold(g.caption): p for g in case.figures if (p := placed(g.caption))}
    drop: set[str] = set()
    for where in {w for w, _ in said.values()}:
        votes = Counter(side for w, side in said.values() if w == where)
        if len(votes) < 2:
            continue
        reported = {side for x in _abnormal_sentences(case.sections.get("findings", ""))
                    if dx_table.structure(x) == where
                    for side, rx in (("left", _LEFT), ("right", _RIGHT)) if rx.search(x)}
        (a, na), (_, nb) = votes.most_common(2)
        if len(reported) == 1:
            keep: str | None = next(iter(reported))
        elif deficit and where in (deficit.get("structures") or []):
            keep = deficit["hemisphere"]
        else:
            keep = a if na > nb else None
        drop |= {c for c, (w, side) in said.items() if w == where and side != keep}
    return [g for g in figs if fold(g.caption) not in drop]


_BILATERAL = re.compile(r"\b(?:bilateral\w*|both|symmetric\w*)\b", re.I)


def _mechanism_facts(f: dict[str, Any], figs: list[Figure], dx_table: Diagnoses, deficit: dict[str, Any]) -> None:
    """The lesion that accounts for the presenting deficit: the first axial or coronal figure (described on its own
    first) whose description puts its principal finding, on the side the deficit points to (right-sided weakness, or
    aphasia: the left), in a structure whose lesion gives that deficit (neurology.yaml ``deficits.structures``),
    asked with the history, graded against that description and the side's reason."""
    for g in figs:
        text = own_sentences(g)
        sentence = _finding_sentence(text)
        placed = dx_table.structure_at(sentence)
        # (a structure whose lesion gives that deficit, the side its own: not an old or second lesion, an extension's
        # side or a second place's)
        if g.plane not in ("axial", "coronal") or placed is None \
                or placed[0] not in (deficit.get("structures") or []) \
                or _one_side(sentence) != deficit["hemisphere"] or not affirmed(sentence) \
                or _INCIDENTAL.search(sentence) or _SIDE_OF_EXTENSION.search(sentence) \
                or not _SIDE_FOLDED.search(placed[1]) or deid_artefacts(text):
            continue
        f["image"]["mechanism_figure"] = _evidence(g)
        _note_dims(f, g, dx_table)
        f["mechanism_finding"] = clip(sentence, 300)
        f["mechanism_caption"] = clip(text, 600)
        f["mechanism_deficit"] = deficit
        return


# What a focal lesion does to the brain and the CSF spaces around it, as a caption says it, and why: each with the
# reason a reference gives (a mechanism linking the lesion to its effect). Mass effect (effacement, compression,
# displacement) counts only where the caption says of what: "mass effect" alone is too vague to grade. Intraventricular
# extension is a haemorrhage's.
_VENTRICLE = (r"(?:(?:lateral|third|fourth|3rd|4th)\s+ventricles?|ventricles|ventricular\s+system|"
              r"(?:frontal|occipital|temporal)\s+horns?)")
_COMPRESSED = rf"(?:{_VENTRICLE}|brainstem|brain stem|aqueduct|cisterns?|midbrain|pons|medulla)"
COMPLICATIONS = (
    ("hydrocephalus", re.compile(r"\bhydrocephal\w*", re.I),
     "the ventricles dilate because cerebrospinal fluid cannot drain past the lesion (or, after bleeding or "
     "infection, cannot be resorbed), and the pressure inside them rises."),
    ("transependymal oedema", re.compile(r"\btransependymal\b(?!\s+(?:extension|spread|invasion|seeding))", re.I),
     "cerebrospinal fluid under pressure is forced across the ventricular lining into the white matter around the "
     "ventricles: the hydrocephalus is under pressure."),
    ("midline shift", re.compile(r"\bmidline\s+(?:\w+\s+)?shift\b|\bshift\w*\s+of\s+(?:the\s+)?midline\b|"
                                 r"\bsubfalci(?:ne|al)\s+(?:\w+\s+){0,3}?herniat\w*", re.I),
     "the lesion, with any swelling around it, takes up room inside the closed skull and pushes the brain across the "
     "midline, under the falx."),
    ("transtentorial herniation", re.compile(r"(?<!upward\s)\b(?:uncal|(?:descending\s+)?transtentorial|tentorial)\s+"
                                             r"(?:brain\s+)?herniat\w*", re.I),
     "raised pressure above the tentorium pushes the medial temporal lobe over the edge of the tentorium, where it "
     "compresses the midbrain and the third cranial nerve."),
    ("tonsillar herniation", re.compile(r"\btonsillar\s+herniat\w*|\b(?:inferior|downward|descending)\s+"
                                        r"(?:displacement|herniation)\s+of\s+(?:the\s+)?(?:cerebellar\s+)?tonsils\b",
                                        re.I),
     "raised pressure above the tentorium or in the posterior fossa pushes the cerebellar tonsils down through the "
     "foramen magnum, where they compress the medulla."),
    ("intraventricular extension", re.compile(
        rf"\b(?:extend\w*|extension|rupture\w*|dissect\w*)\s+into\s+(?:the\s+)?(?:\w+\s+){{0,3}}?{_VENTRICLE}|"
        rf"\bintraventricular\s+(?:extension|ha?emorrhage|blood)|\bblood\s+(?:\w+\s+){{0,4}}?(?:with)?in\s+the\s+"
        rf"(?:\w+\s+){{0,3}}?{_VENTRICLE}", re.I),
     "the haemorrhage has broken into the ventricles, where its blood can block the flow of cerebrospinal fluid."),
    ("vasogenic oedema", re.compile(r"\b(?:vasc?ogenic|peri-?tumou?ral|perilesional|surrou?nding)\s+(?:\w+\s+)?"
                                    r"o?edema\b|\bo?edema\s+(?:surrounding|around)\b", re.I),
     "fluid leaks from the lesion's abnormal or damaged vessels, through a broken blood-brain barrier, into the white "
     "matter around it, and spreads along the white matter, sparing the cortex."),
    ("mass effect", re.compile(
        rf"\beffac\w*\s+(?:of\s+)?(?:the\s+)?(?:\w+\s+){{0,3}}?(?:sulci|{_VENTRICLE}|cisterns?|fissures?)|"
        rf"\b(?:sulci|{_VENTRICLE}|cisterns?|fissures?)\s+(?:\w+\s+){{0,2}}?(?:is|are|being)\s+effaced\b|"
        rf"\b(?:(?:displac\w*|compress\w*|mass\s+effect)\s+(?:up)?on|(?:compression|displacement|displacing)"
        rf"(?:\s+of)?)\s+(?:the\s+)?(?:\w+\s+){{0,3}}?{_COMPRESSED}\b", re.I),
     "the lesion, with any swelling around it, takes up room and compresses the brain and the cerebrospinal fluid "
     "spaces next to it."),
)
_REASONS = {name: why for name, _, why in COMPLICATIONS}
# the diseases whose own sign an effect is, where their name does not say it: a hydrocephalus case's transependymal
# oedema, a Chiari malformation's or intracranial hypotension's low tonsils
_SIGN_OF = {"transependymal oedema": re.compile(r"\bhydroceph\w*|\baqueduct\w*", re.I),
            "tonsillar herniation": re.compile(r"\bchiari\b|\btonsil\w*|\bintracranial\s+hypotension\b|\bsyring\w*",
                                               re.I)}
# diseases that are no lesion with effects around it: the ventricles', the pressure's, the brain's own (normal pressure
# hydrocephalus's effaced convexity sulci, intracranial hypotension's sagging brain, a syrinx, an encephalopathy)
_NO_FOCAL_LESION = re.compile(r"\bhydroceph\w*|\bintracranial\s+hypo\w*|\bintracranial\s+hypertension|\bsyring\w*|"
                              r"\bpseudotumou?r|\batroph\w*|\bdementia|\bencephalopath\w*|\bleuk\w*dystroph\w*|"
                              r"\btrapped\b|\bentrapped\b", re.I)
# oedema is a complication only beside a lesion the sentence names (a tumour's, an abscess's; not an infarct's, whose
# oedema is the infarct, nor the disease itself: "foci with cytotoxic and vasogenic oedema patterns" of PRES)
_OEDEMA_OF = re.compile(r"\b(?:mass(?:es)?(?![\s-]+effect)|lesions?|tumou?rs?|nodules?|metasta\w*|abscess\w*)\b", re.I)
_BLEED = re.compile(r"\b(?:ha?emorrhag\w*|ha?ematoma|bleed\w*|blood)\b", re.I)
# what a haemorrhage is not where it "extends into a ventricle": a tumour's or a malformation's own growth
_GROWTH = re.compile(r"\b(?:mass|tumou?r|metasta\w*|nidus|neoplasm|margin|surface)\b", re.I)
# blood that fills the sulci (subarachnoid) does not compress them
_FILLS = re.compile(r"\bfill\w*|\b(?:by|with)\s+blood\b", re.I)
# a sentence that says an effect is not there now, or has another cause than the lesion: resolved, denied further
# back than a negation reaches ("no significant mass effect on the ventricle or midline shift"), expected, treated
# (a shunt, a catheter), incidental, or a dilatation ex vacuo
_NOT_NOW = re.compile(r"\b(?:no|not|none|without|absent|resolv\w*|resolution|no\s+longer|ruled\s+out|excluded|"
                      r"at\s+risk|risk\s+of|impending|threaten\w*|could|would|may|might|prior|previous\w*|history|"
                      r"status\s+post|s/p|shunt\w*|catheter|ventriculostomy|drain\w*|incidental\w*|unrelated|"
                      r"separate|ex[\s-]vacuo|communicating|little|lack\w*|paucity|0\s*mm)\b", re.I)


# an effect said to be slight: one slice need not show it (a "mild midline shift" on a slice above the ventricles
# failed a clinical read, a "mild associated midline shift" of 2 mm was called barely perceptible)
_SLIGHT_WORDS = (r"(?:mild(?:ly)?|minimal(?:ly)?|slight(?:ly)?|subtle|small|early|minor|trace|faint|questionable|"
                 r"equivocal|negligible|insignificant)")
_SLIGHT = re.compile(rf"\b{_SLIGHT_WORDS}\W+(?:\w+\W+){{0,2}}$", re.I)
_SLIGHT_AFTER = re.compile(rf"^\W*(?:\w+\W+){{0,2}}?{_SLIGHT_WORDS}\b", re.I)
# effects that only a slice at their level shows (the tentorial notch, the foramen magnum): asked only alone, where
# the caption's sentence is about them (a sentence adding "tentorial herniation" to a subfalcine one was graded on
# slices above the tentorium, a clinical read)
_LEVELLED = frozenset({"transtentorial herniation", "tonsillar herniation"})


def _complications(sentence: str, kinds: set[str], names_disease: bool = False) -> list[str] | None:
    """The effects of a lesion (``COMPLICATIONS``) that ``sentence`` says are there now, caused by the lesion
    (``_NOT_NOW``: not denied, resolved, expected, treated, incidental or ex vacuo; "possible early hydrocephalus",
    doubted, neither), on images of ``kinds``; None where it says one that no item may ask: a slight one ("mild
    midline shift", "midline shift is minimal": one slice need not show it), or a herniation beside another effect.
    Slight oedema counts on T2 and FLAIR, which show it; oedema counts beside a lesion the sentence names, or beside
    the case's disease where it names that (``names_disease``: "vasogenic edema, despite being a low-grade
    meningioma")."""
    if _NOT_NOW.search(sentence):
        return []
    found = []
    for name, pattern, _ in COMPLICATIONS:
        said = [(m, a) for m, a in Context.default().mentions(sentence, pattern)]
        if not said or any(a["negated"] or a["hedged"] or a["historical"] for _, a in said):
            continue
        at = [(i, m) for m, _ in said if (i := sentence.find(m)) >= 0]
        if any(_SLIGHT.search(sentence[:i]) or _SLIGHT_AFTER.search(sentence[i + len(m):]) for i, m in at) \
                and not (name == "vasogenic oedema" and kinds & {"T2", "FLAIR"}):
            return None
        if name == "intraventricular extension" and (not _BLEED.search(sentence) or _GROWTH.search(sentence)):
            continue
        if name == "vasogenic oedema" and not (_OEDEMA_OF.search(sentence) or names_disease):
            continue
        if name == "mass effect" and _FILLS.search(sentence):
            continue
        found.append(name)
    return found if len(found) == 1 or not _LEVELLED & set(found) else None


def _complication_facts(f: dict[str, Any], figs: list[Figure], case: Case, dx: str | None,
                        entry: DiagnosisEntry | None, dx_table: Diagnoses) -> list[Figure]:
    """What the case's lesion does to the brain and the CSF spaces around it (hydrocephalus, midline shift,
    herniation, a haemorrhage's extension into the ventricles, mass effect on a ventricle), where a caption written
    for the figures shown says so, and why: a focal disease's complication, never the disease itself (a hydrocephalus
    case's hydrocephalus, a Chiari malformation's tonsils, diffuse oedema's herniation). Asked of the first figure
    whose own caption says it, else of two figures of two kinds one caption was written for ("The hemispheric
    swelling is causing subfalcial herniation" under an axial T2 and a coronal post-contrast T1: both are shown),
    graded against the caption's sentences that say it and the reasons. Returns the figures shown."""
    named = [n for n in [dx, *(entry.aka if entry else [])] if n]
    names = " ".join([case.title or "", case.diagnosis.primary or "", *named])
    if (entry is not None and entry.site in (None, "diffuse")) or _NO_FOCAL_LESION.search(names):
        return []
    # (a disease named beside "oedema" is the lesion it surrounds only outside the brain tissue: an infarct's or
    # PRES's oedema is the disease)
    oedema_of_disease = entry is not None and entry.site != "intra-axial"
    # the effects that are the disease's own sign: its name says them, or _SIGN_OF
    own = {n for n, p, _ in COMPLICATIONS if p.search(names) or (n in _SIGN_OF and _SIGN_OF[n].search(names))}
    for g in figs:
        alike = [x for x in case.figures if fold(x.caption) == fold(g.caption)]
        if len(alike) == 2 and alike[0].kind != alike[1].kind and all(x in figs for x in alike):
            shown = alike
        elif len(alike) == 1:
            shown = [g]
        else:
            continue
        kinds = {x.kind or "" for x in shown}
        text = as_seen(visible_sentences(g.caption, kinds), shown)
        if deid_artefacts(text) or (entry is None and not _names_lesion(text)):
            continue
        # (the sentences that say the effects are the reference: a caption that also says one no item may ask is not
        # used, as its reference would leave out what the image shows: "extensive vasogenic edema" beside a
        # "subfalcial and tentorial herniation" the reader saw, a clinical read; nor a herniation beside another effect)
        effects = [(x, _complications(x, kinds, oedema_of_disease
                                      and any(f" {fold(n)} " in f" {fold(x)} " for n in named)))
                   for x in CLAUSES.split(text) if not _CONCLUSION.search(x)]
        if any(said is None for _, said in effects):
            continue
        # (every sentence that says an effect: the reference leaves none out that the caption says of the image)
        asked = [(x, said) for x, found in effects if (said := [c for c in found or [] if c not in own])]
        said = list(dict.fromkeys(c for _, cs in asked for c in cs))
        if said and (len(said) == 1 or not _LEVELLED & set(said)):
            f["image"]["complication_figures"] = [_evidence(x) for x in shown]
            for x in shown:
                _note_dims(f, x, dx_table)
            f["complication_kind_names"] = [kind_name(x.kind or "") for x in shown]
            # (the sentences alone, as the reference too: what else the caption says, normal canals, another level,
            # is no part of the answer, and graded an answer by what the slice shown need not hold, a clinical read)
            f["complication_finding"] = clip(" ".join(x for x, _ in asked), 500)
            f["complication_reasons"] = [f"{n[0].upper()}{n[1:]}: {_REASONS[n]}" for n in said]
            return shown
    return []


def _label_agrees(fig: Figure) -> bool:
    """Whether what the caption calls the image agrees with the source's label: a caption that says "CT" under a
    figure labelled T1 MRI (or "T2" under T1 with gadolinium) means one of them is wrong, and neither is told."""
    said = kinds_named(fig.caption)
    alike = {"T1": {"T1C"}, "T1C": {"T1"}, "DWI": {"ADC"}, "ADC": {"DWI"}}.get(fig.kind or "", set())
    return not said or fig.kind in said or bool(said & alike)


def _describes(caption: str, dx_table: Diagnoses) -> bool:
    """Whether a caption describes an abnormality in enough words to grade an answer by: an abnormality and where it
    lies (a structure, a side), or two abnormality words; never a quiz prompt ("Can you detect the abnormality?")."""
    if "?" in caption or len(caption.split()) < 4:
        return False
    score = caption_score(caption)
    return score >= 2 or (score >= 1 and _placed(caption, dx_table))




def _full(caption: str, dx_table: Diagnoses) -> bool:
    """Whether a caption is a full enough description to grade a "what, where and how" answer by: it says what
    the finding is and how it appears (two abnormality words), where it lies, in at least seven words ("Large left
    parietal mass" and "Signs of cerebellar infarction on CT" are too thin: clinical reads; one abnormality word in a
    longer sentence was too, in one read of 20 such items 11 valid: "Basically normal - arguable subtle loss of grey
    matter intensity", a faint infarct "clearly seen", a canal "dilated")."""
    return (len(caption.split()) >= 7 and caption_score(caption) >= 2 and _placed(caption, dx_table)
            and _describes(caption, dx_table))


# an arterial territory places an infarct as a structure places a mass ("restricted diffusion in the left MCA
# territory", "territory of the right middle cerebral artery")
_ARTERY = (r"(?:ACA|MCA|PCA|PICA|AICA|SCA|ICA|(?i:(?:anterior|middle|posterior)\s+cerebral|(?:anterior|posterior)\s+"
           r"inferior\s+cerebellar|superior\s+cerebellar|basilar|lenticulostriate|watershed))(?:(?i:\s+artery))?")
_TERRITORY = re.compile(rf"\b{_ARTERY}[\s-]+(?i:territor(?:y|ies)|distribution)\b|"
                        rf"(?i:\bterritor(?:y|ies)\s+of\s+the\s+(?:(?:left|right)\s+)?){_ARTERY}\b")


def _placed(caption: str, dx_table: Diagnoses) -> bool:
    """Whether a caption says where its finding lies (a structure it names; a side, where it also says what the
    finding is in two words): a reference that does not ("increased signal in R hemisphere") is too thin to grade a
    "what and where" answer by."""
    # (a side of the brain alone is not a place: "in R cerebral hemisphere")
    sided = re.sub(r"\b(?:(?i:left|right)|L|R)\s+(?:cerebral\s+)?hemispheres?\b", "", caption)
    side = bool(_LEFT.search(sided) or _RIGHT.search(sided) or _BOTH.search(sided))
    return (bool(dx_table.mentioned(caption)) or bool(_TERRITORY.search(caption))
            or (side and caption_score(caption) >= 2))


# a caption sentence about what this image does not show: another figure ("images three and four", "the next
# image", "corresponding to axial images"), every sequence, or a comparison with a study not shown
_ELSEWHERE = re.compile(r"\b(images? (?:two|three|four|five|2|3|4|5|[a-d])\b|other images?|next image|previous image|"
                        r"prior image|all (?:the )?sequences|not shown|correspond\w* (?:to|with) (?:the )?\w+ images?|"
                        r"(?:above|below) image|on the (?:left|right) image|subsequent images?|skull series|"
                        r"radiograph\w*|x-?rays?|plain films?|angiogra\w*|"
                        r"ultrasound|sonograph\w*|follow-?up (?:mri|ct|imaging|study))", re.I)


# what an image of a kind cannot show: enhancement without contrast, restricted diffusion without a diffusion image
_ENHANCES = re.compile(r"\b(enhanc\w*|post-?gad\w*|gadolinium)\b", re.I)
_DIFFUSES = re.compile(r"\b(restrict\w*|diffusion)\b", re.I)
_SHOWS_NOT = {"T1": _ENHANCES, "T2": _ENHANCES, "FLAIR": _ENHANCES, "CT": _ENHANCES, "SWI": _ENHANCES,
              "T1C": _DIFFUSES, "CTC": _DIFFUSES}
_NO_ENHANCEMENT_KINDS = frozenset(k for k, shows_not in _SHOWS_NOT.items() if shows_not is _ENHANCES)
_FIG_LABEL = re.compile(r"^\s*(?:fig(?:ure)?\.?\s*\d+[a-z]?[.:)]?|\(?[a-z]\)|\d+\))\s*", re.I)


def own_sentences(fig: Figure) -> str:
    """A figure's caption less the sentences about what the image shown cannot show: another figure, or another
    sequence (a "T2 hyperintense" sentence under a post-contrast T1 image), so that a reference holds only what a
    reader of this image can see; under a sagittal image, less the side it names too."""
    return as_seen(visible_sentences(fig.caption, {fig.kind or ""}), [fig])


def as_seen(text: str, figs: list[Figure]) -> str:
    """``text`` as ``figs`` can show it: without the side of its finding where they are all sagittal."""
    return sideless(text) if all(g.plane == "sagittal" for g in figs) else text


# a side named as where a finding lies ("inferior left frontal lobe", "R PCA territory", "right-sided mass", "on the
# left"), not as one of two sides compared ("left and right", "left greater than right", "L > R"), a direction ("left
# of midline", "right-to-left") or a panel ("left image"): those are kept
_SIDE_WORD = re.compile(r"(?<![-/])\b(?:(?i:left|right)|L|R|(?i:rt|lt)\.?)(?:[- ](?i:sided))?\s+"
                        r"(?=(?!(?i:and|or|versus|vs|than|to|of|by|at|with|is|are|was|were|side|sides|greater|more|"
                        r"less|larger|smaller|worse|image|images|panel|column)\b)[A-Za-z(])")
_SIDE_PLACE = re.compile(r"\s+(?:on|in)\s+the\s+(?i:left|right)(?:\s+side)?(?=[\s.,;:)]|$)", re.I)
_BOTH_NAMED = re.compile(r"(?:\b(?:left|right|L)(?:[- ]sided)?\s+(?:and|or|to(?:\s+the)?|versus|vs\.?)|[<>=])\s*$",
                         re.I)
_ABBREVIATED = re.compile(r"\b(?:e\.g|i\.e|vs|etc|cf|approx|fig)\.$", re.I)


def sideless(text: str) -> str:
    """``text`` without the sides it puts its findings on: a single sagittal slice does not show the side, so a
    reference shown with sagittal images alone must not grade one (a "left" in a reference under a sagittal T1 was
    called ungradable in three clinical reads)."""
    text = _SIDE_PLACE.sub("", text)
    out, last = "", 0
    for m in _SIDE_WORD.finditer(text):
        if _BOTH_NAMED.search(text[max(0, m.start() - 20):m.start()]):
            continue
        out += text[last:m.start()]
        last = m.end()
        head = out.rstrip()
        if not head or (head[-1] in ".!?" and not _ABBREVIATED.search(head)):
            out += text[last].upper()  # the sentence now starts with the next word
            last += 1
        elif re.search(r"\b[Aa]\s$", out) and text[last].lower() in "aeiou":
            out = out[:-1] + "n "  # "a left insular mass": "an insular mass"
    return out + text[last:]


# a sentence about the examination, not about what it shows ("Multiple representative MR images are demonstrated.")
_BOILERPLATE = re.compile(r"\b(representative|routine|was performed|were (?:performed|obtained)|"
                          r"(?:are|is|were) (?:demonstrated|shown|provided))\b", re.I)
_ALIKE = {"T1": {"T1C"}, "T1C": {"T1"}, "DWI": {"ADC"}, "ADC": {"DWI"}}


def visible_sentences(text: str, kinds: set[str], negatives: bool = True) -> str:
    """The sentences of ``text`` a reader of images of ``kinds`` can check: none about another figure, another
    sequence, enhancement without a contrast image, or diffusion without a diffusion image; with ``negatives``
    False, none that only says what is absent ("No hemorrhage.")."""
    alike = set().union(kinds, *(_ALIKE.get(k, set()) for k in kinds))
    kept = []
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+|\s+(?=\u2022)", text):  # a bullet keeps its mark
        named = kinds_named(sentence)
        if _ELSEWHERE.search(sentence) or (named and not named & alike):
            continue
        if _BOILERPLATE.search(sentence) and not ABNORMAL.search(sentence):
            continue
        if all(k in _SHOWS_NOT and _SHOWS_NOT[k].search(sentence) for k in kinds):
            continue
        if not negatives and NEGATED.search(sentence) and not affirmed(sentence):
            continue
        kept.append(_FIG_LABEL.sub("", sentence.strip()))
    return " ".join(k for k in kept if k)


def _own_caption(fig: Figure, case: Case) -> bool:
    """Whether the caption describes this figure alone: a caption shared with another figure of the case describes
    a series, or several sequences, and names findings that the slice shown need not hold."""
    return sum(1 for g in case.figures if fold(g.caption) == fold(fig.caption)) == 1


def _note_dims(f: dict[str, Any], fig: Figure, dx_table: Diagnoses) -> None:
    f.setdefault("figure_dims", {})[fig.figure_id] = figure_dims(fig.caption, dx_table)


def _evidence(fig: Figure) -> dict[str, Any]:
    return Evidence(image=fig.renders[0].path, series_id=fig.figure_id, sequence=fig.sequence, target="figure",
                    plane=fig.plane or "figure").model_dump()


def teaching_facts(f: dict[str, Any], case: Case, dx_table: Diagnoses, asked: Counter[str],
                   deficit: dict[str, Any] | None = None) -> None:
    """Fill ``f`` (a fact set of a figure case) with what its figures and its report give. ``asked``: how often
    each sequence and each diagnosis was a key in the cases before this one (updated here), so keys spread;
    ``deficit``: the presentation's lateralising deficit and the hemisphere it points to, if any
    (``finding_facts.history_deficit``)."""
    dx = dx_table.name(case.diagnosis.primary) or dx_table.name(case.title)
    entry = dx_table.entry(dx)
    site = entry.site if entry else None
    usable = [fig for fig in case.figures if _usable(fig, site)]
    # (images after surgery or radiation show what treatment left, not the disease as diagnosed: a postoperative CT's
    # air and cavity made a calcified tumour's diagnosis items borderline in three clinical reads; where only they
    # describe a finding, its findings are still asked, and beside described images before treatment they are left out)
    before = [fig for fig in usable if not _affirms(fig.caption, _TREATED)]
    only_after = len(before) < len(usable) and not any(_describes(g.caption, dx_table) for g in before)
    spare = False  # a diagnosis many cases share, already the key of its share of choice items
    if dx and entry and entry.histology:
        _refuse_diagnosis(f, DECIDED_BY_HISTOLOGY)
    elif dx and entry and only_after:
        _refuse_diagnosis(f, POSTOPERATIVE)
    elif dx and entry and entry.seen_in and not any(_describes(g.caption, dx_table)
                                                    and dx_table.shows_defining(dx, g.caption) for g in before):
        _refuse_diagnosis(f, DEFINING_NOT_SHOWN)
    elif dx and entry:
        spare = _diagnosis_facts(f, case, dx_table, dx, entry, asked)
    deciding = set(entry.shown_by) if entry else set()
    usable = _agreeing(_legible(usable if only_after else before), case, dx_table, deficit)
    scored = [fig for _, _, fig in sorted(((caption_score(fig.caption), -n, fig) for n, fig in enumerate(usable)),
                                          key=lambda x: (x[0], x[1]), reverse=True)
              if _describes(fig.caption, dx_table)]
    # the caption is the reference an answer is graded against: it must describe this slice (its own caption, or
    # one written for exactly this figure and one other of another kind), describe an abnormality in more than a
    # word, and not be a quiz prompt ("Can you detect the abnormality?")
    shown = [fig for fig in scored if _own_caption(fig, case) and _full(own_sentences(fig), dx_table)]
    # a caption that puts its finding on a side is read on an axial or coronal image first: a sagittal slice does
    # not show the side (a "left thalamus" key on a sagittal T1 failed a clinical read)
    # (and a kind that tells the disease from its mimics before the others: the consult asks the diagnosis from it)
    shown.sort(key=lambda g: (g.plane == "sagittal" and bool(_SIDE.search(visible_sentences(g.caption,
                                                                                            {g.kind or ""}))),
                              g.kind not in deciding))
    if scored:  # a diagnosis needs the disease on the image, which a caption shared by a series still says
        _diagnosis_figure_facts(f, case, dx_table, dx, site, deciding, scored, shown, asked, spare)
    described: list[tuple[list[Figure], str]] = []  # the figures whose side may be asked, with their description
    # where the case's report puts its abnormalities: read once, for the structure the figures' captions give
    reported = {dx_table.structure(x) for x in _abnormal_sentences(case.sections.get("findings", ""))}
    # and the lobes it or a caption joins in one word ("left frontoparietal"): a finding that spans two
    reported_spanning = _spanned(" ".join([case.sections.get("findings", ""), *(g.caption for g in case.figures)]))
    if shown:
        other = _key_figure_facts(f, shown, dx_table, asked, (reported, reported_spanning))
        described += [([g], own_sentences(g)) for g in (shown[0], other) if g is not None]
    group = _caption_group(usable, case, dx_table, deciding)
    if group:
        _group_facts(f, group, dx_table, asked, (reported, reported_spanning))
        described.append((group, f["group_caption"]))
    _side_facts(f, described, case, dx_table, asked)
    _signal_facts(f, scored, case, dx_table, asked)
    enhanced = _enhancement_facts(f, scored, case, dx_table, asked)  # (its context tells the sequence)
    # (the key figure, else, or where only they show a kind that tells the disease, the figures of one caption,
    # where all that caption describes is shown: a consult's reference graded a montage's axial T2 and fat-saturated
    # T1 that its four images did not include, a clinical read)
    tells = bool(shown) and (not deciding or shown[0].kind in deciding)
    whole = bool(group) and len(group) == sum(fold(g.caption) == fold(group[0].caption) for g in case.figures)
    _consult_facts(f, [shown[0]] if shown and (tells or not group) else group if whole else [], deciding)
    pair = _pair(scored, case, deciding, dx_table)
    if pair is not None and deciding and not {pair[0].kind, pair[1].kind} & deciding:
        _withhold(f, "pair_reference")
        pair = None
    if pair is not None:
        _pair_facts(f, *pair, dx_table)
    # (of figures before treatment whose caption was written for them: what a series' shared caption says of its
    # effect need not be on the slice shown)
    effect = _complication_facts(f, [g for g in scored if g in before], case, dx, entry,
                                 dx_table)  # (its context tells the sequence)
    _sequence_facts(f, case, [*(shown[:2]), *(pair or ()), *([enhanced] if enhanced else []), *effect], asked)
    if deficit is not None:
        # (of figures whose caption is their own: a caption shared by a series' T2 and post-contrast images graded a
        # post-contrast slice by its oedema and "non-enhancing cysts", a clinical read)
        _mechanism_facts(f, [*shown, *(g for g in scored if g not in shown and _own_caption(g, case))], dx_table,
                         deficit)


# why a diagnosis item is not made where the case has its diagnosis: none of the images it would show is of a kind
# that tells the disease from its mimics (the diagnosis table's shown_by: a glioblastoma on T2 alone, a
# haemangioblastoma without a post-contrast image; such items were the most common borderline of the clinical reads)
NO_DECIDING_KIND = "no_deciding_sequence"
# why no diagnosis item is made of a disease only histology tells from its mimics (diagnoses.yaml ``histology``)
DECIDED_BY_HISTOLOGY = "decided_by_histology"


# why no diagnosis item is made where the case's images are all after surgery or radiation
POSTOPERATIVE = "postoperative_images"
# why none is made where no described image names the structure whose form defines the disease (diagnoses.yaml
# ``seen_in``: three temporal-bone slices of a dilated vestibule and canals keyed Mondini, whose cochlea none showed,
# failed two clinical reads)
DEFINING_NOT_SHOWN = "defining_structure_not_shown"
# a caption of an image after treatment: "postoperative", "post-radiation", or a procedure after "status post", "s/p",
# "after", "following" or "treated with" (not "s/p fall": a trauma's history says s/p too)
_PROCEDURE = (r"(?:surgery|surgical|resection|craniotomy|craniectomy|debulking|radiation|radiotherapy|radiosurgery|"
              r"gamma knife|chemo\w*)")
_TREATED = re.compile(rf"\b(?:post-?\s?(?:op(?:erative(?:ly)?)?|surgical|radiation|treatment)|resection (?:cavity|bed)|"
                      rf"surgical (?:cavity|bed)|(?:status[- ]post|s/p|after|following|(?:previously\s+)?treated with)"
                      rf"\s+(?:\w+\s+){{0,2}}?{_PROCEDURE})\b", re.I)


def _refuse_diagnosis(f: dict[str, Any], why: str) -> None:
    """No diagnosis item of the case, and why (the reason counted where each template would need the diagnosis)."""
    for fact in ("dx", "dx_with_history", "dx_direct", "dx_told_ok"):
        f.setdefault("refused", {})[fact] = why


# why no choice of diagnosis, and no reasoning to it, is made of one image where no one image decides the disease
ONE_IMAGE = "one_image"


def _withhold(f: dict[str, Any], fact: str) -> None:
    f.setdefault("refused", {})[fact] = NO_DECIDING_KIND


def _consult_facts(f: dict[str, Any], figs: list[Figure], deciding: set[str]) -> None:
    """The consult shows the key figure (else the figures one caption describes together) and asks the diagnosis
    from it: only where a kind shown tells the disease from its mimics (or the table names no such kind)."""
    if not figs:
        return
    if deciding and not {g.kind for g in figs} & deciding:
        _withhold(f, "image.consult_figures")
        return
    f["image"]["consult_figures"] = [_evidence(g) for g in figs]
    f["consult_caption"] = f["key_caption"] if len(figs) == 1 else f["group_caption"]


def _diagnosis_facts(f: dict[str, Any], case: Case, dx_table: Diagnoses, dx: str, entry: DiagnosisEntry,
                     dx_asked: Counter[str]) -> bool:
    """The case's diagnosis, its wrong options, and how it may be asked (from the image alone, with the history,
    or not at all where the history names it). True where the diagnosis is already the key of its share of choice
    items (``MAX_SAME_DX``) and its history does not name it: it may still be asked from the image alone where a
    caption names it, a template whose keys are capped apart (``MAX_SAME_DIRECT``)."""
    f["dx"] = dx
    # (by the name each goes by where this disease lies: a skull lesion's "metastasis" is a skull metastasis, not a
    # cerebral one, which two clinical reads found a mis-framed option)
    written = {dx_table.at(d, entry.site): words
               for d, words in dx_table.differential_as_written(case.diagnosis.differential).items()}
    weighed = [d for d in written if d != dx]
    options = [*weighed, *(dx_table.canonical(m) for m in entry.mimics)]
    f["dx_options"] = _distinct([d for d in dict.fromkeys(options) if d != dx and d not in set(entry.within)], dx)
    # what the case's author weighed it against: an open answer that leads with one of them is a reasoned answer
    # on a slice that does not tell them apart (a medulloblastoma for a pilocytic astrocytoma on T1 alone: a second
    # defensible diagnosis was the commonest borderline of the clinical reads), graded against both
    # (in the words the case used: the table's one name may place it elsewhere)
    considered = _distinct([d for d in weighed if d not in set(entry.within)], dx)
    if considered:
        f["dx_considered"] = [_as_written(written[d], d) for d in considered[:4]]
    # the diagnosis is asked from the image alone where the table says one image decides it (a Chiari
    # malformation, a colloid cyst); with the history elsewhere (one slice of an extra-axial mass does not tell an
    # epidermoid from a craniopharyngioma: 3 of 6 image-only items failed a clinical read when asked by site),
    # and not at all where the history names it (acromegaly: a pituitary adenoma); the history an item tells, that
    # is (a case report's presentation goes on to its imaging, which names the disease but no item tells)
    told = dx_table.given_by(dx, f.get("presentation") or "")
    # each diagnosis is the key of a few choice items at most: a diagnosis that many cases share (a stroke)
    # would otherwise be the answer a guesser picks wherever it is offered
    capped = dx_asked[dx] >= MAX_SAME_DX
    if not capped:
        dx_asked[dx] += 1
        direct = entry.direct and not told and dx_asked[f"direct:{dx}"] < MAX_SAME_DIRECT
        f["dx_direct" if direct else "dx_with_history"] = dx
        if told:  # the history names it: no item may tell that history with it
            f.pop("dx_with_history", None)
            f["dx_told"] = True
    if not told:
        f["dx_told_ok"] = True
    return capped and not told


def _names_plainly(caption: str, dx: str, dx_table: Diagnoses) -> bool:
    """Whether the caption names ``dx`` as what the image shows: by one of its own names, not by a group's
    ("hemorrhagic stroke" for a hypertensive haemorrhage), without doubt ("may represent multiple sclerosis" is a
    guess), and as the one diagnosis it names (a caption that lists "small vessel ischaemia; multiple
    sclerosis; ..." weighs a differential, it does not read the image as one disease)."""
    named = {n for clause in re.split(r"[.;:,]|\bor\b|\bvs\b", caption) if (n := dx_table.name(clause))}
    if dx_table.name(caption) != dx or named != {dx}:
        return False
    entry = dx_table.entry(dx)
    broad = {fold(b) for b in (entry.broad if entry else [])}
    names = sorted({n for n in [dx, *(entry.aka if entry else [])] if fold(n) not in broad}, key=len, reverse=True)
    said = Context.default().mentions(caption, re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b", re.I))
    return any(not (a["negated"] or a["hedged"]) for _, a in said)


def _as_written(words: str, name: str) -> str:
    """The words a differential named a diagnosis by ("PNET" too), or its one name where they are slang ("Mets"), a
    shout ("METASTASIS"), more than one diagnosis ("A: Arachnoid cyst", "Epidermoid/Ependymoma") or a sentence."""
    if not words or re.search(r"[:/]", words) or len(words.split()) > 6:
        return name
    if words.isupper():
        return words if len(words) <= 5 else name
    return name if " " not in words and len(words) <= 5 else words[:1].upper() + words[1:]


def _diagnosis_figure_facts(f: dict[str, Any], case: Case, dx_table: Diagnoses, dx: str | None, site: str | None,
                            deciding: set[str], scored: list[Figure], shown: list[Figure],
                            asked: Counter[str], spare: bool = False) -> None:
    """The figures a diagnosis item shows (up to three, one of each sequence first) and the reference its answer is
    graded against. ``spare``: the diagnosis has had its share of choice items, and is asked only from the image
    alone, where a caption names it."""
    # (of figures a series caption describes alike, one of a kind that tells the disease from its mimics first)
    fig = shown[0] if shown else min(scored, key=lambda g: (-caption_score(g.caption), g.kind not in deciding))
    naming = next((g for g in scored if dx and _names_plainly(g.caption, dx, dx_table)), None)
    if naming is not None and ("dx_with_history" in f or spare) and not f.get("dx_told") \
            and asked[f"direct:{dx}"] < MAX_SAME_DIRECT:
        # the caption says this image shows the disease: its author reads it from the image alone (a fourth stroke
        # too: the image-only template's keys are capped apart, so its guesser does not meet the other three)
        fig = naming
        f["dx_direct"] = f.pop("dx_with_history", dx)
        if spare and dx:
            asked[dx] += 1  # (given back below where no shown image can tell it)
    f["image"]["dx_figure"] = _evidence(fig)
    _note_dims(f, fig, dx_table)
    # the diagnosis is read from every sequence the case shows the finding on (up to three), as its author
    # did: one slice of one sequence often does not tell a diagnosis from its mimics (an epidermoid from an
    # arachnoid cyst without the DWI; 7 of 12 one-image diagnosis items failed a clinical read)
    # (then, where the case has fewer kinds, another figure described on its own: a second level or plane of
    # the same kind; one image left 9 of 14 rationale items that a clinical read could not reach from it)
    # (the kind that tells the disease from its mimics first, where the case has one: a glioblastoma's
    # post-contrast T1 before a third T2 of the same caption; 2 of 4 such items failed a clinical read)
    more = sorted((g for g in scored if g is not fig), key=lambda g: not _own_caption(g, case))
    kinds = sorted(more, key=lambda g: (g.kind not in deciding, g not in shown))
    figs = [fig, *[g for g in kinds if g.kind != fig.kind]]
    figs = [g for n, g in enumerate(figs) if g.kind not in {h.kind for h in figs[:n]}][:3]
    # (and the slices that fill the three, of that kind first: a second post-contrast slice of a haemangioblastoma
    # shows its nodule where a second pre-contrast one does not, a clinical read)
    figs += sorted((g for g in more if g not in figs), key=lambda g: g.kind not in deciding)[:3 - len(figs)]
    # one image, of a disease no one image decides: neither a choice among its mimics nor the reasoning to it
    undecided = bool(dx) and len(figs) == 1 and not getattr(dx_table.entry(dx), "direct", False)
    if deciding and not {g.kind for g in figs} & deciding:
        _withhold(f, "image.dx_figures")
        if dx and ("dx_direct" in f or "dx_with_history" in f):
            asked[dx] -= 1  # the slot a diagnosis key takes (MAX_SAME_DX) goes to a case that can show it
    else:
        f["image"]["dx_figures"] = [_evidence(g) for g in figs]
        if "dx_direct" in f:
            asked[f"direct:{dx}"] += 1
        elif undecided and "dx_with_history" in f:
            # a choice among the case's mimics from one image, where no one image decides it: 4 of 12 such items
            # were valid in clinical reads (one axial slice of a cystic sellar mass at 70 does not tell a
            # craniopharyngioma from an adenoma), against 14 of 21 on three images
            del f["dx_with_history"]
            f.setdefault("refused", {})["dx_with_history"] = ONE_IMAGE
            asked[dx] -= 1
    for g in figs:
        _note_dims(f, g, dx_table)
    f["dx_image_count"] = ("one image", "two images", "three images")[len(figs) - 1]
    _set_sure(f, "dx_caption_first", own_sentences(fig) or as_seen(fig.caption, [fig]))
    _compartment_facts(f, figs, site, dx_table, asked)
    # a diagnosis the shown images' captions themselves entertain ("may represent small vessel disease") is a
    # second right answer, never a wrong option
    entertained = {dx_table.at(n, site) for g in figs for part in re.split(r"[.;,]|\bor\b|\bvs\b", g.caption)
                   if (n := dx_table.name(part)) and n != dx}
    if "dx_options" in f:
        f["dx_options"] = [d for d in f["dx_options"] if d not in entertained]
    told: dict[str, list[int]] = {}  # a caption shared by two images is told once, for both
    for k, g in enumerate(figs):
        if own_sentences(g):
            told.setdefault(clip(own_sentences(g), 400), []).append(k)
    described = " ".join(f"{' and '.join(_ORDINAL[k] for k in ks).capitalize()} "
                         f"image{'s' if len(ks) > 1 else ''}: {text}" for text, ks in told.items())
    report = as_seen(visible_sentences(case.sections.get("findings", ""), {g.kind or "" for g in figs},
                                       negatives=False), figs)
    # the report is the reference only where no caption describes the images: its other sentences are about
    # slices and sequences the item does not show
    f["dx_reference"] = described or (f"The report: {clip(report, 500)}" if report else "")
    if told and not any(_finds(text) for text in told):
        # captions that say only what the images lack and conclude ("no abnormal enhancement; this is consistent
        # with an arachnoid cyst") grade no finding, and the report is not about these images either: a reference
        # without the cyst itself was borderline in a clinical read
        f["dx_reference"] = ""
    elif undecided:
        # nor is the diagnosis reasoned out from one image where no one image decides it: 4 of 11 such items were
        # valid in clinical reads (one lytic skull lesion at 40: an eosinophilic granuloma or a metastasis; one
        # slice of a cystic sellar mass), against 24 of 33 on two or three images
        del f["dx_reference"]
        f.setdefault("refused", {})["dx_reference"] = ONE_IMAGE


def _key_figure_facts(f: dict[str, Any], shown: list[Figure], dx_table: Diagnoses,
                      asked: Counter[str], reported: Reported) -> Figure | None:
    """The figure whose own caption describes it best (a finding item), a second one with its own description
    (returned, or None), and the structure the caption puts the finding in."""
    key = shown[0]
    f["image"]["key_figure"] = _evidence(key)
    _note_dims(f, key, dx_table)
    f["key_caption"] = clip(own_sentences(key), 600)
    _set_sure(f, "key_caption_first", own_sentences(key))
    f["key_kind_name"] = kind_name(key.kind or "")
    other = next((g for g in shown[1:] if fold(g.caption) != fold(key.caption)), None)
    if other is not None:  # a second figure with its own description: what it shows is asked too
        f["image"]["other_figure"] = _evidence(other)
        _note_dims(f, other, dx_table)
        f["other_caption"] = clip(own_sentences(other), 600)
        _set_sure(f, "other_caption_first", own_sentences(other))
        f["other_kind_name"] = kind_name(other.kind or "")
    _structure_facts(f, own_sentences(key), key.caption, [key], dx_table, asked, reported)
    return other


# the side a sentence puts its finding on: one side named and not the other ("Left" or "left"; "L" and "R" as
# capitals alone), or both named as such ("bilateral", "both thalami", not "both grey and white matter")
_LEFT = re.compile(r"\b(?:(?i:left)|L)\b")
_RIGHT = re.compile(r"\b(?:(?i:right)|R)\b")
_BOTH = re.compile(r"\bbilateral(?:ly)?\b|\bboth\s+(?:\w+\s+){0,2}?(?:sides|hemispheres|thalami|ventricles|lobes|"
                   r"putamina|hippocampi|orbits|globes|nerves|cerebellar hemispheres|basal ganglia|caudate nuclei|"
                   r"temporal|frontal|parietal|occipital)\b", re.I)
SIDES = {"left": "Left", "right": "Right", "both": "Both sides", "midline": "On the midline"}


# a side said of where a finding extends or what else it touches, not of where it lies (the description is one
# sentence here: "extending 1.5 cm to the right" holds a decimal point)
_SIDE_OF_EXTENSION = re.compile(r"\b(?i:extend\w*|extension|spread\w*|toward\w*|into)\b.*\b(?:(?i:left|right)|L|R)\b")


def _sides_said(case: Case) -> set[str]:
    """The one side each abnormality sentence of the case's captions and findings names, where it names one."""
    said = set()
    texts = [g.caption for g in case.figures] + [case.sections.get("findings", "")]
    for sentence in (x for t in texts for x in CLAUSES.split(t)):
        if not affirmed(sentence):
            continue  # (an old or incidental finding counts: a reader may take it for the principal one)
        if side := _one_side(sentence):
            said.add(side)
    return said


def _one_side(sentence: str) -> str | None:
    """The side ``sentence`` names, where it names one and not the other."""
    left, right = bool(_LEFT.search(sentence)), bool(_RIGHT.search(sentence))
    return None if left == right else "left" if left else "right"


def _side_facts(f: dict[str, Any], described: list[tuple[list[Figure], str]], case: Case, dx_table: Diagnoses,
                asked: Counter[str]) -> None:
    """The side of the patient a finding lies on, asked of figures (the key figure, the second, or the figures one
    caption describes together) that are axial or coronal (a sagittal slice shows no side) and whose description
    says it plainly: one side and not the other ("right worse than left" is no key), both ("bilateral thalami"),
    or the midline (a finding in a midline structure, no side named). Of several, the one whose side has been the
    key least; the four answers are offered on every item."""
    found = []
    said = _sides_said(case)
    for figs, text in described:
        if any(g.plane not in ("axial", "coronal") for g in figs) or deid_artefacts(text):
            continue  # (a description that de-identification left a placeholder in is no reference to show)
        sentence = _supporting_sentence(text)
        if _SIDE_OF_EXTENSION.search(sentence):
            continue  # "in the interpeduncular cistern, extending toward the right": the side of a part
        placed = dx_table.structure_at(sentence)
        if placed and not _SIDE_FOLDED.search(placed[1]) and _SIDE_FOLDED.search(fold(sentence)[len(placed[1]):]):
            continue  # "widening of the occipital bone and a portion of the left petrous bone": a second place's
        left, right, both = (bool(x.search(sentence)) for x in (_LEFT, _RIGHT, _BOTH))
        where = dx_table.structure(sentence)
        if where and dx_table.midline(where):
            if not (left or right or both):
                found.append(("midline", figs, text))
            continue  # a mass of a midline structure has no one side ("suprasellar, extending to the right")
        if any(dx_table.midline(n) for n in dx_table.mentioned(sentence)):
            continue
        if both and not (left or right):
            found.append(("both", figs, text))
        elif not both and left != right and said == {"left" if left else "right"}:
            # (a case whose text puts its findings on the other side too, elsewhere, contradicts itself or holds
            # a second finding a reader could take for the principal one: no key)
            found.append(("left" if left else "right", figs, text))
    if not found:
        return
    side, figs, text = min(found, key=lambda x: asked[f"side:{x[0]}"])
    counts = {k: asked[f"side:{k}"] for k in SIDES}
    # left and right, the common keys, within one of each other (a guesser choosing between them beat the four
    # options' chance by 0.17 on one layout where left led by two; a finding on both sides or on the midline is
    # rarer and is asked wherever a case has one)
    mirror = {"left": "right", "right": "left"}.get(side)
    if mirror and counts[side] > counts[mirror]:
        return
    asked[f"side:{side}"] += 1
    f["side"] = SIDES[side]
    f["side_options"] = [v for k, v in SIDES.items() if k != side]
    f["side_caption"] = clip(text, 600)
    f["image"]["side_figures"] = [_evidence(g) for g in figs]


# how an abnormality looks against the tissue around it, in the words a caption says it with: brighter (signal,
# density) or darker; "T1 shortening" and "T2 prolongation" say it only with the sequence, and are not read
_MEASURE = r"(?:\w+ )?(?:signal|attenuation|density)"  # "high T2 signal", "low attenuation"
_BRIGHTER = re.compile(rf"\b(hyperintens\w*|hyperdens\w*|hyperattenuat\w*|high(?:er)?[- ]{_MEASURE}|"
                       rf"increased {_MEASURE}|bright(?:er|ness)?)\b", re.I)
_DARKER = re.compile(rf"\b(hypointens\w*|hypodens\w*|hypoattenuat\w*|low(?:er)?[- ]{_MEASURE}|"
                     rf"decreased {_MEASURE}|dark(?:er)?|lucen\w*|blooming|signal voids?)\b", re.I)
# a sentence whose signal may be a part's, not the whole abnormality's (its oedema, rim, centre or a level in it), or
# between two grades ("hypointense to isointense")
_SIGNAL_OF_PART = re.compile(r"\b(iso-?(?:intens|dens|attenuat)\w*|o?edema|surround\w*|around|rim|ring|halo|capsule|"
                             r"wall|cent(?:er|re|ral)|core|periph\w*|fluid(?:-fluid)? level|component|portion|part|"
                             r"nodul\w*|septa\w*|margin\w*)\b", re.I)
# a second finding that is dark on every image, which a reader may take for the principal one (the air beside a thin
# subdural haematoma: "darker" was as defensible as its "brighter" key in two clinical reads)
_DARK_BESIDE = re.compile(r"\b(air|gas|pneumo\w*)\b", re.I)
# the kinds whose brightness a caption's word describes as it is (a post-contrast image's bright part is its
# enhancement, an angiogram's its vessels)
SIGNAL_KINDS = frozenset({"T1", "T2", "FLAIR", "DWI", "ADC", "SWI", "CT"})
# (the two answers as long as each other: "Brighter" beside "Darker" was the answer a longest-option guesser picked,
# 0.10 over chance on one layout)
SIGNALS = {"brighter": "Whiter than the tissue around it", "darker": "Darker than the tissue around it"}
# how far the commoner answer may lead the other (most teaching findings are bright on T2 and FLAIR: a guesser that
# always said "brighter" would otherwise beat the two options' chance)
MAX_SIGNAL_LEAD = 1


# an image said to be without contrast ("Noncontrast CT", "pre-contrast T1"): what it says of contrast is no enhancement
_NO_CONTRAST = re.compile(r"\b(?:non-?\s?contrast|without contrast|pre-?\s?contrast|unenhanced|non-?\s?enhanced)\b",
                          re.I)


def _signal_of(fig: Figure) -> str | None:
    """How the figure's own caption says its principal abnormality looks (brighter or darker), where it says it of
    the whole abnormality, without doubt, in sentences that name no sequence but the figure's own, and says no other
    brightness of anything on the image. A caption that speaks of contrast is not read: its brightness may be an
    enhancement, or the label wrong."""
    if _CONTRAST.search(_NO_CONTRAST.sub(" ", fig.caption)) or kinds_named(fig.caption) - {fig.kind}:
        return None  # ("hyperintense on DWI" under an ADC map: the other sequence's brightness)
    text = own_sentences(fig)
    found = _abnormal_sentences(text)
    if not found or not _surely(found[0]) or _SIGNAL_OF_PART.search(found[0]) or _affirms(text, _DARK_BESIDE):
        return None
    said = {name for name, pattern in (("brighter", _BRIGHTER), ("darker", _DARKER))
            for sentence in CLAUSES.split(text)
            for _, a in Context.default().mentions(sentence, pattern) if not (a["negated"] or a["hedged"])}
    principal = {name for name, pattern in (("brighter", _BRIGHTER), ("darker", _DARKER)) if pattern.search(found[0])}
    return principal.pop() if len(said) == 1 and principal == said else None


def _least_asked_sign(figs: list[Figure], case: Case, kinds: frozenset[str], read: Callable[[Figure], str | None],
                      name: str, asked: Counter[str]) -> tuple[str, Figure] | None:
    """A sign asked of one figure (its signal, its enhancement): of the figures of ``kinds`` whose own caption says
    one (``read``), large enough to judge it and with no placeholder de-identification left, the one whose sign has
    been the key of ``name`` items least, with that sign; None where none says one."""
    found = [(sign, fig) for fig in figs if fig.kind in kinds and _own_caption(fig, case)
             and _short_side(fig) >= LEGIBLE_PIXELS and not deid_artefacts(fig.caption) and (sign := read(fig))]
    return min(found, key=lambda x: asked[f"{name}:{x[0]}"]) if found else None


def _signal_facts(f: dict[str, Any], figs: list[Figure], case: Case, dx_table: Diagnoses,
                  asked: Counter[str]) -> None:
    """Whether the principal abnormality is brighter or darker than the tissue around it, asked of a figure (not a
    post-contrast image or an angiogram) whose own caption says so of the whole abnormality and says no other
    brightness, and is large enough to judge it; of several, the one whose answer has been the key least, the two
    answers within one of each other."""
    picked = _least_asked_sign(figs, case, SIGNAL_KINDS, _signal_of, "signal", asked)
    if picked is None:
        return
    sig, fig = picked
    other = next(k for k in SIGNALS if k != sig)
    if asked[f"signal:{sig}"] - asked[f"signal:{other}"] >= MAX_SIGNAL_LEAD:
        return
    asked[f"signal:{sig}"] += 1
    f["signal"] = SIGNALS[sig]
    f["signal_options"] = [SIGNALS[other]]
    f["signal_caption"] = clip(own_sentences(fig), 600)
    f["image"]["signal_figure"] = _evidence(fig)
    _note_dims(f, fig, dx_table)


# how a post-contrast image's principal abnormality takes up contrast, as its own caption says it (a sign read off the
# image: a ring round a necrotic or cystic centre, a solid mass enhancing throughout, a cyst's enhancing nodule, a
# lesion that does not enhance); the five offered on every item
ENHANCED_KINDS = frozenset({"T1C", "CTC"})
ENHANCEMENTS = {"ring": "Enhancement of a rim around a dark centre",
                "homogeneous": "Even enhancement of the whole lesion",
                "heterogeneous": "Uneven, patchy enhancement of the lesion",
                "nodule": "An enhancing nodule in the wall of a cyst",
                "none": "No enhancement anywhere in the lesion"}
# (the five about as long as each other: a longest-option guesser finds no key by its length)
_ENH = r"enhanc\w*"
_ENHANCING = re.compile(_ENH, re.I)
_ENHANCEMENT_SAID = {
    "ring": re.compile(rf"\b(?:ring|rim)(?:-like)?[- ]?{_ENH}|\bperipheral enhancement\b|\bperipherally enhancing\b|"
                       rf"\b{_ENH}\s+(?:rim|ring)\b|\b(?:ring|rim) of {_ENH}|\benhancement of (?:its|the) rim\b", re.I),
    "homogeneous": re.compile(rf"(?<![-\w])(?:homogeneous(?:ly)?|uniform(?:ly)?)[- ]{_ENH}|"
                              rf"\b{_ENH}\s+(?:homogeneously|uniformly)\b", re.I),
    "heterogeneous": re.compile(rf"\b(?:heterogen\w*|inhomogen\w*|patchy|scattered(?: areas of)?)[- ]{_ENH}|"
                                rf"\b{_ENH}\s+heterogeneously\b", re.I),
    "nodule": re.compile(rf"\b{_ENH}\s+(?:mural\s+)?nodule\b|\bmural nodule\b", re.I),
    "none": re.compile(rf"\bnon-?\s?{_ENH}|\bno (?:\w+\s+){{0,4}}{_ENH}|\b(?:does|did) not enhance\b|"
                       rf"\bwithout (?:\w+\s+){{0,2}}{_ENH}", re.I),
}
# the image's own kind ("contrast-enhanced CT", "enhanced T1 images"): no pattern of the lesion's
_ENHANCED_IMAGE = re.compile(r"\b(?:contrast[- ])?enhanced\s+(?:axial\s+|coronal\s+|sagittal\s+)?(?:CT|T1\w*|MRI?|MR|"
                             r"images?|scans?|study)\b|\bcontrast[- ]enhanced\b", re.I)
# a ring's dark centre ("ring-enhancing mass with a non-enhancing necrotic centre"): the ring, not a second pattern
_DARK_CENTRE = re.compile(r"\bnon-?\s?enhancing\s+(?:\w+\s+){0,2}?(?:cent(?:re|er)|core)\b", re.I)
# an enhancement said of something beside the lesion (the meninges over it, a vessel, the choroid plexus)
_ENHANCED_BESIDE = re.compile(r"\b(?:\w*mening\w*|dura\w*|pial?|adjacent|overlying|vessels?|vascular|choroid plexus)\b",
                              re.I)
# a necrotic, cystic or ringed lesion that enhances unevenly is as fairly called ring-enhancing: a pattern said beside
# these words has two answers
_RING_OR_PATCHY = re.compile(r"\b(?:necro\w*|cyst\w*|rim|ring|peripher\w*|heterogen\w*|patchy)\b", re.I)
# how far a pattern may lead the mean of the five (in keys): most enhancing lesions in teaching files ring or enhance
# unevenly, and a guesser would pick those wherever they are offered
MAX_ENHANCEMENT_LEAD = 1


def _enhancement_of(fig: Figure) -> str | None:
    """The one enhancement pattern a post-contrast figure's own caption says of its principal abnormality, without
    doubt or denial ("no evidence of ring enhancement" says no pattern), where it says no second one (a
    "non-enhancing cyst" with "enhancement around" it has two) and no enhancement of anything beside it (the
    meninges over it); a nodule only of a cyst."""
    text = _ENHANCED_IMAGE.sub(" ", own_sentences(fig))
    found = _abnormal_sentences(text)
    if not found or not _surely(found[0]):
        return None
    if _ENHANCEMENT_SAID["ring"].search(text):
        text = _DARK_CENTRE.sub(" ", text)
    said: set[str] = set()
    for sentence in CLAUSES.split(text):
        if not _ENHANCING.search(sentence):
            continue
        if _ENHANCED_BESIDE.search(sentence):
            return None
        for name, pattern in _ENHANCEMENT_SAID.items():
            mentions = [a for _, a in Context.default().mentions(sentence, pattern)]
            if any(a["hedged"] or (a["negated"] and name != "none") for a in mentions):
                return None
            if mentions:
                said.add(name)
    if said == {"none"} and _ENHANCING.search(_ENHANCEMENT_SAID["none"].sub(" ", text)):
        return None  # an enhancement said beside what does not enhance
    if len(said) != 1:
        return None
    key = said.pop()
    if key == "nodule" and not re.search(r"\bcyst", text, re.I):
        return None
    if key in ("homogeneous", "heterogeneous") and _RING_OR_PATCHY.search(_ENHANCEMENT_SAID[key].sub(" ", text)):
        return None
    return key


def _enhancement_facts(f: dict[str, Any], figs: list[Figure], case: Case, dx_table: Diagnoses,
                       asked: Counter[str]) -> Figure | None:
    """How the principal abnormality enhances, asked of a post-contrast figure whose own caption says one pattern of
    it and that is large enough to judge it; of several, the one whose pattern has been the key least, no pattern
    more than ``MAX_ENHANCEMENT_LEAD`` ahead of the mean."""
    picked = _least_asked_sign(figs, case, ENHANCED_KINDS, _enhancement_of, "enhancement", asked)
    if picked is None:
        return None
    pat, fig = picked
    # (counted with this item: its key stays within the lead of the mean of all five)
    mean = (sum(asked[f"enhancement:{k}"] for k in ENHANCEMENTS) + 1) / len(ENHANCEMENTS)
    if asked[f"enhancement:{pat}"] + 1 - mean > MAX_ENHANCEMENT_LEAD:
        return None
    asked[f"enhancement:{pat}"] += 1
    f["enhancement"] = ENHANCEMENTS[pat]
    f["enhancement_options"] = [v for k, v in ENHANCEMENTS.items() if k != pat]
    f["enhancement_caption"] = clip(own_sentences(fig), 600)
    f["enhancement_kind_name"] = kind_name(fig.kind or "")
    f["image"]["enhancement_figure"] = _evidence(fig)
    _note_dims(f, fig, dx_table)
    return fig


_SIDE_FOLDED = re.compile(r"\b(?:left|right)\b")
# a sentence that takes its finding on into a second structure ("occipital lobe with extension into the posterior
# temporal lobe"): the finding spans both
_EXTENDS = re.compile(r"\b(?:extend\w*|extension|spread\w*|into|involv\w*)\b")


def _structure_disputed(where: str, sentence: str, reported: Reported, dx_table: Diagnoses) -> bool:
    """Whether a structure key is open to dispute: its sentence extends the finding into a neighbouring structure,
    the case's own report puts its abnormalities in a neighbour and never in ``where`` (a caption's "inferior
    left frontal lobe" where the findings say "medial left temporal lobe": a reader may take either), or the case
    joins ``where`` and a neighbour in one word ("parietal" where the case says "frontoparietal")."""
    structures, spanning = reported
    near = set(dx_table.near(where))
    tail = fold(sentence)
    m = _EXTENDS.search(tail)
    if m and dx_table.mentioned(tail[m.end():]) & near:
        return True
    return where in spanning or (where not in structures and bool(structures & near))


# two lobes written as one word: "frontoparietal", "parieto-occipital", "temporo parietal"
_SPANNING = re.compile(r"\b(fronto|parieto|temporo|occipito) ?(frontal|parietal|temporal|occipital)\b")
_LOBE = {"fronto": "frontal", "parieto": "parietal", "temporo": "temporal", "occipito": "occipital"}


def _spanned(text: str) -> frozenset[str]:
    """The lobes ``text`` joins in one word, by their structure names ("frontal lobe", "parietal lobe")."""
    return frozenset(f"{lobe} lobe" for m in _SPANNING.finditer(fold(text)) for lobe in (_LOBE[m.group(1)], m.group(2)))


def _structure_facts(f: dict[str, Any], described: str, caption: str, figs: list[Figure], dx_table: Diagnoses,
                     asked: Counter[str], reported: Reported) -> None:
    """The structure a description puts its principal finding in, asked of the figures it describes, against the
    structures next to it; none where the description or the case's report leaves it open to dispute."""
    found = _abnormal_sentences(described)
    where = dx_table.structure(found[0]) if found else None
    # (nor where de-identification left a placeholder in it: no item can be made, and the key would count; nor where
    # another of its sentences puts a second lesion in another structure: "Low attenuation focus in the left parietal
    # lobe ... Second lesion in the left temporal lobe" leaves which one is principal to the reader, a clinical read)
    elsewhere = {dx_table.structure(x) for x in found[1:]} - {None, where}
    if where is None or _structure_disputed(where, found[0], reported, dx_table) or deid_artefacts(described) \
            or elsewhere:
        return
    # a neighbour the caption also names (a haemorrhage of the thalamus and the basal ganglia) is a second
    # right answer, never a wrong option
    named = dx_table.mentioned(caption)
    near = [n for n in dx_table.near(where) if n not in named]
    # keys spread, as diagnoses'; and a key asked again is offered beside another option asked as often (the
    # template has a dozen items on 77 cases: a key asked twice among options never asked was the majority-answer
    # guesser's pick, 0.17 over chance)
    # (the neighbours asked most so far are the ones offered, STRUCTURE_OPTIONS of them: an option asked as often as
    # the key must be among those offered, not only among its neighbours, and a guesser that picks the structure most
    # often the key then meets it as a wrong option; +0.10 over chance on the dev cases laid out as case reports)
    # (and the first item of that key must have offered one too, by now: that guesser, leaving each item out,
    # otherwise finds the second's key on the first)
    prior = asked[f"structure:{where}"]
    near = sorted(near, key=lambda n: -asked[f"structure:{n}"])[:STRUCTURE_OPTIONS]
    offered = [n for n in dx_table.near(where) if asked[f"structure_offered:{where}:{n}"]]
    if len(near) >= 3 and prior < MAX_SAME_KEY and (prior == 0 or (
            any(asked[f"structure:{n}"] >= prior for n in near)
            and any(asked[f"structure:{n}"] >= prior for n in offered))):
        asked[f"structure:{where}"] += 1
        asked.update(f"structure_offered:{where}:{n}" for n in near)
        f["structure"] = where
        f["structure_options"] = near
        f["structure_caption"] = clip(described, 600)
        f["image"]["structure_figures"] = [_evidence(g) for g in figs]


def _caption_group(usable: list[Figure], case: Case, dx_table: Diagnoses, deciding: set[str]) -> list[Figure]:
    """The figures one caption was written for (two to six: the slices or sequences of a series its author
    described together; the usable ones of them, the first four shown), where that caption fully describes a finding
    on the kinds they are.
    Shown together they show what the caption says, which no one of them need show alone. Of several, a group with
    a kind that tells the disease from its mimics first, then the fuller caption."""
    groups: dict[str, list[Figure]] = {}
    for g in usable:
        groups.setdefault(fold(g.caption), []).append(g)
    found = []
    for caption, figs in groups.items():
        # (the figures of it that are usable, where it was written for six at most, the first four of them: a
        # sentence about a sequence left out is not read below)
        if not 2 <= len(figs) <= sum(1 for g in case.figures if fold(g.caption) == caption) <= 6:
            continue
        figs = figs[:4]
        if _full(visible_sentences(figs[0].caption, {g.kind or "" for g in figs}), dx_table):
            found.append(figs)
    found.sort(key=lambda gs: (not {g.kind for g in gs} & deciding, -caption_score(gs[0].caption)))
    return found[0] if found else []


def _group_facts(f: dict[str, Any], figs: list[Figure], dx_table: Diagnoses, asked: Counter[str],
                 reported: Reported) -> None:
    """The findings of a caption group, asked of all its figures; its structure where no key figure gave one."""
    described = as_seen(visible_sentences(figs[0].caption, {g.kind or "" for g in figs}), figs)
    f["image"]["group_figures"] = [_evidence(g) for g in figs]
    for g in figs:
        _note_dims(f, g, dx_table)
    f["group_caption"] = clip(described, 600)
    _set_sure(f, "group_caption_first", described)
    # (their sequences are not told: a sibling item may ask one)
    f["group_image_count"] = ("two images", "three images", "four images")[len(figs) - 2]
    if "structure" not in f:
        _structure_facts(f, described, figs[0].caption, figs, dx_table, asked, reported)


def _pair_facts(f: dict[str, Any], first: Figure, second: Figure, dx_table: Diagnoses) -> None:
    """Two figures of different sequences shown together, with the reference that describes both."""
    f["image"]["pair_first"], f["image"]["pair_second"] = _evidence(first), _evidence(second)
    _note_dims(f, first, dx_table)
    _note_dims(f, second, dx_table)
    f["pair_kind_names"] = [kind_name(first.kind or ""), kind_name(second.kind or "")]
    # one caption written for both images describes both
    # (a caption of both, or of their series, says what either kind shows, and keeps the side where either image
    # can show it)
    if fold(first.caption) == fold(second.caption):
        both = as_seen(visible_sentences(first.caption, {first.kind or "", second.kind or ""}), [first, second])
        f["pair_reference"] = f"Both images: {clip(both, 600)}"
    else:
        f["pair_reference"] = (f"First image: {clip(own_sentences(first), 600)} "
                               f"Second image: {clip(own_sentences(second), 600)}")


def _sequence_facts(f: dict[str, Any], case: Case, told: list[Figure], kinds_asked: Counter[str]) -> None:
    """The sequence item: a figure whose sequence its label and caption agree on, not one another item shows
    (``told``), the sequences asked kept even across cases."""
    # a T1, T2 or post-contrast T1 is asked only where the caption names it too: a label alone was wrong on 2 of 11
    # sequence items in a clinical read (a T2 labelled T1, a post-contrast T1 labelled T2); the other sequences
    # look unlike these, and their labels only need not contradict the caption
    # (and a T1 or T2 label not where its caption speaks of enhancement: that caption describes a post-contrast
    # image, perhaps this one: a "T2" label on a post-gadolinium T1 of ring-enhancing lesions failed a clinical read)
    mr = [fig for fig in case.figures
          if fig.kind in MR_KINDS and fig.renders and not fig.missing and _label_agrees(fig)
          and (fig.kind not in CONFUSABLE_KINDS or fig.kind in kinds_named(fig.caption))
          and not (fig.kind in ("T1", "T2") and _CONTRAST.search(fig.caption))]
    # the sequence of a figure another item shows is told in that item's context: asking it would ask what a
    # sibling states
    told_kinds = {x.kind for x in told}
    ask = [fig for fig in mr if fig.kind not in told_kinds]
    # a sequence is asked only while it is at most MAX_SEQUENCE_LEAD ahead of the least asked of the common ones:
    # where cases have only T1 or T2 images, asking each would make those the answer most of the time
    ask.sort(key=lambda fig: (kinds_asked[fig.kind or ""], KIND_RARITY.index(fig.kind or "T2")))
    floor = min(kinds_asked[k] for k in COMMON_KINDS)
    if ask and kinds_asked[ask[0].kind or ""] <= floor + MAX_SEQUENCE_LEAD:
        fig = ask[0]
        kinds_asked[fig.kind or ""] += 1
        f["image"]["kind_figure"] = _evidence(fig)
        f["kind_asked"] = kind_name(fig.kind or "")
        f["kind_options"] = _kind_options(fig, case, kinds_asked)


def _kind_options(fig: Figure, case: Case, kinds_asked: Counter[str]) -> list[str]:
    """The wrong options of a sequence item: every common sequence but the key, then the other sequence asked most
    so far: a guesser that picks the sequence most often the key finds it offered on every item, not only where it
    is the key (majority-answer guesser +0.14 over chance with four drawn at random from seven, on one layout).
    The longest-named sequence but the key is always among them: a guesser that picks the longest option then finds
    the key only where it is the longest-named of all, a susceptibility image (+0.18 over chance where the rarer
    sequences offered followed those asked, on the dev cases in their source's order)."""
    # (and one T1 among the options, before or after contrast, never both: one slice without an enhancing structure
    # in it does not tell them apart, 2 sequence items a clinical read found undecidable; where the key is neither,
    # which one is offered is drawn per case, by its source's id, so that a lone T1 is no sign of the key and the
    # draw does not change with the project's secret)
    draw = zlib.crc32(case.stable_id.encode()) % 2
    t1 = fig.kind if fig.kind in ("T1", "T1C") else ("T1", "T1C")[draw]
    common = [k for k in COMMON_KINDS if k != fig.kind and (k not in ("T1", "T1C") or k == t1)]
    others = [k for k in MR_KINDS if k != fig.kind and k in all_kinds()]
    longest = max(others, key=lambda k: len(kind_name(k)))
    rare = sorted((k for k in others if k not in COMMON_KINDS),
                  key=lambda k: (k != longest, -kinds_asked[k], KIND_RARITY.index(k)))
    return [kind_name(k) for k in [*common, *rare][:4] if k in all_kinds()]


def _distinct(options: list[str], key: str) -> list[str]:
    """``options`` less each one whose name holds the key's or an earlier option's, or is held by it ("Isolated
    optic pathway glioma" beside "Optic pathway glioma": one disease twice, a clinical read)."""
    kept: list[str] = []
    for o in options:
        a = f" {fold(o)} "
        if any(f" {fold(k)} " in a or a in f" {fold(k)} " for k in [key, *kept]):
            continue
        kept.append(o)
    return kept


def _compartment_facts(f: dict[str, Any], figs: list[Figure], site: str | None, dx_table: Diagnoses,
                       asked: Counter[str]) -> None:
    """The compartment the case's disease lies in (the table's site: a meningioma extra-axial, a colloid cyst
    intraventricular), asked of the figures a diagnosis item shows, where their captions do not put the finding in
    another compartment ("a suprasellar epidermoid": extra-axial by the table, sellar by where it lies; a neighbour
    both could name is no key) and the key is not already too common among compartment items."""
    # (all of them, not the first alone: on one slice a faint finding left the default answer, intra-axial, the one
    # a reader would give without seeing it, and a bone lesion barely showed on a sagittal T1: a clinical read)
    if site not in COMPARTMENTS:
        return
    fig = figs[0]
    caption = own_sentences(fig) or fig.caption
    finding = _finding_sentence(caption)
    where = dx_table.site_of(_structure(caption, dx_table))
    if (where is not None and where != site) or _WIDE_VENTRICLES.search(finding):
        return
    # outside the brain tissue the finding is a lesion, or lies in a structure of the compartment (the inner table)
    # "in the region of the third ventricle": a mass next to two compartments
    if site != "intra-axial" and re.search(r"\bregion of\b", finding, re.I):
        return
    if site != "intra-axial" and not (LESION.search(finding) or site in {dx_table.site_of(s) for s in
                                                                          dx_table.mentioned(finding)}):
        return
    captions = [own_sentences(g) or g.caption for g in figs]
    if any(said.search(c) for c in captions for other, said in _SAID_SITE.items() if other != site):
        return
    counts = {s: asked[f"compartment:{s}"] for s in COMPARTMENTS}
    key, total, lead = f"compartment:{site}", sum(counts.values()), max(n for s, n in counts.items() if s != site)
    # a key may lead the commonest other one by one; beyond that only within its share
    if asked[key] > lead and asked[key] + 1 > MAX_COMPARTMENT_SHARE * (total + 1):
        return
    asked[key] += 1
    f["image"]["compartment_figures"] = [_evidence(g) for g in figs]
    f["compartment"] = COMPARTMENTS[site]
    f["compartment_options"] = [v for k, v in COMPARTMENTS.items() if k != site]


def _pair(scored: list[Figure], case: Case, deciding: set[str], dx_table: Diagnoses) -> tuple[Figure, Figure] | None:
    """Two figures of different kinds whose captions each describe the figure they sit under (each its own
    caption, or one caption written for the two of them, or for a series of six at most of which they are two, that
    names the lesion and fully describes it on their two kinds: where it lies too, "a corresponding focus of
    restricted diffusion" on a DWI and its ADC map left a history of sudden hemiparesis all the answer, a clinical
    read). A pair with a kind that tells the disease from its mimics (``deciding``) first, then two of one plane (one
    level seen in two sequences)."""
    pairs = []
    for a in scored:
        shared = [g for g in case.figures if fold(g.caption) == fold(a.caption)]
        for b in scored:
            if a is b or a.kind == b.kind:
                continue
            # (one caption of both names the lesion, not only what it does: "extensive vasogenic oedema" of a
            # meningioma's T2 and post-contrast T1 described neither the mass nor its enhancement, a clinical read)
            if (_own_caption(a, case) and _own_caption(b, case)) or (
                    2 <= len(shared) <= 6 and b in shared and _full(both := visible_sentences(
                        a.caption, {a.kind or "", b.kind or ""}), dx_table)
                    and any(_names_lesion(x) for x in CLAUSES.split(both))):
                pairs.append((a, b))
    pairs.sort(key=lambda pr: (not {pr[0].kind, pr[1].kind} & deciding, pr[0].plane != pr[1].plane))
    return pairs[0] if pairs else None

