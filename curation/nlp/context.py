"""What a clinical text asserts of each thing it mentions: negated ("no evidence of haemorrhage"), hedged ("possible
abscess", "metastasis cannot be excluded") or historical ("history of stroke", "s/p resection"): ConText's three
assertions.

Each assertion is negspacy's NegEx component, made for clinical negation, run over the same mentions with a termset
of its own: negation takes negspacy's clinical termset with the additions and removals of ``context.yaml``,
uncertainty and history take that file's own words. A trigger reaches a mention within its clause (a sentence, a
line, a bullet, or up to a termination: "but", "however", ";", "showed", ...) and, as in the original NegEx, within a
window of words: a preceding trigger up to ``window.preceding`` words before it, a following one up to
``window.following`` words after it. Without the window, "Large enhancing mass in the left frontal lobe, the
ventricles are normal" negated the mass. Pseudo-triggers ("no change", "not ruled out", "without contrast") reach
nothing, and a mention written with "non" ("non-enhancing") is negated as negspacy's chunk prefixes are, without
reaching the words after it ("non-enhancing mass" is a mass).

medspaCy's ConText does the same with its own rules, but it does not install beside spaCy 3.8 on Python 3.11
(``../shared/ENV-NOTES.md``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from negspacy.negation import Negex
from spacy.language import Language
from spacy.tokens import Doc, Span

from curation.errors import ParamsError

ASSERTIONS = ("negated", "hedged", "historical")
# the file's short names for NegEx's four lists, and "drop": words taken out of negspacy's clinical termset
_LISTS = {"pseudo": "pseudo_negations", "preceding": "preceding_negations", "following": "following_negations",
          "termination": "termination"}
_MENTIONS = "mentions"  # the doc.spans key the components read
# "non" and the hyphens written after it (ASCII, Unicode hyphen and non-breaking hyphen, en dash)
_NON_PREFIXES = ["non" + h for h in ("-", "\u2010", "\u2011", "\u2013", " ")]
_BREAKS = {"\u2022", "\u25aa", "\u00b7"}  # bullets: each starts a clause of its own, as a line does


class Mention(tuple[str, Mapping[str, bool]]):
    """A mention's text and its three assertions (read only: the results are cached)."""


@Language.factory("scoped_negex", default_config={"neg_termset": {}, "ent_types": None, "extension_name": "negex",
                                                  "chunk_prefix": None, "span_keys": None, "window": [6, 1]})
class ScopedNegex(Negex):
    """negspacy's NegEx with the original algorithm's window: a trigger reaches a mention only within ``window``
    words (before it, after it)."""

    def __init__(self, nlp: Language, name: str, neg_termset: dict[str, list[str]], ent_types: list[str] | None,
                 extension_name: str, chunk_prefix: list[str] | None, span_keys: list[str] | None,
                 window: list[int]) -> None:
        super().__init__(nlp, name, neg_termset, ent_types, extension_name, chunk_prefix, span_keys)
        self.before, self.after = window

    def _apply_negation(self, span: Span, sub_preceding: list[tuple[int, int, int]],
                        sub_following: list[tuple[int, int, int]]) -> None:
        near_before = [m for m in sub_preceding if m[2] <= span.start and span.start - m[2] <= self.before]
        near_after = [m for m in sub_following if m[1] >= span.end and m[1] - span.end <= self.after]
        super()._apply_negation(span, near_before, near_after)


