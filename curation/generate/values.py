"""Reading a fact's value: scores as numbers, knowledge-table entries and grade bands, and the number or age phrase
as an item prints it."""

from __future__ import annotations

from typing import Any


def keyed(table: dict[str, Any], key: str | None) -> Any:
    """A knowledge table's entry for ``key`` (a diagnosis, an anatomy), ignoring case: a source writes "Acute
    ischaemic stroke" where another writes "acute ischaemic stroke"."""
    if not key:
        return None
    if key in table:
        return table[key]
    folded = key.casefold()
    return next((v for k, v in table.items() if k.casefold() == folded), None)


def age_phrase(age: int, ninety_plus: bool) -> str:
    """With its article: "a 74-year-old", "an 88-year-old", "a 90-year-old or older", "an infant"."""
    if ninety_plus or age >= 90:
        return "a 90-year-old or older"
    if age < 1:  # ages are whole years: under one is an infant, not "a 0-year-old"
        return "an infant"
    return f"{'an' if str(age).startswith('8') or age in (11, 18) else 'a'} {age}-year-old"


def num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def score_of(scores: dict[str, Any], *names: str) -> float | None:
    for n in names:
        v = scores.get(n)
        if isinstance(v, int | float):
            return float(v)
    return None


def fmt(v: float | None) -> Any:
    if v is None:
        return None
    return int(v) if float(v).is_integer() else round(float(v), 1)


def grade_of(value: float | None, bands: list[list[Any]]) -> str | None:
    """``bands`` is [[upper_bound, label], ...] in increasing order; the first bound above ``value`` wins."""
    if value is None:
        return None
    for bound, label in bands:
        if value < float(bound):
            return label
    return None


def clear_grade_of(value: float | None, bands: list[list[Any]], margin: float) -> str | None:
    """``grade_of``, except None where ``value`` lies within a factor ``margin`` of a band's bound: a reading by eye
    could fairly fall on either side of it."""
    if value is None or value <= 0 or any(float(b) / margin < value < float(b) * margin for b, _ in bands):
        return None
    return grade_of(value, bands)

