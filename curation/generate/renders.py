"""Which render of a series an item shows (placed on a target by the normalize stage, or registered onto a
baseline), and the ``Evidence`` it becomes: the series, slice and position in mm, and how much of the brain the
target covers there."""

from __future__ import annotations

from curation.schema import Evidence, Render, Series, Visit


def registered_to(series: Series, reference: Series) -> bool:
    """Whether ``series`` was registered onto ``reference`` (its provenance names it)."""
    return any(step.name.startswith("register") and step.args.get("reference") == reference.series_id
               for step in series.provenance)


def target_render(series: Series, target: str) -> Render | None:
    """The render the normalize stage placed on ``target`` (montage counts as the whole brain); None where its slice
    misses the target (a recorded target fraction of 0: an item on it would ask about what it does not show)."""
    for r in series.renders:
        if r.role == "target" and r.target == target:
            return None if _fraction(series, target, r) == 0 else r
    if target == "brain":
        return next((r for r in series.renders if r.role == "montage"), None)
    return None


def paired_render(series: Series, reference: Series, target: str) -> Render | None:
    """The render of a registered follow-up placed at the reference's position for ``target`` (the normalize stage
    renders it role "paired"); its own target render when that already lies at the reference's position."""
    for r in series.renders:
        if r.role == "paired" and r.target == target and r.located_by in (None, f"registered_to:{reference.series_id}"):
            return r
    return target_render(series, target)


def mid_render(series: Series) -> Render | None:
    return next((r for r in series.renders if r.plane == "axial" and r.role == "mid"), None)


def usable(series: Series) -> bool:
    return bool(series.renders) and series.qc.passed is not False


def first_series(visit: Visit, sequence: str) -> Series | None:
    return next((s for s in visit.series if s.sequence == sequence and usable(s)), None)


def evidence_of(r: Render, s: Series, visit: Visit | None, target: str | None) -> Evidence:
    return Evidence(image=r.path, series_id=s.series_id, visit_id=visit.visit_id if visit else None,
                    sequence=s.sequence, target=target, plane=r.plane, slice_index=r.slice_index,  # type: ignore[arg-type]
                    position_mm=r.position_mm, target_fraction=_fraction(s, target, r))


def _fraction(s: Series, target: str | None, r: Render) -> float | None:
    """How much of the brain the target covers in the shown slice, as the normalize stage measured it."""
    for placed in s.qc.targets:
        if placed.target == target and placed.plane == r.plane and placed.slice_index == r.slice_index:
            return placed.target_fraction
    return None

