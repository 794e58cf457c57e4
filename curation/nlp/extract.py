"""The ``extract`` stage: spaCy rule components over a neurology lexicon kept as data; what the text asserts of each
finding (negated, hedged, historical) is ConText's, by negspacy (``curation.nlp.context``)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from curation.errors import InputError, ParamsError
from curation.jsonio import read_jsonl, write_jsonl
from curation.nlp.context import ASSERTIONS, Context
from curation.params import ExtractParams
from curation.records import staged_dir
from curation.report import Report
from curation.schema import Case, Finding

CATEGORY = {"findings": "finding", "anatomy": "anatomy", "sequences": "sequence", "diagnoses": "diagnosis"}


@lru_cache(maxsize=4)
def load_lexicon(path: str) -> dict[str, Any]:
    try:
        lex = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ParamsError(f"cannot read lexicon ({exc.__class__.__name__})", path) from None
    for key in (*CATEGORY, "laterality", "temporal_pattern"):
        if key not in lex:
            raise ParamsError(f"lexicon lacks {key!r}", path)
    return lex


class Extractor:
    def __init__(self, lexicon_path: str) -> None:
        from spacy.matcher import PhraseMatcher

        self.lex = load_lexicon(lexicon_path)
        self.context = Context.default()
        self.nlp = self.context.nlp
        self.matcher = PhraseMatcher(self.nlp.vocab, attr="LOWER")
        self.labels: dict[str, tuple[str, str]] = {}
        for cat, kind in CATEGORY.items():
            for label, terms in self.lex[cat].items():
                key = f"{kind}::{label}"
                self.labels[key] = (kind, label)
                self.matcher.add(key, [self.nlp.make_doc(t) for t in terms])
        self.temporal = re.compile(self.lex["temporal_pattern"], re.IGNORECASE)

    def findings(self, text: str, field: str) -> list[Finding]:
        if not text.strip():
            return []
        doc = self.context.parse(text)
        from spacy.util import filter_spans

        spans = []
        for match_id, start, end in self.matcher(doc):
            span = doc[start:end]
            span.label_ = self.nlp.vocab.strings[match_id]
            spans.append(span)
        spans = filter_spans(spans)  # longest match wins
        said = {(s.start, s.end): a for s, a in zip(spans, self.context.assess(doc, spans), strict=True)}
        out: list[Finding] = []
        for sent in doc.sents:
            in_sent = [s for s in spans if s.start >= sent.start and s.end <= sent.end]
            anatomy = [s for s in in_sent if s.label_.startswith("anatomy::")]
            sequences = [s for s in in_sent if s.label_.startswith("sequence::")]
            tmatch = self.temporal.search(sent.text)
            for s in in_sent:
                kind, label = self.labels[s.label_]
                near_anat = near_seq = None
                if kind == "finding":
                    near_anat = min(anatomy, key=lambda a: abs(a.start - s.start), default=None)
                    near_seq = min(sequences, key=lambda a: abs(a.start - s.start), default=None)
                lat_src = near_anat if near_anat is not None else s
                out.append(Finding(
                    text=s.text, label=label, category=kind, section=_section(sent.text, self.lex.get("sections", {})),
                    anatomy=self.labels[near_anat.label_][1] if near_anat is not None else None,
                    laterality=self._laterality(doc, lat_src, sent.start),
                    sequence=self.labels[near_seq.label_][1] if near_seq is not None else None,
                    **said[(s.start, s.end)], temporal=tmatch.group(0) if tmatch else None,
                    source_field=field, start=s.start_char, end=s.end_char,
                ))
        return out

    def _laterality(self, doc: Any, span: Any, sent_start: int) -> str | None:
        lat = self.lex["laterality"]
        for t in reversed(doc[max(sent_start, span.start - 4):span.start]):
            if t.lower_ in lat:
                return lat[t.lower_]
        return None

    def diagnosis(self, text: str) -> tuple[str | None, list[str]]:
        dx = None
        for pat in self.lex.get("diagnosis_patterns", []):
            m = re.search(pat, text, re.IGNORECASE)
            if m:
                dx = self._canonical(m.group("dx")) or " ".join(m.group("dx").split())
                break
        diffs: list[str] = []
        for pat in self.lex.get("differential_patterns", []):
            m = re.search(pat, text, re.IGNORECASE)
            if m:
                for part in re.split(r",|\band\b|\bor\b", m.group("dd")):
                    c = self._canonical(part)
                    if c and c not in diffs:
                        diffs.append(c)
        return dx, diffs

    def _canonical(self, phrase: str) -> str | None:
        doc = self.nlp.make_doc(phrase)
        best = None
        for match_id, start, end in self.matcher(doc):
            kind, label = self.labels[self.nlp.vocab.strings[match_id]]
            if kind == "diagnosis" and (best is None or end - start > best[0]):
                best = (end - start, label)
        return best[1] if best else None


def _section(sentence: str, sections: dict[str, list[str]]) -> str | None:
    low = sentence.lower()
    for name, cues in sections.items():
        if any(re.search(rf"\b{re.escape(c)}\b", low) for c in cues):
            return name
    return None


def run(params: ExtractParams, src: Path, dst: Path, report_path: Path | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    if not (src / "cases.jsonl").exists():
        raise InputError("no cases.jsonl (run the normalize stage first)", src)
    report = Report(stage="extract")
    ex = Extractor(params.lexicon)
    cases = []
    for case in read_jsonl(src / "cases.jsonl", Case):
        report.inputs += 1
        fields = case.text_fields()
        findings: list[Finding] = []
        for name, text in fields.items():
            findings.extend(ex.findings(text, name))
        case.findings = findings
        if case.diagnosis.primary is None or not case.diagnosis.differential:
            dx, diffs = ex.diagnosis("\n".join(t for t in fields.values() if t))
            if case.diagnosis.primary is None and dx:
                case.diagnosis.primary = dx
                report.counts["diagnosis_from_text"] += 1
            if not case.diagnosis.differential and diffs:
                case.diagnosis.differential = [d for d in diffs if d != case.diagnosis.primary]
        report.counts["findings"] += sum(1 for f in findings if f.category == "finding" and f.affirmed)
        for assertion in ASSERTIONS:
            report.counts[f"{assertion}_findings"] += sum(1 for f in findings if getattr(f, assertion))
        case.provenance.stages["extract"] = "1"
        cases.append(case)
        report.outputs += 1
    with staged_dir(dst) as staging:
        write_jsonl(staging / "cases.jsonl", cases)
    report.write(report_path)
    return report
