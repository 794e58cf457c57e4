"""The recall pass of text de-identification: Philter-style rules over word tokens.

NER misses names in lower case or capitals, first names of relatives, signatures and hospital names. This
pass flags a token as a name or a place from three kinds of evidence, all configured in phi_text.yaml
(``recall:``): cue words around it (titles, credentials, relatives, contact verbs, institutions, transfers),
membership in person-name or place lists that are not common English words, and letter case where the note
has mixed case. Word lists come from packages (``lexicon.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from curation.deid.lexicon import Lexicon, lexicon
from curation.deid.medical import MedicalVocabulary

WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
SENTENCE_BREAK = set(".!?:;*-#>\n")


@dataclass
class Tok:
    start: int
    end: int
    text: str
    low: str
    line: int
    initial_of_sentence: bool
    eponym: bool = False
    medical: bool = False

    @property
    def alpha(self) -> bool:
        return self.text.replace("'", "").replace("’", "").isalpha()

    @property
    def title(self) -> bool:
        return self.text[:1].isupper() and self.text[1:].islower() and len(self.text) > 1

    @property
    def upper(self) -> bool:
        return self.text.isupper() and len(self.text) > 1

    @property
    def letter(self) -> bool:
        return len(self.text) == 1 and self.text.isalpha()


class Eponyms:
    """Eponyms kept where they name a disease, sign or structure ("Wilson's disease", "circle of Willis").

    ``names`` (the policy's own list) are kept before any of ``heads``, signs included ("Babinski upgoing");
    ``strict_names`` (the medical vocabulary's eponyms, common surnames among them) only before ``strict_heads``
    ("Jefferson fracture", not "Jefferson on the phone")."""

    def __init__(self, names: list[str], heads: list[str], strict_names: Iterable[str] = (),
                 strict_heads: Iterable[str] = ()) -> None:
        self.policy_names = frozenset(n.lower() for n in names)
        self.names = self.policy_names | frozenset(n.lower() for n in strict_names)
        self.after = self._after(heads)
        self.strict_after = self._after(list(strict_heads) or heads)
        self.before = re.compile(
            r"(?:circle|area|foramen|foramina|vein|nucleus|aqueduct|space|spaces|artery|canal|pouch) of\s+$",
            re.IGNORECASE)

    @staticmethod
    def _after(heads: list[str]) -> re.Pattern[str]:
        word = r"[A-Za-zÀ-ÿ]+"
        # "Chiari I malformation", "Chiari type 1 malformation" too
        return re.compile(rf"(?:['’]s)?(?:-{word})*(?:['’]s)?(?:\s+(?:and|&|/)\s+{word}(?:-{word})*)?"
                          rf"(?:\s+(?:type\s+)?(?:I|II|III|IV|[1-4]))?"
                          rf"\s+(?:{'|'.join(map(re.escape, heads))})\b", re.IGNORECASE)

    def at(self, text: str, start: int, end: int) -> bool:
        words = WORD.findall(text[start:end])
        lows = [w.lower().removesuffix("'s").removesuffix("’s") for w in words]
        if not words or not all(w in self.names for w in lows):
            return False
        left = start
        while left > 0 and text[left - 1] == "-":
            m = re.search(r"[A-Za-zÀ-ÿ]+$", text[:left - 1])
            if not m:
                break
            left = m.start()
        right = end
        while right < len(text) and text[right] == "-":
            m = re.match(r"[A-Za-zÀ-ÿ]+", text[right + 1:])
            if not m:
                break
            right += 1 + m.end()
        # (and eponyms written apart that name one thing, "Arnold Chiari II malformation", "Dandy Walker cyst": the
        # words after it that are eponyms too are part of it)
        while (m := re.match(r"\s+([A-Za-zÀ-ÿ]+(?:-[A-Za-zÀ-ÿ]+)*)", text[right:])) and all(
                w.lower() in self.names for w in m.group(1).split("-")):
            right += m.end()
        # one part of a hyphenated eponym ("Creutzfeldt-Jakob", "Guillain-Barré"): the whole compound decides, by the
        # policy's heads only where every part is one of the policy's eponyms
        parts = [w.lower().removesuffix("'s").removesuffix("’s") for w in WORD.findall(text[left:right])]
        after = self.after if all(p in self.policy_names for p in parts) else self.strict_after
        return bool(after.match(text, right) or self.before.search(text[max(0, left - 16):left]))


class RecallPass:
    def __init__(self, cfg: dict[str, Any], allow: frozenset[str] = frozenset(),
                 eponyms: Eponyms | None = None, medical: MedicalVocabulary | None = None) -> None:
        self.lexicon: Lexicon = lexicon()
        self.eponyms = eponyms
        self.medical = medical
        self.cfg = cfg
        s = {k: frozenset(w.lower() for w in v) for k, v in cfg["words"].items()}
        self.strong_titles = s["strong_titles"]
        self.titles = s["titles"]
        self.credentials = s["credentials"]
        self.after_name = s["after_name"]
        self.presence = tuple(cfg["words"]["presence_after_name"])
        self.relatives = s["relatives"]
        self.contact = s["contact_verbs"]
        self.contact_with = s["contact_with"]
        self.name_fields = s["name_fields"]
        self.clinical_ending = re.compile(cfg["clinical_endings"])
        self.inst_masked = s["institution_words_masked"]
        self.inst_kept = s["institution_words_kept"]
        self.loc_preps = s["location_prepositions"]
        self.moves = s["transfer_verbs"]
        self.not_location_before = s["not_location_before"]
        self.safe = s["clinical_words"] | {a.lower().removesuffix("'s") for a in allow}
        # unions the per-token loop asks about, built once
        self.name_cues = self.titles | self.relatives | self.contact
        self.before_credential = self.credentials | self.after_name
        self.institution = self.inst_masked | self.inst_kept
        self.acronym_before = self.moves | {"the"}
        self.units = s["units"]
        self.cues = frozenset().union(*(v for k, v in s.items() if k != "clinical_words"))
        self.never_names = self.cues - self.inst_masked - self.inst_kept  # a title or a relative is not a name
        self.acronym = re.compile(cfg["hospital_acronym"])
        self.name_zipf: float = cfg["name_zipf"]
        self.context_zipf: float = cfg["context_name_zipf"]
        self.rare_zipf: float = cfg["rare_zipf"]
        self.place_zipf: float = cfg["place_zipf"]
        self.first_name_zipf: float = cfg["first_name_zipf"]
        self.capital_first_name_zipf: float = cfg["capital_first_name_zipf"]
        self.abbreviated_titles = frozenset(w.lower() for w in cfg["words"]["abbreviated_titles"])
        self.capital_terms = frozenset(cfg.get("capital_terms", []))

    # -- token predicates ----------------------------------------------------------------------------------------
    def _stop(self, t: Tok) -> bool:
        return (t.low in self.lexicon.stop_words or t.low in self.safe or not t.alpha or t.eponym or t.medical
                or t.low in self.never_names or self._clinical(t.low) or self.is_medical(t.low))

    def is_medical(self, low: str) -> bool:
        """A word of the medical vocabulary (medical.py) that no census list holds as a name, one of the policy's
        medical terms, or the adjective of a vocabulary noun ("vasculitic", "embolic"): never a name or a place,
        wherever it stands."""
        m = self.medical
        return m is not None and low not in self.lexicon.stop_words and low not in self.cues and (
            low in m.terms or (low in m.words and not self.lexicon.is_name(low))
            or any(n in m.words for n in _nouns_of(low)))

    def _mark(self, text: str, toks: list[Tok]) -> None:
        """Eponyms where they name a disease or a structure; medical words, and the vocabulary's words that are also
        census names ("fossa", "mass", "cord") where a medical word stands next to them ("posterior fossa") and no
        title, relative or contact word comes before them ("nurse Iris")."""
        if self.eponyms is not None:
            for t in toks:
                if t.low in self.eponyms.names and self.eponyms.at(text, t.start, t.end):
                    t.eponym = True
        if self.medical is None:
            return
        words = self.medical.words
        mixed = _mixed_case(text)
        for t in toks:
            t.medical = self.is_medical(t.low) or (mixed and t.text in self.capital_terms)
        for i, t in enumerate(toks):
            if t.medical or t.low not in words:
                continue
            prev = toks[i - 1] if i > 0 and toks[i - 1].line == t.line else None
            nxt = toks[i + 1] if i + 1 < len(toks) and toks[i + 1].line == t.line else None
            if prev is not None and (prev.low in self.name_cues or prev.low in self.strong_titles
                                     or prev.low in self.abbreviated_titles):
                continue
            if any(o is not None and (o.medical or o.eponym) for o in (prev, nxt)):
                t.medical = True
        # a combining form hyphened to a medical word: "Septo-Optic", "post-gadolinium", "hyper-intensity"
        for i in range(len(toks) - 1):
            a, b = toks[i], toks[i + 1]
            if text[a.end:b.start] == "-" and (a.medical or b.medical) and a.alpha and b.alpha:
                a.medical = b.medical = True

    def medical_tokens(self, text: str) -> list[tuple[int, int]]:
        """Spans of the tokens of ``text`` that are medical words or eponyms in their context (``_mark``)."""
        toks = _tokens(text)
        self._mark(text, toks)
        return [(t.start, t.end) for t in toks if t.medical or t.eponym]

    def _clinical(self, low: str) -> bool:
        """A drug stem or a medical-term ending on a word no census list holds as a name."""
        return (len(low) >= 6 and not self.lexicon.is_name(low) and self.clinical_ending.search(low) is not None)

    def _zipf(self, t: Tok) -> float:
        return self.lexicon.zipf(t.low)

    def _namey(self, t: Tok, below: float) -> bool:
        """In a census name list and rarer than ``below`` as an English word."""
        return not self._stop(t) and self.lexicon.is_name(t.low) and self._zipf(t) < below

    def _rare(self, t: Tok) -> bool:
        return not self._stop(t) and len(t.text) >= 3 and self._zipf(t) < self.rare_zipf

    def _cased_name(self, t: Tok, mixed: bool) -> bool:
        return mixed and t.title and not t.initial_of_sentence and not self._stop(t)

    def _name_after_cue(self, t: Tok, mixed: bool) -> bool:
        return self._namey(t, self.context_zipf) or self._rare(t) or self._cased_name(t, mixed)

    def is_cue_or_common(self, low: str) -> bool:
        """Not worth masking everywhere: a function, cue or clinical word, or a word neither a census name nor
        rare (an NER false positive such as "seizure" must not spread through the note)."""
        return (low in self.lexicon.stop_words or low in self.safe or low in self.cues or self._clinical(low)
                or self.is_medical(low)
                or (self.lexicon.zipf(low) >= self.name_zipf and not self.lexicon.is_name(low))
                or self.lexicon.zipf(low) >= self.context_zipf)

    def spaced_word_is_identifier(self, word: str) -> bool:
        """A word written letter by letter and closed up: a name, a place or a word that is not common English;
        a function or clinical word ("n p o") is not."""
        t = Tok(0, 0, word, word.lower(), 0, False)
        if self._stop(t) or len(word) < 3:
            return False
        return self.lexicon.is_name(t.low) or t.low in self.lexicon.places or self._zipf(t) < self.context_zipf

    @staticmethod
    def _initial(text: str, t: Tok) -> bool:
        """A single letter that can be an initial: a capital, or a small letter with a full stop ("s. roberto")."""
        if not t.letter:
            return False
        dotted = text[t.end:t.end + 1] == "."
        return (t.text.isupper() and t.text != "I") or (dotted and t.text not in "ai")

    def _field_value(self, text: str, toks: list[Tok], i: int, names: set[int]) -> None:
        """The value of a name field: up to four words on the line, a comma or an initial between them."""
        for j in range(i, min(len(toks), i + 4)):
            t = toks[j]
            if t.line != toks[i].line or not t.alpha or self._clinical(t.low) or t.low in self.safe:
                break
            gap = text[toks[j - 1].end:t.start].strip() if j > i else ""
            if gap not in ("", ",", ".") or (gap == "." and not toks[j - 1].letter) or t.low in self.never_names:
                break
            if t.low in self.lexicon.stop_words and not (t.title or t.upper or t.letter):
                break
            names.add(j)

    def trim(self, text: str, start: int, end: int) -> tuple[int, int]:
        """An NER span without the cue, function and clinical words at its edges ("Daughter [sarah]")."""
        words = [m for m in WORD.finditer(text, start, end)]
        while words and self._edge(words[0].group()):
            words.pop(0)
        while words and self._edge(words[-1].group()):
            words.pop()
        return (words[0].start(), words[-1].end()) if words else (start, start)

    def _edge(self, word: str) -> bool:
        low = word.lower().removesuffix("'s")
        return low in self.cues or low in self.safe or low in self.lexicon.stop_words

    def keep_ner(self, chunk: str, names_count: bool = True) -> bool:
        """An NER person or place is kept when one of its words can be a name or a place, an organisation when
        one of its words is rare: NER on notes tags headings and abbreviations ("Cont", "O2 Sat") that are neither."""
        for m in WORD.finditer(chunk):
            t = Tok(0, 0, m.group(), m.group().lower().removesuffix("'s"), 0, False)
            if self._stop(t):
                continue
            if names_count and (self._namey(t, self.context_zipf) or t.low in self.lexicon.places):
                return True
            if self._zipf(t) < self.rare_zipf and not (t.text.isupper() and len(t.text) <= 5):
                return True  # a rare word, not an acronym ("PHQ", "RASS" are scales)
        return False

    # -- the pass ------------------------------------------------------------------------------------------------
    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Names and places a note's words give away: rules read token by token (names, then places), then across
        tokens (place phrases, "Smith, John", "university of X", and initials and name parts next to a name)."""
        toks = _tokens(text)
        if not toks:
            return []
        mixed = _mixed_case(text)
        names: set[int] = set()
        places: set[int] = set()
        self._mark(text, toks)
        for i in range(len(toks)):
            self._names_at(text, toks, i, mixed, names)
            self._places_at(text, toks, i, mixed, places)
        self._across(text, toks, mixed, names, places)
        spans = [(toks[i].start, toks[i].end, "NAME") for i in sorted(names)]
        spans += [(toks[i].start, toks[i].end, "LOCATION") for i in sorted(places - names)]
        return spans

    def _names_at(self, text: str, toks: list[Tok], i: int, mixed: bool, names: set[int]) -> None:
        """The name rules at token ``i``: name-like words, first names, titles and cues before a name, field values,
        initials, credentials after a name, a visitor's first name."""
        n = len(toks)
        t = toks[i]
        prev = toks[i - 1] if _same_line(toks, i, i - 1) else None
        nxt = toks[i + 1] if _same_line(toks, i, i + 1) else None
        if self._namey(t, self.name_zipf) and len(t.text) >= 3:
            names.add(i)
        if self._cased_name(t, mixed) and (self._namey(t, self.name_zipf + 1) or self._zipf(t) == 0):
            names.add(i)
        if t.low in self.lexicon.name_only_first and len(t.text) >= 3 and not self._stop(t) \
                and self._zipf(t) < self.first_name_zipf:
            names.add(i)  # a first name that is no English word, in any case: "SUSAN", "janet", "Anne"
        elif mixed and t.upper and len(t.text) >= 3 and t.low in self.lexicon.first_names \
                and not self._stop(t) and self._zipf(t) < self.capital_first_name_zipf \
                and not any(o is not None and o.upper for o in (prev, nxt)):
            names.add(i)  # a first name in capitals alone among lower-case words: "LUCY at bedside"
        # a title stands before its name with punctuation at most between them ("Dr. X", "DR.,X", "Dr - X"), never
        # across a parenthesis or a clause: "multiple sclerosis (MS); Lyme disease" has none
        between = text[prev.end:t.start] if prev is not None else ""
        titled = prev is not None and not re.search(r"[();]", between)
        # "MR images", "MR Angiography", "MR showing", "MRS demonstrates", "MR: Left ...": the modality (and MR
        # spectroscopy), not a title: a name after a title is capitalised where the text is in mixed case ("MR
        # showing": no census name in lower case), and after "MR:" a word as common as "Left" is none, as after
        # "MR -" where a medical word follows (MedPix's "MR - Other Pulse Seq."; not "MR - Will called back")
        modality = prev is not None and prev.text in ("MR", "MRS") and (
            t.medical or t.low in self.safe or (mixed and t.text.islower() and not self.lexicon.is_name(t.low))
            or (between.strip() == ":" and self._zipf(t) >= self.context_zipf)
            or (between.strip() == "-" and self._zipf(t) >= self.context_zipf and nxt is not None
                and (nxt.medical or nxt.low in self.safe)))
        if modality:
            pass
        elif prev is not None and titled and prev.low in self.abbreviated_titles and t.alpha and (
                t.title or t.upper or t.letter or not (
                    t.low in self.lexicon.stop_words or t.low in self.never_names or t.eponym)):
            names.add(i)  # "Dr. X" for any X: "Dr. Church", "dr gray", "dr foley"; not "dr will see"
        elif prev is not None and titled and prev.low in self.strong_titles and t.alpha and (
                not self._stop(t) or t.title or t.upper or t.letter):
            names.add(i)  # "Dr Will Cole", "Dr B Muse"
        elif prev is not None and prev.low in self.relatives and mixed and t.title \
                and t.low in self.lexicon.first_names and not t.initial_of_sentence:
            names.add(i)  # "her husband Will"
        elif prev is not None and not self._stop(t):
            before_prev = toks[i - 2].low if _same_line(toks, i, i - 2) else ""
            cue = prev.low in self.name_cues or (
                prev.low in ("with", "w", "to", "by") and before_prev in self.contact_with)
            if cue and self._name_after_cue(t, mixed):
                names.add(i)
        if prev is not None and prev.low in self.name_fields and text[prev.end:t.start].strip() in (":", "-") \
                and t.alpha:
            self._field_value(text, toks, i, names)  # "PHYSICIAN: HOPE, WILLIAM"
        if self._initial(text, t) and text[t.end:t.end + 1] == "." and nxt is not None and (
                self._rare(nxt) or self._namey(nxt, self.context_zipf) or self._cased_name(nxt, mixed)):
            names.update((i, i + 1))  # "B. KARGAS", "s. roberto"
        in_parens = t.low in self.titles and text[max(0, t.start - 1):t.start] == "("
        if (t.low in self.before_credential or in_parens) and not t.initial_of_sentence:
            strict = t.low in self.after_name
            for j in range(i - 1, max(-1, i - 4), -1):
                if not _same_line(toks, i, j) or toks[j + 1].initial_of_sentence:
                    break
                p = toks[j]
                if self._initial(text, p):
                    names.add(j)
                elif not strict and self._name_after_cue(p, mixed):
                    names.add(j)
                elif strict and self._namey(p, self.context_zipf):
                    names.add(j)
                else:
                    break
        if nxt is not None and t.low in self.lexicon.first_names and self._namey(t, self.context_zipf):
            follows = " ".join(toks[j].low for j in range(i + 1, min(n, i + 4)) if _same_line(toks, i, j)) + " "
            if any(follows.startswith(f"{p} ") for p in self.presence):
                names.add(i)  # a first name before a visitor's phrase, in any case: "bob at bedside"

    def _places_at(self, text: str, toks: list[Tok], i: int, mixed: bool, places: set[int]) -> None:
        """The place rules at token ``i``: place names, institutions and the words before them, hospital acronyms,
        wards, rare words after a preposition of place and what a transfer names."""
        n = len(toks)
        t = toks[i]
        prev = toks[i - 1] if _same_line(toks, i, i - 1) else None
        nxt = toks[i + 1] if _same_line(toks, i, i + 1) else None
        if not self._stop(t) and t.low in self.lexicon.places and (
                self._zipf(t) < self.place_zipf or self._cased_name(t, mixed)):
            places.add(i)
        if t.low in self.institution:
            if t.low in self.inst_masked:
                places.add(i)
            for j in range(i - 1, max(-1, i - 4), -1):
                p = toks[j]
                if not _same_line(toks, i, j) or self._stop(p) or not (
                        self._rare(p) or p.low in self.lexicon.places or self._cased_name(p, mixed)
                        or self._namey(p, self.context_zipf) or (mixed and p.upper and len(p.text) <= 5)
                        or p.low in self.inst_masked):
                    break
                places.add(j)
        before = toks[i - 2].low if _same_line(toks, i, i - 2) else ""
        after_prep = prev is not None and prev.low in self.loc_preps
        if t.alpha and t.low not in self.safe and 2 <= len(t.text) <= 5 and before not in self.not_location_before \
                and ((t.upper and mixed) or after_prep or (prev is not None and prev.low in self.acronym_before))\
                and self.acronym.fullmatch(t.text.upper()) and self._zipf(t) < self.place_zipf - 1:
            places.add(i)  # a hospital: "to GH", "at VAMC"
        if self._rare(t) and nxt is not None and nxt.text.isdigit() and len(nxt.text) == 1 and (
                i + 2 >= n or not _same_line(toks, i, i + 2) or toks[i + 2].low not in self.units):
            places.add(i)  # a ward: "quartermain 6"
        if after_prep and (t.alpha or t.text.isdigit()) and t.low not in self.safe:
            if t.alpha and self._rare(t) and self._zipf(t) < self.rare_zipf - 0.5:
                places.add(i)  # "to quartermain", "at kimbrough"
            if before in self.moves or (prev is not None and prev.low in self.moves):
                first = i + 1 if t.text.isdigit() else i  # "transferred to 209 quartermain"
                for j in range(first, min(n, first + 3)):
                    p = toks[j]
                    if not _same_line(toks, i, j) or self._stop(p) or not (
                            self._rare(p) or self._cased_name(p, mixed) or self._namey(p, self.context_zipf)
                            or self.acronym.fullmatch(p.text)):
                        break
                    places.add(j)

    def _across(self, text: str, toks: list[Tok], mixed: bool, names: set[int], places: set[int]) -> None:
        """Rules across tokens, after the token rules: multi-word places, "Smith, John", "university of X", and
        initials and name parts next to a name (twice, so a name grows by two words at most)."""
        n = len(toks)
        for i in range(n - 1):  # multi-word places ("new haven", "ellicott city")
            for k in (3, 2):
                if i + k <= n and all(_same_line(toks, i, j) for j in range(i, i + k)):
                    phrase = " ".join(toks[j].low for j in range(i, i + k))
                    if phrase in self.lexicon.place_phrases:
                        places.update(range(i, i + k))
        for i in range(n - 1):  # "Smith, John", "SMITH,JOHN": a last name, a comma, a first name
            a, b = toks[i], toks[i + 1]
            sep = text[a.end:b.start]
            if sep.strip() == "," and _same_line(toks, i, i + 1) and (a.title and b.title or a.upper and b.upper) \
                    and b.low in self.lexicon.first_names and self._namey(a, self.context_zipf) \
                    and (not sep.endswith(" ") or mixed):
                names.update((i, i + 1))
        # "university of X", "U of X": the whole phrase
        for i, t in enumerate(toks[:-2]):
            if t.low in ("university", "u") and toks[i + 1].low == "of" and toks[i + 2].alpha:
                places.update((i, i + 1, i + 2))
        # initials and name parts next to a name
        for _ in range(2):
            for i, t in enumerate(toks):
                if i in names or i in places:
                    continue
                near = [j for j in (i - 1, i + 1) if _same_line(toks, i, j) and j in names
                        and not toks[max(i, j)].initial_of_sentence]
                if not near:
                    continue
                if self._initial(text, t) or self._namey(t, self.name_zipf + 0.5) \
                        or (self._rare(t) and self._zipf(t) == 0) or self._cased_name(t, mixed):
                    names.add(i)


def _same_line(toks: list[Tok], i: int, j: int) -> bool:
    return 0 <= j < len(toks) and toks[i].line == toks[j].line


def _tokens(text: str) -> list[Tok]:
    out: list[Tok] = []
    line = 0
    last = 0
    for m in WORD.finditer(text):
        gap = text[last:m.start()]
        line += gap.count("\n")
        stripped = gap.rstrip(" \t")
        initial = (not out and not stripped) or "\n" in gap or (bool(stripped) and stripped[-1] in SENTENCE_BREAK)
        out.append(Tok(m.start(), m.end(), m.group(), m.group().lower().replace("’", "'").removesuffix("'s"),
                       line, initial))
        last = m.end()
    return out


def _mixed_case(text: str) -> bool:
    """Whether ``text`` is written in mixed case (not all in capitals, not all in lower case)."""
    letters = [c for c in text if c.isalpha()]
    return 0.03 < sum(c.isupper() for c in letters) / max(1, len(letters)) < 0.6


# the adjective of a disease noun: "vasculitic" of vasculitis, "thrombotic" of thrombosis, "embolic" of embolism
_ADJECTIVE_ENDINGS = (("itic", ("itis",)), ("otic", ("osis",)), ("ytic", ("ysis",)), ("emic", ("emia", "aemia")),
                      ("olic", ("olism", "olus")))


def _nouns_of(low: str) -> list[str]:
    """The nouns ``low`` may be the adjective of (none unless it has one of the endings, six letters or more)."""
    if len(low) < 6:
        return []
    return [low[:-len(adj)] + noun for adj, nouns in _ADJECTIVE_ENDINGS if low.endswith(adj) for noun in nouns]

