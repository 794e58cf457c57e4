"""Clinical-text PHI removal, recall first; policy (entities, patterns, cue words, thresholds, tags) in phi_text.yaml.

Three passes, each adding spans, none removing one another's:
1. Presidio on spaCy: NER (persons, places, dates) and the pattern recognizers of the policy (dates of every
   clinical style, phone numbers, record numbers with separators, ages over 89).
2. A Philter-style recall pass over word tokens (``recall.py``): cue words (titles, credentials, relatives,
   institutions, transfers), person-name and place lists and word frequencies from packages.
3. Propagation: a name, place or id found anywhere in a document (or given as a known identifier of the
   case) is masked at every whole-token occurrence in every text of that case, in any letter case.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from curation.params import TextDeidParams


@lru_cache(maxsize=1)
def policy() -> dict[str, Any]:
    return yaml.safe_load(resources.files("curation.deid").joinpath("phi_text.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=4)
def _analyzer(model: str) -> Any:
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    provider = NlpEngineProvider(nlp_configuration={
        "nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": model}],
    })
    engine = AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])
    for entity, pats in policy()["patterns"].items():
        engine.registry.add_recognizer(PatternRecognizer(
            supported_entity=entity,
            patterns=[Pattern(name=f"{entity}_{i}", regex=rx, score=score) for i, (rx, score) in enumerate(pats)],
        ))
    return engine


DATE_START = re.compile(r"\d|'\d|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b|"
                        r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b", re.IGNORECASE)
TITLE = re.compile(r"(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof)\.?\s+", re.IGNORECASE)
TOKEN = re.compile(r"[^\W_]+")
PROPAGATED = ("NAME", "LOCATION", "ID", "ADDRESS")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    tag: str


class TextDeidentifier:
    def __init__(self, params: TextDeidParams, secret: bytes) -> None:
        from curation.deid.medical import vocabulary
        from curation.deid.recall import Eponyms, RecallPass

        self.params = params
        self.secret = secret
        pol = policy()
        self.entities: dict[str, str] = pol["entities"]
        self.specific = re.compile(pol["specific_date"], re.IGNORECASE)
        self.formats: list[str] = pol["date_formats"]
        self.partial_formats: list[str] = pol["partial_date_formats"]
        self.allow = set(pol["allow_list"])
        self.allow_lower = {a.lower() for a in self.allow}
        self.acquisition = self.allow | set(pol["acquisition_words"])
        self.acquisition_upper = {a.upper() for a in self.acquisition}
        self.not_date = [(re.compile(before, re.IGNORECASE), re.compile(ratio)) for before, ratio in pol["not_a_date"]]
        self.medical = vocabulary(tuple(pol["medical_terms"]))
        self.eponyms = Eponyms(pol["eponyms"], pol["eponym_heads"],
                               self.medical.eponyms | set(pol["vocabulary_eponyms"]), pol["vocabulary_eponym_heads"])
        self.recall = RecallPass(pol["recall"], frozenset(self.allow), self.eponyms,
                                 self.medical) if params.recall_pass else None
        self.may_verb = re.compile(rf"\s+(?:{'|'.join(map(re.escape, pol['may_verb_followers']))})\b")
        self.ner_entities = set(pol["ner_entities"])
        self.trimmed = self.ner_entities | set(pol["trimmed_entities"])
        self.spaced_out = re.compile(pol["spaced_out"])

    def _allowed_words(self, chunk: str) -> bool:
        """Whether a text or an entity is made only of allowed and acquisition words and codes ("Sag T1 MPRAGE",
        "Axial T2 TSE", "3D")."""
        words = re.findall(r"[^\W_]+", chunk)
        # as written, or all in capitals ("AXIAL"); a capitalised "Tse" is a surname, not the sequence TSE
        return bool(words) and all(w in self.acquisition or (w.isupper() and w in self.acquisition_upper)
                                   or re.fullmatch(r"\d+[a-z]?|[a-z]\d+", w, re.I) for w in words)

    # -- finding -------------------------------------------------------------------------------------------------
    def find(self, text: str, known: Iterable[str] = ()) -> list[Span]:
        """Spans of one document, propagated within it (and to the ``known`` identifiers of its case)."""
        return self.find_all([text], known)[0]

    def find_all(self, texts: Sequence[str], known: Iterable[str] = ()) -> list[list[Span]]:
        """Spans of several documents of one case: an identifier found in one is masked in all of them."""
        found = [self._detect(t) for t in texts]
        if not self.params.propagate:
            return found
        terms = {k.lower() for k in known if k and k.strip()}
        for text, spans in zip(texts, found, strict=True):
            for s in spans:
                if s.tag in PROPAGATED:
                    terms.update(self._propagatable(text[s.start:s.end]))
        if not terms:
            return found
        return [_merge(spans + self._occurrences(text, terms)) for text, spans in zip(texts, found, strict=True)]

    def _detect(self, text: str) -> list[Span]:
        if not text.strip() or self._allowed_words(text):  # a series description in acquisition words only
            return []
        results = _analyzer(self.params.spacy_model).analyze(
            text=text, language="en", entities=list(self.entities), score_threshold=self.params.score_threshold,
            allow_list=list(self.allow),
        )
        spans = []
        medical = self._medical_chars(text) if self.recall is not None else set()
        for r in results:
            tag = self.entities[r.entity_type]
            chunk = text[r.start:r.end]
            if r.entity_type == "DATE_TIME" and not self.specific.search(chunk):
                continue  # a duration or a bare year is not an identifier
            if r.entity_type in self.ner_entities and self._medical_words(text, r.start, r.end, medical):
                continue  # "Restricted diffusion", "Chiari I Malformation", "T1W w/Gadolinium"
            if r.entity_type == "TITLED_NAME" and chunk.startswith("MR") and self._medical_words(
                    text, r.start + 2, r.end, medical):
                continue  # "MR Angiography": the modality
            if tag == "DATE" and self._not_a_date_word(text, r.start, r.end, medical):
                continue
            if r.entity_type in self.trimmed and (chunk.strip(" .,'’") in self.allow or self._allowed_words(chunk)
                                                  or self.eponyms.at(text, r.start, r.end)):
                continue
            if tag == "DATE" and self._score_not_date(text, r.start, chunk):
                continue
            start, end = r.start, r.end
            if r.entity_type == "ORGANIZATION" and " " not in chunk.strip() and _sentence_initial(text, r.start):
                continue  # a capitalised first word ("Cardioembolic stroke ...") is not an organisation
            if self.recall is not None and r.entity_type in self.trimmed:
                if r.entity_type in self.ner_entities and not self.recall.keep_ner(
                        chunk, names_count=r.entity_type != "ORGANIZATION"):
                    continue
                start, end = self.recall.trim(text, start, end)
                if end <= start:
                    continue
            if tag == "DATE":  # NER spans often take the word before a date ("on", "seen"); keep that word
                first = DATE_START.search(chunk)
                if first:
                    start += first.start()
            if tag == "NAME":  # keep the title: "Dr. [NAME]" (on the span as trimmed, not NER's chunk)
                title = TITLE.match(text, start, end)
                if title and title.end() < end:
                    start = title.end()
            while end > start and text[end - 1].isspace():
                end -= 1
            if end > start:
                spans.append(Span(start, end, tag))
        if self.recall is not None:
            spans += [Span(s, e, tag) for s, e, tag in self.recall.spans(text)]
        spans += self._spaced_out(text)
        return _merge(spans)

    def _medical_chars(self, text: str) -> set[int]:
        assert self.recall is not None
        return {s for s, _ in self.recall.medical_tokens(text)}

    def _medical_words(self, text: str, start: int, end: int, medical: set[int]) -> bool:
        """Whether an NER span is made only of medical words and eponyms in their context, function words, single
        letters and codes ("T1W", "C1"), with at least one medical word or eponym."""
        seen = False
        for m in TOKEN.finditer(text, start, end):
            w = m.group()
            if m.start() in medical:
                seen = True
            elif not (any(c.isdigit() for c in w) or len(w) == 1 or w.lower() in self.allow_lower
                      or w.lower() in _stop_words()):
                return False
        return seen

    def _not_a_date_word(self, text: str, start: int, end: int, medical: set[int]) -> bool:
        """An ordinal before a medical word ("4th ventricle", "3rd nerve palsy") or the verb "may" ("This may
        represent") is no date."""
        chunk = text[start:end].strip()
        if chunk.lower() == "may" and self.may_verb.match(text, end):
            return True
        if re.fullmatch(r"\d{1,2}(?:st|nd|rd|th)", chunk):
            nxt = TOKEN.search(text, end)
            return nxt is not None and nxt.start() in medical and not text[end:nxt.start()].strip()
        return False

    def _spaced_out(self, text: str) -> list[Span]:
        """Letter-spaced words ("J o h n  S m i t h"), masked whole where a word closed up is an identifier."""
        out = []
        for m in self.spaced_out.finditer(text):
            words = [w.replace(" ", "") for w in re.split(r" {2,}", m.group())]
            if self.recall is None or any(self.recall.spaced_word_is_identifier(w) for w in words):
                out.append(Span(m.start(), m.end(), "NAME"))
        return out

    def _score_not_date(self, text: str, start: int, chunk: str) -> bool:
        """A ratio that reads as month/day but is a score in its context: strength 4/5, pain 7/10, MoCA 8/30."""
        before = text[max(0, start - 40):start]
        return any(ratio.fullmatch(chunk.strip()) and ctx.search(before) for ctx, ratio in self.not_date)

    def _propagatable(self, chunk: str) -> set[str]:
        """Words of an identifier worth masking everywhere: not function words, cue words or clinical terms."""
        out = set()
        r = self.recall
        for tok in TOKEN.findall(chunk):
            low = tok.lower()
            if low in self.allow_lower:
                continue
            if tok.isdigit() and len(tok) >= 4:
                out.add(low)
            elif tok.isalpha() and len(tok) >= 2 and (r is None or not r.is_cue_or_common(low)):
                out.add(low)
        return out

    def _occurrences(self, text: str, terms: set[str]) -> list[Span]:
        """Whole-token occurrences of ``terms`` (single tokens or phrases), any letter case; an eponym where it
        names a disease or a structure stays ("Dr. Wilson" does not take "Wilson's disease" with it)."""
        out = []
        for m in TOKEN.finditer(text):
            if m.group().lower() in terms and not self.eponyms.at(text, m.start(), m.end()):
                out.append(Span(m.start(), m.end(), "NAME" if m.group().isalpha() else "ID"))
        multi = [t for t in terms if not TOKEN.fullmatch(t)]
        for t in multi:
            for m in re.finditer(rf"(?<![^\W_]){re.escape(t)}(?![^\W_])", text, re.IGNORECASE):
                out.append(Span(m.start(), m.end(), "ID"))
        return out

    # -- replacing -----------------------------------------------------------------------------------------------
    def deidentify(self, text: str, date_shift_days: int | None = None, patient_key: str = "",
                   known: Iterable[str] = ()) -> tuple[str, list[Span]]:
        return self.deidentify_all([text], date_shift_days, patient_key, known)[0]

    def deidentify_all(self, texts: Sequence[str], date_shift_days: int | None = None, patient_key: str = "",
                       known: Iterable[str] = ()) -> list[tuple[str, list[Span]]]:
        return [(self._apply(text, spans, date_shift_days, patient_key), spans)
                for text, spans in zip(texts, self.find_all(texts, known), strict=True)]

    def _apply(self, text: str, spans: list[Span], shift: int | None, key: str) -> str:
        out = []
        pos = 0
        for s in spans:
            out.append(text[pos:s.start])
            out.append(self._replacement(text[s.start:s.end], s.tag, shift, key))
            pos = s.end
        out.append(text[pos:])
        return "".join(out)

    def _replacement(self, chunk: str, tag: str, shift: int | None, key: str) -> str:
        if tag == "DATE" and shift is not None:
            shifted = self._shift_date(chunk, shift)
            if shifted is not None:
                return shifted
        if self.params.replacement == "surrogate" and tag in ("NAME", "ID", "LOCATION", "ADDRESS"):
            h = hmac.new(self.secret, f"{key}\x1f{tag}\x1f{chunk.lower()}".encode(), hashlib.sha256).hexdigest()[:6]
            return f"[{tag}-{h}]"
        return f"[{tag}]"

    def _shift_date(self, chunk: str, shift: int) -> str | None:
        """A full date moves back by the patient's offset (ISO out); a month/day without a year moves by the same
        days within a non-leap year (so intervals inside a note hold); anything else cannot be shifted safely."""
        cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", chunk.strip(" .,()"))
        for fmt in self.formats:
            try:
                return (datetime.strptime(cleaned, fmt) - timedelta(days=shift)).strftime("%Y-%m-%d")
            except ValueError:
                continue
        for fmt in self.partial_formats:
            try:
                day = datetime.strptime(f"2001 {cleaned}", f"%Y {fmt}") - timedelta(days=shift)
            except ValueError:
                continue
            return f"{day.month}/{day.day}"
        return None


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS)


def _sentence_initial(text: str, start: int) -> bool:
    before = text[:start].rstrip(" \t")
    return not before or before[-1] in ".!?:;\n"


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping detections collapse into one span (the longer one's tag wins)."""
    spans = sorted(spans, key=lambda s: (s.start, -(s.end - s.start)))
    merged: list[Span] = []
    for s in spans:
        if merged and s.start < merged[-1].end:
            last = merged[-1]
            if s.end > last.end:
                merged[-1] = Span(last.start, s.end, last.tag)
            continue
        merged.append(s)
    return merged
