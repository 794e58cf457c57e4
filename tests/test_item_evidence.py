"""Every volume item's image contains its target: each item's evidence (series, plane, position in mm) is checked
against the demo phantom's ground truth, follow-ups mapped into their baseline's world through the registration."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curation.demo import phantom
from curation.imaging.targets import PLANE_NORMAL
from curation.jsonio import read_jsonl
from curation.schema import Case, Item

from .test_imaging_targets import _in_plane, _source_affine, _truth_by_series, _world


def test_every_volume_item_shows_its_target(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(pipeline)
    cases = list(read_jsonl(pipeline / "extract" / "cases.jsonl", Case))
    truth = _truth_by_series(cases)
    series = {(c.case_id, s.series_id): s for c in cases for s in c.all_series()}
    items = list(read_jsonl(pipeline / "generate" / "items.jsonl", Item))
    checked = 0
    for it in items:
        for ev in it.evidence:
            key = (it.case_id, ev.series_id or "")
            if key not in truth or ev.target in (None, "figure"):
                continue
            s, spec = series[key], truth[key]
            render = next(r for r in s.renders if r.path == ev.image)
            assert (render.plane, render.slice_index, render.position_mm) == (ev.plane, ev.slice_index,
                                                                             ev.position_mm)
            assert render.target == ev.target and render.role in ("target", "paired", "change", "change_baseline"), \
                (it.template_id, render)
            if ev.plane == "montage":
                checked += 1
                continue
            gt = phantom.ground_truth(atrophy=spec["atrophy"], lesion=spec["lesion"], pose=spec["pose"],
                                   subject=spec["subject_anatomy"])
            pts = _world(gt[ev.target], _source_affine(spec))
            if render.role in ("paired", "change"):  # the follow-up's truth in the baseline's world, where it was
                # rendered (registered to the baseline T1w, or, for a lesion change, to the baseline FLAIR)
                name = "register_to_baseline" if render.role == "paired" else "lesion_change"
                step = next(st for st in s.provenance if st.name == name)
                to_base = np.linalg.inv(np.asarray(step.args["baseline_to_followup_ras"]))
                pts = (to_base[:3, :3] @ pts.T).T + to_base[:3, 3]
            assert _in_plane(pts, PLANE_NORMAL[ev.plane], ev.position_mm) > 0, (it.template_id, it.case_id, ev)
            checked += 1
    # every volume item that shows a located target had each of its images checked above (an item asking which
    # sequence is shown has no target to check)
    volume_items = [i for i in items if i.source.value in ("adni", "oasis1", "oasis3")
                    and any(e.target not in (None, "figure") for e in i.evidence)]
    shown = sum(1 for i in volume_items for e in i.evidence if e.target not in (None, "figure"))
    assert volume_items and checked == shown, (checked, shown)
    # no item mixes visits, except a registered pair (two visits, one position)
    for it in items:
        visits = {e.visit_id for e in it.evidence}
        if len(visits) > 1:
            assert len(visits) == 2 and len({(e.plane, e.position_mm) for e in it.evidence}) == 1, it
            assert it.facts["visit"] == "+".join(sorted(visits, key=[e.visit_id for e in it.evidence].index))
        else:
            assert it.facts["visit"] in (visits | {None}), (it.facts["visit"], visits)
