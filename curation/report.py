"""Stage reports: counts and failures by reason, written as DVC metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, Never, TypeVar, cast

from curation.errors import FailureRateExceeded
from curation.jsonio import write_json, write_jsonl
from curation.names import printable


class Kind(StrEnum):
    """What became of one input: used, failed, skipped by design, or used with a part missing."""

    ok = "ok"
    failed = "failed"
    skipped = "skipped"
    incomplete = "incomplete"


T = TypeVar("T", covariant=True)
U = TypeVar("U")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """The result of one step on one input (a file, a series, a figure), as every stage's report takes it.

    An ok outcome carries what the step made as ``value``, typed per step (a frozen dataclass of its own:
    ``SeriesResult``, ``Deidentified``...); any other keeps ``code``, a short reason (``dicom_truncated``),
    ``detail``, one line for a person, and ``raw_input``, the input it failed on (as distilabel keeps a failed row),
    for whoever debugs it. The kind is a field, never read back from the reason's text; the quarantine ``reason``
    written for it is ``code`` for a failure and ``<kind>:<code>`` otherwise. Plain data, so it pickles across
    process pools and Dask workers.

    ``T`` is covariant: a failure is an ``Outcome[Never]``, so a step declared to return ``Outcome[SeriesResult]``
    returns its failures as they are."""

    kind: Kind
    code: str = ""
    detail: str = ""
    _value: T | None = None
    raw_input: Any = None

    @staticmethod
    def success(value: U) -> Outcome[U]:
        return Outcome(Kind.ok, _value=value)

    @staticmethod
    def failure(code: str, detail: str = "", raw_input: Any = None) -> Outcome[Never]:
        return Outcome(Kind.failed, code, detail, raw_input=raw_input)

    @staticmethod
    def skip(code: str, detail: str = "", raw_input: Any = None) -> Outcome[Never]:
        return Outcome(Kind.skipped, code, detail, raw_input=raw_input)

    @staticmethod
    def incomplete(code: str, detail: str = "", raw_input: Any = None) -> Outcome[Never]:
        return Outcome(Kind.incomplete, code, detail, raw_input=raw_input)

    @property
    def ok(self) -> bool:
        return self.kind is Kind.ok

    @property
    def value(self) -> T:
        """What an ok step made; asking a failure for it is a bug in the caller, and raises."""
        if self.kind is not Kind.ok:
            raise ValueError(f"no value: the step's outcome is {self.reason}")
        return cast(T, self._value)

    def passed_on(self, raw_input: Any = None) -> Outcome[Never]:
        """This outcome (not ok) handed on by a step that cannot go on without what it lacked: its kind, code and
        detail as they are, and its raw input (when it has none, ``raw_input``: the input of the step handing it on)."""
        if self.kind is Kind.ok:
            raise ValueError("an ok outcome has a value to hand on, not a reason")
        kept = raw_input if self.raw_input is None else self.raw_input
        return Outcome(self.kind, self.code, self.detail, raw_input=kept)

    @property
    def reason(self) -> str:
        """The reason as quarantine.jsonl and the report's counters spell it."""
        if self.kind in (Kind.ok, Kind.failed):
            return self.code
        return f"{self.kind.value}:{self.code}"


def failed_dir(dst: str | Path) -> Path:
    """Where a failed stage leaves its quarantine and report: ``<dst>.failed/`` beside its output folder."""
    dst = Path(dst)
    return dst.with_name(f"{dst.name}.failed")


@dataclass
class QuarantineEntry:
    path: str
    reason: str
    detail: str
    kind: Kind = Kind.failed

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason, "detail": self.detail}


