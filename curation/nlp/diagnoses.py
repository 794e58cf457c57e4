"""Diagnoses by one name each (``templates/knowledge/diagnoses.yaml``): the name a report's diagnosis stands for,
and a written differential ("• Astrocytoma (pilocytic or fibrillary)\\n• Ependymoma ...", "A, B, and C") read
as the whole diagnoses it lists, each by its one name. What a report says beside a name (how it was confirmed, a
grade, a parenthesis) does not change which disease it is."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from curation.errors import ParamsError, validation_message
from curation.figure_kinds import all_kinds

SITES = ("intra-axial", "extra-axial", "intraventricular", "sellar", "bone", "vascular", "spine", "orbit", "ear",
         "diffuse")


class DiagnosisEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    aka: list[str]
    site: str
    mimics: list[str]
    # what in a history alone gives the diagnosis (acromegaly -> a pituitary adenoma): no item asks it of such a case
    clues: list[str] = []
    # whether the image alone decides it (a malformation: yes; abuse, which clotting disorders mimic: no); unset: by
    # where it lies (outside the parenchyma, yes)
    direct: bool | None = None
    # diagnoses that include this one (a low-grade glioma includes an oligodendroglioma): never a wrong option for it
    within: list[str] = []
    # the image kinds (curation/figure_kinds.yaml) that show what tells it from its mimics (an enhancing tumour: a
    # post-contrast image; an epidermoid: diffusion): a diagnosis item shows one of them first where the case has one
    shown_by: list[str] = []
    # aliases that a report uses for it but that name a wider group its mimics share ("intracerebral haemorrhage"
    # for a hypertensive one, "stroke" for an ischaemic one): they map a case to it, but a caption that names it
    # only by one of them has not read it from the image
    broad: list[str] = []
    # whether only histology tells it from its mimics (a chordoid glioma: an enhancing third-ventricle mass that a
    # hypothalamic glioma or a papillary craniopharyngioma also is; a myxopapillary ependymoma of the filum, which a
    # cauda equina schwannoma looks like in three clinical reads): no item asks the diagnosis of its images
    histology: bool = False
    # the structure whose form defines it, where its mimics share the rest (Mondini's incomplete partition: the
    # cochlea, where a dilated vestibule is shared with its mimics): a diagnosis item shows an image whose caption
    # names it, else none is made
    seen_in: list[str] = []
    # the name it goes by where the case's disease lies elsewhere (a skull lesion's differential "metastasis" is a
    # skull metastasis, not the table's cerebral one): site -> name, offered as such
    at_site: dict[str, str] = {}


class StructureEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    aka: list[str]
    near: list[str]
    site: str | None = None  # the compartment the structure is (one of SITES)
    midline: bool = False  # a structure on the midline (a mass in it has no one side)


class DiagnosisTable(BaseModel):
    model_config = ConfigDict(extra="forbid")
    diagnoses: dict[str, DiagnosisEntry]
    noise: list[str] = []
    structures: dict[str, StructureEntry] = {}


# one spelling for both sides of a match: British and American forms, hyphens and apostrophes as spaces
_SPELLING = (("haem", "hem"), ("oedem", "edem"), ("ischaem", "ischem"), ("tumour", "tumor"), ("paed", "ped"),
             ("glycaem", "glycem"), ("aemia", "emia"), ("'s", "s"), ("’s", "s"))


def fold(text: str) -> str:
    """``text`` lower-cased with one spelling: what two names are compared as."""
    t = text.lower()
    for a, b in _SPELLING:
        t = t.replace(a, b)
    return " ".join(re.sub(r"[^a-z0-9*+]+", " ", t).split())


class Diagnoses:
    """The table, with every name and alias folded for matching."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        try:
            self.table = DiagnosisTable.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
        except OSError as exc:
            raise ParamsError(f"cannot read ({exc.__class__.__name__})", path) from None
        except yaml.YAMLError as exc:
            raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", path) from None
        except ValidationError as exc:
            raise ParamsError(validation_message(exc), path) from None
        self.names: dict[str, str] = {}  # folded alias -> name
        for name, entry in self.table.diagnoses.items():
            if entry.site not in SITES:
                raise ParamsError(f"{name}: site {entry.site!r} is not one of {', '.join(SITES)}", path)
            for alias in [name, *entry.aka]:
                key = fold(alias)
                if self.names.get(key, name) != name:
                    raise ParamsError(f"{alias!r} names both {self.names[key]!r} and {name!r}", path)
                self.names[key] = name
        kinds = set(all_kinds())
        for name, entry in self.table.diagnoses.items():
            if set(entry.shown_by) - kinds:
                raise ParamsError(f"{name}: shown_by {sorted(set(entry.shown_by) - kinds)} are not image kinds of "
                                  "curation/figure_kinds.yaml", path)
            if {fold(b) for b in entry.broad} - {fold(a) for a in entry.aka}:
                raise ParamsError(f"{name}: broad names {sorted(set(entry.broad) - set(entry.aka))} are not among "
                                  "its aka", path)
            for m in entry.mimics:
                if self.names.get(fold(m)) == name:
                    raise ParamsError(f"{name}: mimic {m!r} is another name of it", path)
        self._noise = re.compile("|".join(f"(?:{n})" for n in self.table.noise), re.I) if self.table.noise else None
        aliases = sorted(self.names, key=len, reverse=True)
        self._alias = re.compile(r"\b(" + "|".join(re.escape(a) for a in aliases) + r")\b")
        for name, s in self.table.structures.items():
            if s.site is not None and s.site not in SITES:
                raise ParamsError(f"{name}: site {s.site!r} is not one of {', '.join(SITES)}", path)
        self.structure_names = {fold(a): name for name, e in self.table.structures.items() for a in [name, *e.aka]}
        names = "|".join(re.escape(w) for w in sorted(self.structure_names, key=len, reverse=True))
        # a structure the finding lies in ("in the left thalamus"), not one it acts on ("mass effect upon the 4th
        # ventricle", "displacing the pons"): the preposition before it says which; a spinal level may stand between
        # ("of the L5-S1 intervertebral disc")
        self._site = re.compile(r"\b(?:in|within|involving|of|at|along|from|throughout)\s+(?:the\s+)?"
                                r"(?:(?:left|right|bilateral|both|l|r|anterior|posterior|medial|lateral|inferior|"
                                r"superior|mid|midline|[ctls]\d{1,2}(?:\s[ctls]?\d{1,2})?)\s+)*(" + names + r")\b")
        self._acts_on = re.compile(r"\b(upon|on|displac\w*|compress\w*|effac\w*|abut\w*|toward\w*|into|"
                                   r"extend\w*|extension|obstruct\w*|obliterat\w*|invasion|invad\w*|"
                                   r"erosion|erod\w*)\s+$")
        # or a structure named before the lesion itself, as radiology writes a place ("a partially cystic suprasellar
        # mass", "clivus lesion", "left thalamic haemorrhage"), with its side before it
        self._named_before = re.compile(r"\b(?:(?:left|right|bilateral|l|r)\s+)?(" + names
                                        + r")\s+(?:mass(?:es)?|lesions?|tumou?rs?|cysts?|h[a]?emorrhages?|"
                                          r"h[a]?ematomas?|infarcts?|infarction|abscess(?:es)?|nodules?|"
                                          r"collections?)\b")
        # a lesion denied ("with no subdural collection") is no place
        self._denied = re.compile(r"\b(?:no|not|without)\s+(?:\w+\s+){0,2}$")

    def name(self, text: str | None) -> str | None:
        """The one name of the diagnosis ``text`` states: its longest alias (the earliest of equal length), or
        None where it names none the table knows."""
        if not text:
            return None
        t = fold(self._noise.sub(" ", text) if self._noise else text)
        best: tuple[int, int, str] | None = None
        for m in self._alias.finditer(t):
            cand = (-len(m.group(1)), m.start(), self.names[m.group(1)])
            if best is None or cand < best:
                best = cand
        return best[2] if best else None

    def shows_defining(self, name: str, caption: str) -> bool:
        """Whether ``caption`` names the structure that defines diagnosis ``name`` (``seen_in``; True where the
        table names none)."""
        entry = self.entry(name)
        words = entry.seen_in if entry else []
        return not words or any(re.search(rf"\b{re.escape(fold(w))}", fold(caption)) for w in words)

    def given_by(self, name: str, history: str) -> bool:
        """Whether ``history`` names the diagnosis or one of its clues (a word of the history, not of the image)."""
        e = self.table.diagnoses.get(name)
        h = f" {fold(history)} "
        words = [name, *(e.aka if e else []), *(e.clues if e else [])]
        return any(f" {fold(w)} " in h for w in words if len(fold(w)) >= 3)

    def at(self, name: str, site: str | None) -> str:
        """``name`` as it goes where a disease of ``site`` lies (``at_site``): "Cerebral metastasis" in a bone
        lesion's differential is a skull metastasis."""
        e = self.table.diagnoses.get(name)
        return e.at_site.get(site, name) if e and site else name

    def canonical(self, name: str) -> str:
        """A name as the table writes it (a mimic listed under another of its names resolves to that)."""
        return self.names.get(fold(name), name)

    def entry(self, name: str | None) -> DiagnosisEntry | None:
        return self.table.diagnoses.get(name) if name else None

    def structure(self, text: str) -> str | None:
        """The structure a finding lies in, by the first "in the ..." of ``text`` that names one (``text`` already
        one sentence that describes an abnormality)."""
        found = self.structure_at(text)
        return found[0] if found else None

    def structure_at(self, text: str) -> tuple[str, str] | None:
        """The structure ``structure`` reads, with the words of ``fold(text)`` up to and including its naming
        ("widening of the diploic space of the occipital"): what a side must be said within to be its side."""
        t = fold(text)

        def lead(m: re.Match[str]) -> str:  # the words just before a naming
            return t[max(0, m.start() - 40):m.start()]

        site = next((m for m in self._site.finditer(t) if not self._acts_on.search(lead(m))), None)
        before = next((m for m in self._named_before.finditer(t)
                       if not self._acts_on.search(lead(m)) and not self._denied.search(lead(m))), None)
        # the place named first is the principal lesion's ("left thalamic haemorrhage with blood layering in the
        # occipital horns")
        if before is not None and (site is None or before.start() < site.start()):
            return self.structure_names[before.group(1)], t[:before.end(1)]
        return (self.structure_names[site.group(1)], t[:site.end()]) if site is not None else None

    def mentioned(self, text: str) -> set[str]:
        """Every structure ``text`` names anywhere, by its one name (or as a near name is written)."""
        t = f" {fold(text)} "
        out = {name for alias, name in self.structure_names.items() if f" {alias} " in t}
        out |= {n for e in self.table.structures.values() for n in e.near if f" {fold(n)} " in t}
        return out

    def site_of(self, structure: str | None) -> str | None:
        """The compartment a structure is (the fourth ventricle: intraventricular), None where the table gives none."""
        e = self.table.structures.get(structure) if structure else None
        return e.site if e else None

    def midline(self, structure: str) -> bool:
        e = self.table.structures.get(structure)
        return bool(e and e.midline)

    def near(self, structure: str) -> list[str]:
        e = self.table.structures.get(structure)
        return list(e.near) if e else []

    def differential(self, texts: list[str]) -> list[str]:
        """The whole diagnoses a written differential lists, each once by its one name, in the order written.
        Parts the table does not know are left out: a fragment ("and infections such as tuberculosis", "wrong age
        group") is never an option."""
        return list(self.differential_as_written(texts))

    def differential_as_written(self, texts: list[str]) -> dict[str, str]:
        """``differential``'s diagnoses (its one name -> the words the differential named it by, less the table's
        noise words and hedges: "less likely lymphoma" -> "lymphoma"): "Metastasis" in the differential of a skull
        lesion is a skull metastasis, which the table's one name would call cerebral."""
        out: dict[str, str] = {}
        for text in texts:
            for part in _parts(text):
                name = self.name(part)
                if name and name not in out:
                    words = _HEDGE.sub(" ", part)
                    words = self._noise.sub(" ", words) if self._noise else words
                    out[name] = " ".join(words.split()).strip(" .,:;-")
        return out


# a differential's items: lines, bullets, numbers, ">" and "-" markers, semicolons; a line of short items joined by
# commas or "vs"; what a parenthesis or a dash adds to an item ("- wrong age group") is not an item
_ITEM_BREAK = re.compile(r"[\n;•·>]|(?:^|\s)(?:\d+[.)]|[-–]\s)|\bvs\.?\b|\bversus\b", re.I)


# how sure a differential's author was of an item, or what to do about it: not part of its name
_HEDGE = re.compile(r"\b(?:(?:less|more|most)\s+|un)?likely\b|\bconsider\w*|\brule out\b|\br/o\b|\?", re.I)


def _parts(text: str) -> list[str]:
    out = []
    for chunk in _ITEM_BREAK.split(text):
        chunk = re.sub(r"\(.*?\)", " ", chunk)
        for piece in re.split(r",|\bor\b|\band\b", chunk):
            piece = piece.strip(" .:*-\t")
            if piece and len(piece.split()) <= 8:
                out.append(piece)
    return out


@functools.lru_cache(maxsize=4)
def load(path: str) -> Diagnoses:
    return Diagnoses(path)
