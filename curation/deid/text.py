"""Clinical-text PHI removal with Presidio on spaCy; policy (entities, patterns, tags) in phi_text.yaml."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from curation.params import TextDeidParams


@lru_cache(maxsize=1)
def policy() -> dict[str, Any]:
    return yaml.safe_load(resources.files("curation.deid").joinpath("phi_text.yaml").read_text())


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


DATE_START = re.compile(r"\d|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b|"
                        r"\b(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b", re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    tag: str


class TextDeidentifier:
    def __init__(self, params: TextDeidParams, secret: bytes) -> None:
        self.params = params
        self.secret = secret
        pol = policy()
        self.entities: dict[str, str] = pol["entities"]
        self.specific = re.compile(pol["specific_date"], re.IGNORECASE)
        self.formats: list[str] = pol["date_formats"]
        self.allow = set(pol["allow_list"])

    def find(self, text: str) -> list[Span]:
        if not text.strip():
            return []
        results = _analyzer(self.params.spacy_model).analyze(
            text=text, language="en", entities=list(self.entities), score_threshold=self.params.score_threshold,
            allow_list=list(self.allow),
        )
        spans = []
        for r in results:
            tag = self.entities[r.entity_type]
            chunk = text[r.start:r.end]
            if r.entity_type == "DATE_TIME" and not self.specific.search(chunk):
                continue  # a duration or a bare year is not an identifier
            if tag == "NAME" and chunk.strip(" .,'’") in self.allow:
                continue
            start, end = r.start, r.end
            if tag == "DATE":  # NER spans often take the word before a date ("on", "seen"); keep that word
                first = DATE_START.search(chunk)
                if first:
                    start += first.start()
            while end > start and text[end - 1].isspace():
                end -= 1
            spans.append(Span(start, end, tag))
        return _merge(spans)

    def deidentify(self, text: str, date_shift_days: int | None = None,
                   patient_key: str = "") -> tuple[str, list[Span]]:
        spans = self.find(text)
        out = []
        pos = 0
        for s in spans:
            out.append(text[pos:s.start])
            out.append(self._replacement(text[s.start:s.end], s.tag, date_shift_days, patient_key))
            pos = s.end
        out.append(text[pos:])
        return "".join(out), spans

    def _replacement(self, chunk: str, tag: str, shift: int | None, key: str) -> str:
        if tag == "DATE" and shift is not None:
            parsed = self._parse_date(chunk)
            if parsed is not None:
                return (parsed - timedelta(days=shift)).strftime("%Y-%m-%d")
        if self.params.replacement == "surrogate" and tag in ("NAME", "ID", "LOCATION", "ADDRESS"):
            h = hmac.new(self.secret, f"{key}\x1f{tag}\x1f{chunk.lower()}".encode(), hashlib.sha256).hexdigest()[:6]
            return f"[{tag}-{h}]"
        return f"[{tag}]"

    def _parse_date(self, chunk: str) -> datetime | None:
        cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", chunk.strip(" .,"))
        for fmt in self.formats:
            try:
                return datetime.strptime(cleaned, fmt)
            except ValueError:
                continue
        return None


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
