"""Imaging steps declare the SeriesContext fields they read from earlier steps and write for later ones
(``steps.base.declares``), and ``check_order`` holds STEPS to the declarations, on import: a step placed before the
step whose output it reads fails there, with the field named. The declarations are held to what the steps do: a demo
series goes through every step with its context traced (each field a step takes, each field it sets or changes)."""

from __future__ import annotations

import copy
from dataclasses import fields
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
import pytest

from curation.demo import phantom
from curation.imaging import steps
from curation.imaging.steps.base import SeriesContext, SeriesTask, check_order, declares
from curation.params import NormalizeParams

FIELDS = [f.name for f in fields(SeriesContext)]


def test_the_steps_are_in_an_order_their_declarations_allow() -> None:
    check_order(steps.STEPS)
    by_name = {fn.__name__: fn for fn in steps.STEPS}
    with pytest.raises(TypeError, match="step render reads ctx.fg, which intensity writes after it"):
        check_order((by_name["to_canonical"], by_name["fit_anatomy"], by_name["deface"], by_name["locate_targets"],
                     by_name["save"], by_name["render"], by_name["intensity"]))


def test_a_step_without_declarations_or_with_an_unknown_field_is_refused() -> None:
    def bare(img: Any, ctx: SeriesContext) -> tuple[Any, None]:
        return img, None

    with pytest.raises(TypeError, match="declares no reads and writes"):
        check_order((bare,))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="no SeriesContext field lesion_volume"):
        declares(reads=("lesion_volume",))


class _Traced(SeriesContext):
    """A context that notes each field read."""

    read: set[str]

    def __getattribute__(self, name: str) -> Any:
        if name in FIELDS and name != "task":
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)


def _state(ctx: SeriesContext) -> dict[str, Any]:
    out = {}
    for name in FIELDS:
        value = object.__getattribute__(ctx, name)
        kept = None if name in ("task", "fit") or isinstance(value, np.ndarray) else copy.deepcopy(value)
        out[name] = (id(value), kept)
    return out


@pytest.mark.integration  # the anatomy fit (ANTs)
@pytest.mark.parametrize("sequence", ["FLAIR", "T1w"])
def test_each_step_reads_and_writes_what_it_declares(sequence: str, tmp_path: Path) -> None:
    lesion = phantom.Lesion((0.62, 0.55, 0.6), 4.0)
    vol = phantom.head(sequence, atrophy=0.3, lesion=lesion, seed=3).astype(np.float32)
    nib.save(nib.Nifti1Image(vol, phantom.AFFINE), tmp_path / "v.nii.gz")
    task = SeriesTask(format="nifti", files=[str(tmp_path / "v.nii.gz")], params=NormalizeParams(),
                      out_dir=str(tmp_path / "out"), final_dir=str(tmp_path / "out"), sequence=sequence)
    ctx = _Traced(task)
    img: Any = None
    try:
        for step in steps.STEPS:
            before = _state(ctx)
            object.__setattr__(ctx, "read", set())
            img, _ = step(img, ctx)
            after = _state(ctx)
            wrote = {n for n in FIELDS if before[n][0] != after[n][0]
                     or (before[n][1] is not None and before[n][1] != after[n][1])}
            assert wrote <= set(step.writes), (step.__name__, sorted(wrote))
            assert ctx.read - set(step.writes) <= set(step.reads), (step.__name__, sorted(ctx.read))
    finally:
        if ctx.fit is not None:
            ctx.fit.close()
    assert ctx.renders and ctx.qc.passed is not None
