"""What a clinical text asserts of each thing it mentions: negated ("no evidence of haemorrhage"), hedged ("possible
abscess", "metastasis cannot be excluded") or historical ("history of stroke", "s/p resection"): ConText's three
assertions.

Each assertion is negspacy's NegEx component, made for clinical negation, run over the same mentions with a termset
of its own: negation takes negspacy's clinical termset with the lexicon's additions, uncertainty and history the
lexicon's own (``context:`` in lexicon.yaml). A trigger reaches to the end of its sentence or to a termination ("but",
"however", ";", "which", ...), pseudo-triggers ("no change", "not ruled out") reach nothing, and a mention written
with "non-" ("non-enhancing") is negated as negspacy's chunk prefixes are, without reaching the words after it
("non-enhancing mass" is a mass). medspaCy's ConText does
the same with its own rules, but it does not install beside spaCy 3.8 on Python 3.11 (``../shared/ENV-NOTES.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

import yaml
from spacy.tokens import Doc, Span

ASSERTIONS = ("negated", "hedged", "historical")
# the lexicon's short names for NegEx's four lists
_LISTS = {"pseudo": "pseudo_negations", "preceding": "preceding_negations", "following": "following_negations",
          "termination": "termination"}
_MENTIONS = "mentions"  # the doc.spans key the components read


class Context:
    """A sentencizer and the three NegEx components. ``terms[assertion][list]`` are the lexicon's words for one
    assertion, ``terms["all"]["termination"]`` the terminations all three share."""

    def __init__(self, terms: Mapping[str, Mapping[str, Iterable[str]]]) -> None:
        import spacy
        from negspacy.negation import Negex  # noqa: F401  (registers the "negex" factory)
        from negspacy.termsets import termset

        unknown = set(terms) - {*ASSERTIONS, "all"}
        unknown |= {f"{a}.{k}" for a, t in terms.items() for k in t if k not in _LISTS}
        if unknown:
            raise ValueError(f"unknown context terms: {', '.join(sorted(unknown))}")
        clinical = termset("en_clinical").get_patterns()
        # a word another assertion names is that assertion's trigger, not negation's ("rule out" hedges)
        elsewhere = {w for a, t in terms.items() if a not in ("negated", "all") for words in t.values() for w in words}
        self.nlp = spacy.blank("en")
        self.nlp.add_pipe("sentencizer")
        for name in ASSERTIONS:
            own = terms.get(name, {})
            lists = {}
            for short, key in _LISTS.items():
                base = [w for w in clinical[key] if w not in elsewhere] if name == "negated" else \
                    clinical[key] if short == "termination" else []
                # NegEx's matcher takes no empty list; a trigger that cannot occur in text stands for none
                shared = terms.get("all", {}).get(short, ())
                lists[key] = list(dict.fromkeys([*base, *shared, *own.get(short, ())])) or ["\u2400"]
            self.nlp.add_pipe("negex", name=name, config={
                "neg_termset": lists, "extension_name": name, "span_keys": [_MENTIONS],
                "chunk_prefix": ["non-", "non "] if name == "negated" else None})

    @classmethod
    @lru_cache(maxsize=1)
    def default(cls) -> Context:
        """The project's context, from ``context.yaml`` beside this module."""
        terms = yaml.safe_load((Path(__file__).with_name("context.yaml")).read_text(encoding="utf-8"))
        return cls(terms)

    def parse(self, text: str) -> Doc:
        """``text`` tokenized and cut into sentences, ready for ``assess``."""
        return self.nlp.get_pipe("sentencizer")(self.nlp.make_doc(text))

    def assess(self, doc: Doc, mentions: list[Span]) -> list[dict[str, bool]]:
        """The three assertions of each mention, in order, as the text around it says."""
        # a mention read with the "non-" written before it, so that the chunk prefix sees it
        read = [doc[m.start - 2:m.end] if m.start >= 2 and doc[m.start - 2].lower_ == "non" and
                doc[m.start - 1].text == "-" and not doc[m.start - 2].whitespace_ else m for m in mentions]
        doc.spans[_MENTIONS] = read
        for name in ASSERTIONS:
            self.nlp.get_pipe(name)(doc)
        return [{name: bool(r._.get(name)) for name in ASSERTIONS} for r in read]

    def mentions(self, text: str, pattern: re.Pattern[str]) -> list[tuple[str, dict[str, bool]]]:
        """Each match of ``pattern`` in ``text``, with its three assertions."""
        return _mentions(self, text, pattern)


@lru_cache(maxsize=8192)
def _mentions(ctx: Context, text: str, pattern: re.Pattern[str]) -> list[tuple[str, dict[str, bool]]]:
    doc = ctx.parse(text)
    spans = [s for m in pattern.finditer(text) if (s := doc.char_span(m.start(), m.end(), alignment_mode="expand"))]
    spans = list({(s.start, s.end): s for s in spans}.values())
    return [(s.text, said) for s, said in zip(spans, ctx.assess(doc, spans), strict=True)]
