"""Expert review against a real Label Studio server: push, reviewers annotate, pull, merge, agreement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.errors import ServiceError
from curation.params import ReviewParams
from curation.records import read_jsonl
from curation.review import labelstudio as lsr
from curation.review.merge import run as merge
from curation.schema import Item

from .conftest import ROOT


@pytest.fixture(autouse=True)
def _env(label_studio, pipeline, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.chdir(pipeline)


def params(title: str, **kw) -> ReviewParams:
    return ReviewParams(label_config=str(ROOT / "annotation" / "label_config.xml"), project_title=title,
                        local_files_root=".", **kw)


def items(pipeline: Path) -> list[Item]:
    return list(read_jsonl(pipeline / "filter" / "items.jsonl", Item))


def tasks_by_item(client, project_id: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in client.tasks.list(project=project_id, fields="all"):
        assert t.data["item_id"] not in out, f"duplicate task for {t.data['item_id']}"
        out[t.data["item_id"]] = t.id
    return out


def annotate(client, task_id: int, user_id: int, verdict: str, reason: str | None = None,
             edits: dict | None = None, difficulty: int | None = None) -> None:
    def r(name, value):
        return {"from_name": name, "to_name": "question_text", "type": "choices" if "choices" in value else
                ("rating" if "rating" in value else "textarea"), "value": value}

    result = [r("verdict", {"choices": [verdict]})]
    if reason:
        result.append(r("reject_reason", {"choices": [reason]}))
    for k, v in (edits or {}).items():
        result.append(r(k, {"choices": v} if k.endswith("_dims") else {"text": [v]}))
    if difficulty:
        result.append(r("difficulty", {"rating": difficulty}))
    client.annotations.create(id=task_id, completed_by=user_id, result=result)


def test_push_is_idempotent_and_updates_changed_items(pipeline, tmp_path):
    p = params("idempotence")
    its = items(pipeline)
    first = lsr.push(p, its)
    assert first["created"] == len(its)
    assert lsr.push(p, its) == {"unchanged": len(its), "project_id": first["project_id"]}
    its[0].question = "Edited by the curators: " + its[0].question
    assert lsr.push(p, its)["updated"] == 1
    client = lsr.connect(p)
    tasks = tasks_by_item(client, first["project_id"])
    assert set(tasks) == {i.item_id for i in its}
    task = client.tasks.get(id=tasks[its[0].item_id])
    assert task.data["question"].startswith("Edited by the curators")
    # images are referenced through local-files storage; the generated answer comes as a pre-annotation
    assert all(u.startswith("/data/local-files/?d=") for u in task.data["images"])
    preds = list(client.predictions.list(task=task.id))
    assert any(r["from_name"] == "answer" and r["value"]["text"] == [its[0].answer] for r in preds[0].result)
    project = client.projects.get(id=first["project_id"])
    assert project.maximum_annotations == 2 and project.overlap_cohort_percentage == 20
    assert "Reviewer guidelines" in (project.expert_instruction or "")


def test_review_round_trip_agreement_and_adjudication(pipeline, tmp_path):
    p = params("round trip", annotations=str(tmp_path / "annotations.json"))
    its = [i for i in items(pipeline) if i.format.value == "mcq"][:7]
    pushed = lsr.push(p, its)
    client = lsr.connect(p)
    a = client.users.create(username="reviewer_a", email="a@reviewers.example.org", password="pw-a-123456").id
    b = client.users.create(username="reviewer_b", email="b@reviewers.example.org", password="pw-b-123456").id
    ids = tasks_by_item(client, pushed["project_id"])
    t = [ids[i.item_id] for i in its]
    edited = its[3]
    new_options = list(reversed(edited.options))
    edits = {"question": "Which grade best describes this study?", "options": "\n".join(new_options),
             "answer": edited.answer, "visual_dims": ["spatial"]}
    # reviewer A / reviewer B verdicts on six doubly-reviewed items, and one item reviewed once
    annotate(client, t[0], a, "Accept", difficulty=2)
    annotate(client, t[0], b, "Accept", difficulty=2)
    annotate(client, t[1], a, "Accept", difficulty=3)
    annotate(client, t[1], b, "Reject", "Ambiguous", difficulty=4)
    annotate(client, t[2], a, "Reject", "Wrong answer", difficulty=1)
    annotate(client, t[2], b, "Reject", "Wrong answer", difficulty=1)
    annotate(client, t[3], a, "Accept with edits", edits=edits, difficulty=3)
    annotate(client, t[3], b, "Accept with edits", edits=edits, difficulty=4)
    annotate(client, t[4], a, "Accept", difficulty=2)
    annotate(client, t[4], b, "Accept", difficulty=3)
    annotate(client, t[5], a, "Reject", "PHI visible", difficulty=5)
    annotate(client, t[5], b, "Reject", "PHI visible", difficulty=5)
    annotate(client, t[6], a, "Accept", difficulty=1)

    snap = tmp_path / "annotations.json"
    assert lsr.pull(p, snap) == {"tasks": 7, "annotations": 13}
    assert snap.read_bytes() == (lsr.pull(p, tmp_path / "again.json") and (tmp_path / "again.json").read_bytes())
    st = lsr.status(p)
    assert st["reviewed"] == 7 and sorted(st["per_reviewer"].values()) == [6, 7]

    src = tmp_path / "in"
    src.mkdir()
    (src / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in its))
    report = merge(p, src, snap, tmp_path / "merged")
    out = {i.item_id: i for i in read_jsonl(tmp_path / "merged" / "items.jsonl", Item)}
    # rejected items are dropped with their reasons; the disagreement waits for adjudication
    assert its[2].item_id not in out and its[5].item_id not in out
    assert report.counts["rejected_by_review:wrong_answer"] == 1
    assert report.counts["rejected_by_review:phi_visible"] == 1
    assert out[its[1].item_id].review.final_verdict is None and out[its[1].item_id].status == "unreviewed"
    queue = list(read_jsonl(tmp_path / "merged" / "adjudication_queue.jsonl", Item))
    assert [q.item_id for q in queue] == [its[1].item_id]
    # accepted edits are applied exactly
    e = out[edited.item_id]
    assert e.question == edits["question"] and e.options == new_options
    assert e.options[e.answer_index] == edited.answer and [d.value for d in e.visual_dims] == ["spatial"]
    assert out[its[0].item_id] == its[0].model_copy(update={"status": "reviewed", "review": out[its[0].item_id].review})
    reviewers = {d.reviewer for i in out.values() if i.review for d in i.review.decisions}
    assert len(reviewers) == 2 and all(r.startswith("rev-") for r in reviewers)
    assert "completed_by" not in json.dumps([i.review.model_dump() for i in out.values() if i.review])
    # agreement, against hand-computed values:
    # verdicts A = [acc, acc, rej, awe, acc, rej], B = [acc, rej, rej, awe, acc, rej]
    # po = 5/6, pe = (3*2 + 2*3 + 1*1)/36 = 13/36, kappa = (5/6 - 13/36)/(1 - 13/36) = 17/23
    # alpha (nominal): Do = 2/12, De = 2*(5*5 + 5*2 + 5*2)/(12*11) = 90/132, alpha = 1 - Do/De = 34/45
    m = report.metrics
    assert m["doubly_reviewed"] == 6
    assert m["cohen_kappa_verdict"] == pytest.approx(17 / 23, abs=1e-4)
    assert m["krippendorff_alpha_verdict"] == pytest.approx(34 / 45, abs=1e-4)
    # difficulty pairs (2,2) (3,4) (1,1) (3,4) (2,3) (5,5): kappa over categories, po = 3/6
    # A: 1,2,3,3,2,5 -> {1:1, 2:2, 3:2, 5:1}; B: 2,4,1,4,3,5 -> {1:1, 2:1, 3:1, 4:2, 5:1}
    # pe = (1*1 + 2*1 + 2*1 + 1*1)/36 = 6/36, kappa = (1/2 - 1/6)/(1 - 1/6) = 0.4
    assert m["cohen_kappa_difficulty"] == pytest.approx(0.4, abs=1e-4)

    # adjudication: the queue goes to its own project; the adjudicator's decision wins
    adj = lsr.push(p, queue, adjudication=True)
    assert adj["created"] == 1
    adj_task = tasks_by_item(client, adj["project_id"])[its[1].item_id]
    annotate(client, adj_task, a, "Reject", "Ambiguous")
    lsr.pull(p, snap)
    report = merge(p, src, snap, tmp_path / "merged2")
    out2 = {i.item_id for i in read_jsonl(tmp_path / "merged2" / "items.jsonl", Item)}
    assert its[1].item_id not in out2 and report.counts["rejected_by_review:ambiguous"] == 1
    assert report.metrics["adjudication_queue"] == 0


def test_malformed_annotation_in_export_is_reported_not_fatal(pipeline, tmp_path):
    its = items(pipeline)[:3]
    snap = tmp_path / "a.json"
    good = {"completed_by": 1, "result": [{"from_name": "verdict", "value": {"choices": ["Accept"]}}]}
    snap.write_text(json.dumps([
        {"data": {"item_id": its[0].item_id}, "annotations": [good]},
        {"data": {"item_id": its[1].item_id}, "annotations": [{"completed_by": 2, "result": [
            {"from_name": "verdict", "value": {"choices": ["Maybe"]}}]}]},
        {"data": {"item_id": its[2].item_id}, "annotations": ["not an annotation"]},
        {"data": {}},
    ]))
    src = tmp_path / "in"
    src.mkdir()
    (src / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in its))
    report = merge(params("unused"), src, snap, tmp_path / "out")
    assert report.counts["reviewed"] == 1 and report.counts["unreviewed"] == 2
    assert report.failures["annotation_malformed"] == 3
    assert len(list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))) == 3


def test_server_restart_mid_push_resumes_without_duplicates(pipeline, label_studio):
    p = params("restart drill")
    its = items(pipeline)
    assert len(its) > 20

    def stop_after_first_batch(created: int) -> None:
        if created == 10:
            label_studio.stop()

    with pytest.raises(ServiceError, match="cannot reach Label Studio"):
        lsr.push(p, its, batch_size=10, on_batch=stop_after_first_batch)
    with pytest.raises(ServiceError, match="cannot reach Label Studio"):
        lsr.push(p, its)  # the server is down: a clear error, nothing else
    label_studio.start()
    counts = lsr.push(p, its, batch_size=10)
    assert counts["created"] == len(its) - 10 and counts["unchanged"] == 10
    assert set(tasks_by_item(lsr.connect(p), counts["project_id"])) == {i.item_id for i in its}


def test_cli_push_pull_status(pipeline, tmp_path):
    from typer.testing import CliRunner

    from curation.cli import app

    prm = tmp_path / "params.yaml"
    prm.write_text(json.dumps({"review": {"label_config": str(ROOT / "annotation" / "label_config.xml"),
                                          "project_title": "cli", "items": str(pipeline / "filter" / "items.jsonl"),
                                          "annotations": str(tmp_path / "snap.json")}}))
    runner = CliRunner()
    r = runner.invoke(app, ["review", "push", "--params", str(prm)])
    assert r.exit_code == 0 and "created" in r.output, r.output
    r = runner.invoke(app, ["review", "status", "--params", str(prm)])
    assert r.exit_code == 0 and "0/" in r.output
    r = runner.invoke(app, ["review", "pull", "--params", str(prm)])
    assert r.exit_code == 0 and (tmp_path / "snap.json").exists()
    r = runner.invoke(app, ["review", "status", "--params", str(prm)], env={"LABEL_STUDIO_URL": "http://127.0.0.1:9"})
    assert r.exit_code == 7 and r.output.startswith("error: cannot reach Label Studio"), r.output