class Context:
    """A sentencizer and the three NegEx components, from ``terms`` as ``context.yaml`` holds them."""

    def __init__(self, terms: Mapping[str, Any], where: str = "context terms") -> None:
        import spacy
        from negspacy.termsets import termset

        unknown = set(terms) - {*ASSERTIONS, "all"}
        unknown |= {f"{a}.{k}" for a, t in terms.items() for k in t if k not in {*_LISTS, "drop", "window"}}
        if unknown:
            raise ParamsError(f"unknown context terms: {', '.join(sorted(unknown))}", where)
        clinical = termset("en_clinical").get_patterns()
        shared = terms.get("all", {})
        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        for name in ASSERTIONS:
            own = terms.get(name, {})
            drop = set(own.get("drop", ()))
            lists = {}
            for short, key in _LISTS.items():
                base = clinical[key] if name == "negated" or short == "termination" else []
                words = [w for w in base if w not in drop] + [*shared.get(short, ()), *own.get(short, ())]
                # NegEx's matcher takes no empty list; a trigger that cannot occur in text stands for none
                lists[key] = list(dict.fromkeys(words)) or ["\u2400"]
            window = {**shared.get("window", {}), **own.get("window", {})}
            self.nlp.add_pipe("scoped_negex", name=name, config={
                "neg_termset": lists, "extension_name": name, "span_keys": [_MENTIONS],
                "chunk_prefix": _NON_PREFIXES if name == "negated" else None,
                "window": [int(window.get("preceding", 6)), int(window.get("following", 1))]})

    @classmethod
    @lru_cache(maxsize=1)
    def default(cls) -> Context:
        """The project's context, from ``context.yaml`` beside this module."""
        path = Path(__file__).with_name("context.yaml")
        return cls(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))

    def parse(self, text: str) -> Doc:
        """``text`` tokenized and cut into clauses: its sentences, and a new one at each line and bullet."""
        doc = self.nlp.get_pipe("sentencizer")(self.nlp.make_doc(text))
        for tok in doc[:-1]:
            if "\n" in tok.text or tok.text in _BREAKS:
                doc[tok.i + 1].is_sent_start = True
        return doc

    def assess(self, doc: Doc, mentions: list[Span]) -> list[Mapping[str, bool]]:
        """The three assertions of each mention, in order, as the text around it says. Each sentence is read on its
        own (NegEx's scope never leaves it), so a long text costs in proportion to its length."""
        out: list[Mapping[str, bool]] = [MappingProxyType(dict.fromkeys(ASSERTIONS, False))] * len(mentions)
        by_sentence: dict[int, list[int]] = {}
        for i, m in enumerate(mentions):
            by_sentence.setdefault(m.sent.start, []).append(i)
        for start, idx in by_sentence.items():
            sent = doc[start].sent
            sub = sent.as_doc()
            read = [_with_non(sub, sub[mentions[i].start - start:mentions[i].end - start]) for i in idx]
            sub.spans[_MENTIONS] = read
            for name in ASSERTIONS:
                self.nlp.get_pipe(name)(sub)
            for i, r in zip(idx, read, strict=True):
                out[i] = MappingProxyType({name: bool(r._.get(name)) for name in ASSERTIONS})
        return out

    def mentions(self, text: str, pattern: re.Pattern[str]) -> tuple[Mention, ...]:
        """Each match of ``pattern`` in ``text``, with its three assertions."""
        return _mentions(self, text, pattern)


def _with_non(doc: Doc, m: Span) -> Span:
    """A mention read with the "non" written before it ("non-enhancing", "non enhancing"), so that the chunk prefix
    sees it."""
    if m.start >= 2 and doc[m.start - 2].lower_ == "non" and doc[m.start - 1].text in {"-", "\u2010", "\u2013"}:
        return doc[m.start - 2:m.end]
    if m.start >= 1 and doc[m.start - 1].lower_ == "non":
        return doc[m.start - 1:m.end]
    return m


@lru_cache(maxsize=8192)
def _mentions(ctx: Context, text: str, pattern: re.Pattern[str]) -> tuple[Mention, ...]:
    doc = ctx.parse(text)
    spans = [s for m in pattern.finditer(text) if (s := doc.char_span(m.start(), m.end(), alignment_mode="expand"))]
    spans = list({(s.start, s.end): s for s in spans}.values())
    return tuple(Mention((s.text, said)) for s, said in zip(spans, ctx.assess(doc, spans), strict=True))