@dataclass
class Report:
    """What a stage did: inputs seen, outputs made, and every input it could not use."""

    stage: str
    inputs: int = 0
    outputs: int = 0
    counts: Counter[str] = field(default_factory=Counter)
    quarantine: list[QuarantineEntry] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    skipped_steps: dict[str, str] = field(default_factory=dict)

    def record(self, path: str | Path, outcome: Outcome[Any]) -> bool:
        """List an input that was not used as it stands (failed, skipped, incomplete) under its kind; an ok outcome
        lists nothing. Returns whether the outcome was ok."""
        if outcome.ok:
            return True
        detail = printable(" ".join(str(outcome.detail).split())[:300])
        where = printable(Path(path).as_posix())
        if len(where) > 500:  # a path made from a huge id: the entry stays one readable line
            where = where[:480] + "..." + f"[{len(where)} chars]"
        self.quarantine.append(QuarantineEntry(where, outcome.reason, detail, outcome.kind))
        return False

    def fail(self, path: str | Path, reason: str, detail: str) -> None:
        """An input that could not be used; ``reason`` is its code as written (``edit_not_applied:...`` included)."""
        self.record(path, Outcome.failure(reason, detail))

    def incomplete(self, path: str | Path, reason: str, detail: str) -> None:
        """An input that was used but is missing a part (a figure file, say): listed, not a failure."""
        self.record(path, Outcome.incomplete(reason, detail))

    def skip(self, path: str | Path, why: str, detail: str = "") -> None:
        self.record(path, Outcome.skip(why, detail or why))

    def skip_step(self, step: str, why: str) -> None:
        """A whole step that could not run (no LLM endpoint, say): reported, never faked."""
        self.skipped_steps[step] = f"skipped: {why}"

    def _by_kind(self, kind: Kind) -> Counter[str]:
        return Counter(q.reason for q in self.quarantine if q.kind is kind)

    @property
    def failures(self) -> Counter[str]:
        """Every entry that is neither skipped by design nor used incomplete (``edit_not_applied:*`` counts)."""
        return self._by_kind(Kind.failed)

    @property
    def skipped(self) -> Counter[str]:
        return self._by_kind(Kind.skipped)

    @property
    def incompletes(self) -> Counter[str]:
        return self._by_kind(Kind.incomplete)

    @property
    def failure_rate(self) -> float:
        return sum(self.failures.values()) / self.inputs if self.inputs else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "failed": sum(self.failures.values()),
            "failure_rate": round(self.failure_rate, 4),
            "failures_by_reason": dict(sorted(self.failures.items())),
            "skipped_by_reason": dict(sorted(self.skipped.items())),
            "incomplete_by_reason": dict(sorted(self.incompletes.items())),
            "counts": dict(sorted(self.counts.items())),
            "skipped_steps": dict(sorted(self.skipped_steps.items())),
            "metrics": self.metrics,
        }

    def write(self, path: str | Path | None) -> None:
        if path is not None:
            write_json(path, self.as_dict())

    def write_quarantine(self, path: str | Path) -> None:
        entries = sorted(self.quarantine, key=lambda q: (q.path, q.reason, q.detail))
        write_jsonl(path, (q.as_dict() for q in entries))

    def check_failure_rate(self, max_rate: float, report_path: str | Path | None = None,
                           dst: str | Path | None = None) -> None:
        """Fail the stage above its threshold; the report is written first so the reasons are visible.

        A failed stage's output folder is never swapped in, so its quarantine and report are kept in
        ``<dst>.failed/`` beside it, and the error names that file; a later success removes the folder."""
        kept = failed_dir(dst) if dst is not None else None
        if self.failure_rate <= max_rate:
            if kept is not None and kept.exists():
                import shutil

                shutil.rmtree(kept, ignore_errors=True)
            return
        self.write(report_path)
        where = "quarantine.jsonl"
        if kept is not None:
            self.write_quarantine(kept / "quarantine.jsonl")
            self.write(kept / "report.json")
            where = (kept / "quarantine.jsonl").as_posix()
        raise FailureRateExceeded(
            f"{self.stage}: {sum(self.failures.values())} of {self.inputs} inputs failed "
            f"({self.failure_rate:.0%} > max_failure_rate {max_rate:.0%}); see {where}"
        )

    def summary(self) -> str:
        parts = [f"{self.stage}: {self.inputs} in, {self.outputs} out"]
        if self.failures:
            parts.append("failed " + ", ".join(f"{k}={v}" for k, v in sorted(self.failures.items())))
        for kind, counts in (("skipped", self.skipped), ("incomplete", self.incompletes)):
            if counts:
                parts.append(f"{kind} " + ", ".join(f"{k.removeprefix(kind + ':')}={v}"
                                                     for k, v in sorted(counts.items())))
        for step, why in sorted(self.skipped_steps.items()):
            parts.append(f"{step} {why}")
        return "; ".join(parts)
