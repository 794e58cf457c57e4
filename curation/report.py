"""Stage reports: counts and failures by reason, written as DVC metrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curation.errors import FailureRateExceeded
from curation.records import write_json, write_jsonl


def failed_dir(dst: str | Path) -> Path:
    """Where a failed stage leaves its quarantine and report: ``<dst>.failed/`` beside its output folder."""
    dst = Path(dst)
    return dst.with_name(f"{dst.name}.failed")


@dataclass
class QuarantineEntry:
    path: str
    reason: str
    detail: str

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

    def fail(self, path: str | Path, reason: str, detail: str) -> None:
        from curation.paths import printable

        detail = printable(" ".join(str(detail).split())[:300])
        where = printable(Path(path).as_posix())
        if len(where) > 500:  # a path made from a huge id: the entry stays one readable line
            where = where[:480] + "..." + f"[{len(where)} chars]"
        self.quarantine.append(QuarantineEntry(where, reason, detail))

    def incomplete(self, path: str | Path, reason: str, detail: str) -> None:
        """An input that was used but is missing a part (a figure file, say): listed, not a failure."""
        self.fail(path, f"incomplete:{reason}", detail)

    def skip(self, path: str | Path, why: str, detail: str = "") -> None:
        self.fail(path, f"skipped:{why}", detail or why)

    def skip_step(self, step: str, why: str) -> None:
        """A whole step that could not run (no LLM endpoint, say): reported, never faked."""
        self.skipped_steps[step] = f"skipped: {why}"

    @property
    def failures(self) -> Counter[str]:
        """Every entry that is neither skipped by design nor used incomplete (``edit_not_applied:*`` counts)."""
        return Counter(q.reason for q in self.quarantine if not q.reason.startswith(("skipped:", "incomplete:")))

    @property
    def skipped(self) -> Counter[str]:
        return Counter(q.reason for q in self.quarantine if q.reason.startswith("skipped:"))

    @property
    def incompletes(self) -> Counter[str]:
        return Counter(q.reason for q in self.quarantine if q.reason.startswith("incomplete:"))

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
        if self.skipped:
            parts.append("skipped " + ", ".join(f"{k[8:]}={v}" for k, v in sorted(self.skipped.items())))
        if self.incompletes:
            parts.append("incomplete " + ", ".join(f"{k[11:]}={v}" for k, v in sorted(self.incompletes.items())))
        for step, why in sorted(self.skipped_steps.items()):
            parts.append(f"{step} {why}")
        return "; ".join(parts)
