"""Leak checks beyond the exact answer string: fixed mappings (``leak_rules.yaml``) from what an item shows to its
key, and answers of an item stated by a sibling item of the same case (dialogues included)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from curation.errors import InputError, validation_message
from curation.quality.items import is_mcq, stated, visible_text
from curation.schema import Item, TaskType
from curation.text import plain

DEFAULT_RULES = Path(__file__).with_name("leak_rules.yaml")


class Band(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min: float
    max: float
    answer: str


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9_]+$")
    cue: str
    answer: str | None = None
    answers: list[Band] = Field(default_factory=list)
    task_types: list[TaskType] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_answer_form(self) -> Rule:
        if (self.answer is None) == (not self.answers):
            raise ValueError("give exactly one of answer or answers")
        for pattern in [self.cue, self.answer or "", *(b.answer for b in self.answers)]:
            re.compile(pattern)
        if self.answers and "(?P<v>" not in self.cue:
            raise ValueError("answers by value need a cue with a (?P<v>...) group")
        return self


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[Rule]


@dataclass
class CompiledRule:
    rule: Rule
    cue: re.Pattern[str]
    answer: re.Pattern[str] | None
    bands: list[tuple[float, float, re.Pattern[str]]]

    def key_pattern(self, text: str) -> re.Pattern[str] | None:
        """The answer pattern the cue implies in ``text``, or None when the cue is not there."""
        m = self.cue.search(text)
        if m is None:
            return None
        if self.answer is not None:
            return self.answer
        v = float(m.group("v"))
        return next((p for lo, hi, p in self.bands if lo <= v <= hi), None)


PATTERN_NAME = re.compile(r"^[a-z0-9_]+$")
PATTERN_REF = re.compile(r"\(\?&([^)]*)\)")  # `(?&name)`: PCRE's call of a named pattern, which `re` does not have


def expand_patterns(data: Any) -> Any:
    """The rules file with each ``(?&name)`` in a rule's patterns replaced by ``(?:<patterns[name]>)`` and the
    ``patterns`` map taken out: one sub-pattern written once, however many rules use it. A name that is not
    ``[a-z0-9_]+``, a pattern that does not compile or names another, a reference to no pattern and a pattern no rule
    uses are errors (``ValueError``, saying where)."""
    if not isinstance(data, dict):
        return data
    named = data.get("patterns", {})
    if not isinstance(named, dict):
        raise ValueError("patterns: must map names to patterns")
    for name, pattern in named.items():
        if not isinstance(name, str) or not PATTERN_NAME.match(name):
            raise ValueError(f"patterns: name {name!r} is not [a-z0-9_]+")
        if not isinstance(pattern, str) or PATTERN_REF.search(pattern):
            raise ValueError(f"patterns.{name}: must be one pattern, naming no other")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"patterns.{name}: not a valid pattern ({exc})") from None
    used: set[str] = set()

    def expand(text: Any, where: str) -> Any:
        def one(m: re.Match[str]) -> str:
            if m.group(1) not in named:
                raise ValueError(f"{where}: no pattern named {m.group(1)!r} (patterns has "
                                 f"{', '.join(named) or 'none'})")
            used.add(m.group(1))
            return f"(?:{named[m.group(1)]})"

        return PATTERN_REF.sub(one, text) if isinstance(text, str) else text

    rules: Any = data.get("rules")
    if isinstance(rules, list):  # anything else is left for the rules' validation to name
        rules = list(rules)
    for n, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, dict):
            where = f"rules.{n} ({rule.get('id')})"
            rule = {**rule, **{k: expand(rule[k], f"{where}.{k}") for k in ("cue", "answer") if k in rule}}
            if isinstance(rule.get("answers"), list):
                rule["answers"] = [{**b, "answer": expand(b.get("answer"), f"{where}.answers.{i}.answer")}
                                   if isinstance(b, dict) else b for i, b in enumerate(rule["answers"])]
            rules[n] = rule
    if unused := [name for name in named if name not in used]:
        raise ValueError(f"patterns: {', '.join(unused)} used by no rule")
    return {k: v for k, v in data.items() if k != "patterns"} | ({"rules": rules} if "rules" in data else {})


def load_rules(path: str | Path | None = None) -> list[CompiledRule]:
    import yaml

    path = Path(path) if path else DEFAULT_RULES
    if not path.is_file():
        raise InputError("leak rules file not found", path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"not valid ({exc.__class__.__name__})", path) from None
    try:
        data = expand_patterns(data)
    except ValueError as exc:
        raise InputError(str(exc), path) from None
    try:
        parsed = _Rules.model_validate(data)
    except re.error as exc:
        raise InputError(f"not valid ({exc.__class__.__name__})", path) from None
    except ValidationError as exc:
        raise InputError(validation_message(exc), path) from None
    flags = re.I
    return [CompiledRule(r, re.compile(r.cue, flags), re.compile(r.answer, flags) if r.answer else None,
                         [(b.min, b.max, re.compile(b.answer, flags)) for b in r.answers]) for r in parsed.rules]


def mapping_leaks(item: Item, rules: list[CompiledRule]) -> list[str]:
    """``answer_leak_mapping:<rule>`` for each rule whose cue in the visible text implies the key."""
    text = visible_text(item)
    out = []
    for r in rules:
        if r.rule.task_types and item.task_type not in r.rule.task_types:
            continue
        pattern = r.key_pattern(text)
        if pattern is None or not pattern.search(item.answer):
            continue
        if is_mcq(item) and any(pattern.search(o) for n, o in enumerate(item.options) if n != item.answer_index):
            continue  # the cue does not single out the key
        out.append(f"answer_leak_mapping:{r.rule.id}")
    return out


def _public_text(item: Item) -> str:
    """What a release shows of an item, its options and answer aside: context, question and every turn."""
    return plain(" ".join([item.context, item.question, *(t.text for t in item.turns)]))


def sibling_leaks(items: list[Item], synonyms: list[set[str]] | None = None) -> dict[str, tuple[str, Any]]:
    """item_id -> ("sibling_answer_leak", sibling item id) for an item whose answer another item of the same case
    (with another answer) states in its context, question or turns, and (for an MCQ) states none of the item's
    other options: whoever reads the sibling knows this item's answer without its image."""
    by_case: dict[str, list[Item]] = defaultdict(list)
    for i in items:
        by_case[i.case_id].append(i)
    out: dict[str, tuple[str, Any]] = {}
    for case_items in by_case.values():
        if len(case_items) < 2:
            continue
        texts = {s.item_id: _public_text(s) for s in case_items}
        for i in case_items:
            key = plain(i.answer)
            if len(key) < 6:  # "left", "right", "mild": too common to be read as a statement of the answer
                continue
            forms = {key}
            for g in synonyms or []:
                if key in g:
                    forms |= {t for t in g if len(t) >= 4}
            others = [o for n, o in enumerate(i.options) if n != i.answer_index] if is_mcq(i) else []
            for s in sorted(case_items, key=lambda x: x.item_id):
                if s.item_id == i.item_id or plain(s.answer) == key:
                    continue
                hay = texts[s.item_id]
                if any(stated(f, hay) for f in forms) and not any(stated(o, hay) for o in others):
                    out[i.item_id] = ("sibling_answer_leak", s.item_id)
                    break
    return out
