"""The review stage on items and a Label Studio export built here: accepted, edited and rejected items, edits that
cannot be applied, disagreement to adjudication, the minimum number of reviews, malformed annotations counted by
reason, and reviewer pseudonyms keyed by the project's secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from curation.errors import InputError
from curation.jsonio import read_jsonl
from curation.params import ReviewParams
from curation.pseudonyms import keyed_hash
from curation.report import Report
from curation.review.merge import run as merge
from curation.schema import Item

from .factories import item, project_params, write_items

SECRET = b"unit-test-secret"


def rparams(**kw) -> ReviewParams:
    return project_params().review.model_copy(update=kw)


def ann(user: int, verdict: str | None, *, reason: str | None = None, cancelled: bool = False,
        visible: str | None = None, **text: str) -> dict[str, Any]:
    """One annotation as Label Studio exports it: choices for verdict and reason, text areas for edits."""
    result: list[dict[str, Any]] = []
    if verdict is not None:
        result.append({"from_name": "verdict", "type": "choices", "value": {"choices": [verdict]}})
    if reason is not None:
        result.append({"from_name": "reject_reason", "type": "choices", "value": {"choices": [reason]}})
    if visible is not None:
        result.append({"from_name": "evidence_visible", "type": "choices", "value": {"choices": [visible]}})
    result += [{"from_name": k, "type": "textarea", "value": {"text": [v]}} for k, v in text.items()]
    return {"completed_by": user, "result": result, **({"was_cancelled": True} if cancelled else {})}


def task(it: Item, *anns: dict[str, Any], adjudication: bool = False) -> dict[str, Any]:
    data = {"item_id": it.item_id, **({"adjudication": True} if adjudication else {})}
    return {"data": data, "annotations": list(anns)}


def run_merge(tmp_path: Path, items: list[Item], tasks: list[Any], **kw) -> tuple[dict[str, Item], Report]:
    src = write_items(tmp_path / "filter", items)
    snapshot = tmp_path / "annotations.json"
    snapshot.write_text(json.dumps(tasks))
    report = merge(rparams(**kw), src, snapshot, tmp_path / "review", secret=SECRET)
    return {i.item_id: i for i in read_jsonl(tmp_path / "review" / "items.jsonl", Item)}, report


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def test_accepted_edited_rejected_and_unreviewed_items(tmp_path: Path) -> None:
    acc, edit, rej, none = (item(n, write_image=False) for n in range(4))  # answers grade 1 .. grade 4
    merged, report = run_merge(tmp_path, [acc, edit, rej, none], [
        task(acc, ann(1, "accept"), ann(2, "Accept")),
        task(edit, ann(1, "accept_with_edits", question="  Grade the   lesion on this FLAIR image. ",
                       answer="grade 5")),
        task(rej, ann(1, "reject", reason="wrong answer")),
    ])
    assert sorted(merged) == sorted([acc.item_id, edit.item_id, none.item_id])  # the rejected item is gone
    assert report.counts["rejected_by_review:wrong_answer"] == 1

    a = merged[acc.item_id]
    assert a.status == "reviewed" and a.review and a.review.final_verdict == "accept" and not a.review.adjudicated
    assert [d.reviewer for d in a.review.decisions] == [
        "rev-" + keyed_hash("reviewer", str(u), secret=SECRET, length=8) for u in (1, 2)]
    assert (a.question, a.answer, a.answer_index) == (acc.question, acc.answer, acc.answer_index)

    e = merged[edit.item_id]
    assert e.status == "reviewed" and e.question == "Grade the lesion on this FLAIR image."  # whitespace collapsed
    assert e.answer == "grade 5" and e.options[e.answer_index or 0] == "grade 5" and e.options == edit.options
    assert report.counts["edited"] == 1

    n = merged[none.item_id]
    assert n.status == "unreviewed" and n.review is None
    assert report.counts["reviewed"] == 2 and report.counts["unreviewed"] == 1
    assert report.inputs == 4 and report.outputs == 3
    assert report.metrics["cohen_kappa_verdict"] == 1.0 and report.metrics["doubly_reviewed"] == 1


def test_edited_options_move_the_answer_index(tmp_path: Path) -> None:
    it = item(0, write_image=False)  # grade 1 at A
    merged, _ = run_merge(tmp_path, [it], [
        task(it, ann(1, "accept_with_edits", options="grade 5\ngrade 4\n\ngrade 3\ngrade 1\n"))])
    got = merged[it.item_id]
    assert got.options == ["grade 5", "grade 4", "grade 3", "grade 1"]
    assert got.answer == "grade 1" and got.answer_index == 3


def test_an_edit_that_breaks_the_item_is_not_applied(tmp_path: Path) -> None:
    it = item(0, write_image=False)
    merged, report = run_merge(tmp_path, [it], [task(it, ann(1, "accept_with_edits", answer="grade 9"))])
    got = merged[it.item_id]
    assert got.status == "unreviewed" and (got.answer, got.options) == (it.answer, it.options)
    assert report.failures == {"edit_not_applied:answer_not_in_options": 1}
    quarantine = list(read_jsonl(tmp_path / "review" / "quarantine.jsonl"))
    assert quarantine == [{"path": it.item_id, "reason": "edit_not_applied:answer_not_in_options",
                           "detail": "the item is kept as generated"}]


def test_disagreement_waits_for_adjudication_which_then_decides(tmp_path: Path) -> None:
    it = item(0, write_image=False)
    split = [task(it, ann(1, "accept"), ann(2, "reject", reason="ambiguous"))]
    merged, report = run_merge(tmp_path, [it], split)
    assert merged[it.item_id].status == "unreviewed" and merged[it.item_id].review.final_verdict is None
    assert report.counts["disagreement_pending_adjudication"] == 1
    assert [i.item_id for i in read_jsonl(tmp_path / "review" / "adjudication_queue.jsonl", Item)] == [it.item_id]

    merged, report = run_merge(tmp_path, [it], [*split, task(it, ann(3, "reject", reason="ambiguous"),
                                                             adjudication=True)])
    assert merged == {} and report.counts["rejected_by_review:ambiguous"] == 1
    merged, _ = run_merge(tmp_path, [it], [*split, task(it, ann(3, "accept"), adjudication=True)])
    review = merged[it.item_id].review
    assert merged[it.item_id].status == "reviewed" and review.final_verdict == "accept" and review.adjudicated
    assert len(review.decisions) == 2  # the adjudicator decides; the reviewers' decisions are kept


def test_min_reviews_and_cancelled_annotations(tmp_path: Path) -> None:
    it = item(0, write_image=False)
    merged, _ = run_merge(tmp_path, [it], [task(it, ann(1, "accept"), ann(2, "reject", cancelled=True))],
                          min_reviews=2)
    got = merged[it.item_id]
    assert got.status == "unreviewed" and len(got.review.decisions) == 1  # the cancelled one is not a decision
    merged, _ = run_merge(tmp_path, [it], [task(it, ann(1, "accept"), ann(2, "accept"))], min_reviews=2)
    assert merged[it.item_id].status == "reviewed"


def test_evidence_not_visible_rejects_whatever_the_verdict(tmp_path: Path) -> None:
    it = item(0, write_image=False)
    merged, report = run_merge(tmp_path, [it], [task(it, ann(1, "accept", visible="No"))])
    assert merged == {} and report.counts["rejected_by_review:evidence_not_visible"] == 1


def test_malformed_annotations_are_counted_and_do_not_decide(tmp_path: Path) -> None:
    it = item(0, write_image=False)
    merged, report = run_merge(tmp_path, [it], [
        task(it, ann(1, "maybe"), ann(2, "reject", reason="too boring"), "not an annotation",
             {"completed_by": 3, "result": "not a list"}),
        {"data": {}, "annotations": [ann(1, "accept")]},
    ])
    assert merged[it.item_id].status == "unreviewed" and merged[it.item_id].review is None
    assert report.failures == {"annotation_malformed": 5}
    details = sorted(q.detail for q in report.quarantine)
    assert details == ["annotation has no result list", "annotation is not an object",
                       "reject reason 'too boring' is not in the fixed list", "task has no data.item_id",
                       "verdict 'maybe' is not one of accept, accept_with_edits, reject"]


def test_without_a_snapshot_every_item_is_unreviewed_and_a_bad_one_is_an_error(tmp_path: Path) -> None:
    items = [item(n, write_image=False) for n in range(2)]
    src = write_items(tmp_path / "filter", items)
    report = merge(rparams(), src, tmp_path / "absent.json", tmp_path / "review", secret=SECRET)
    assert report.counts["unreviewed"] == 2 and report.outputs == 2
    (tmp_path / "bad.json").write_text('{"tasks": []}')
    with pytest.raises(InputError, match="not a JSON list of tasks"):
        merge(rparams(), src, tmp_path / "bad.json", tmp_path / "review", secret=SECRET)
    with pytest.raises(InputError, match="no items.jsonl"):
        merge(rparams(), tmp_path / "nowhere", tmp_path / "absent.json", tmp_path / "review", secret=SECRET)
