"""Expert review against a real Label Studio server: push, reviewers annotate, pull, merge, agreement."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from curation.errors import ServiceError
from curation.jsonio import read_jsonl
from curation.params import ReviewParams, StackParams
from curation.review import labelstudio as lsr
from curation.review.merge import run as merge
from curation.schema import Item

from .conftest import ROOT


@pytest.fixture(scope="module")
def label_studio_pg(pipeline, tmp_path_factory):
    """A team server: Label Studio on its own PostgreSQL cluster (initdb/pg_ctl in a temp dir, 127.0.0.1)."""
    from curation.testing.labelstudio import LabelStudioServer
    from curation.testing.postgres import PostgresCluster, pg_bin

    if pg_bin("initdb") is None or pg_bin("pg_ctl") is None:
        pytest.fail("PostgreSQL is missing (initdb, pg_ctl): `make test` installs it (apt package postgresql)")
    cluster = PostgresCluster().start()
    server = LabelStudioServer(tmp_path_factory.mktemp("labelstudio-pg"), document_root=pipeline,
                               exe=ROOT / ".venv-labelstudio" / "bin" / "label-studio", database=cluster.env())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request, monkeypatch):
    """The same round trips against Label Studio on SQLite (one machine) and on PostgreSQL (a team)."""
    ls = request.getfixturevalue("label_studio" if request.param == "sqlite" else "label_studio_pg")
    monkeypatch.setenv("LABEL_STUDIO_URL", ls.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", ls.token)
    return ls


@pytest.fixture(autouse=True)
def _env(label_studio, pipeline, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.chdir(pipeline)


def params(title: str, **kw) -> ReviewParams:
    kw.setdefault("cases", "extract/cases.jsonl")
    kw.setdefault("stack", StackParams(dir="review-stacks"))
    return ReviewParams(label_config=str(ROOT / "annotation" / "label_config.xml"), project_title=title,
                        local_files_root=".", **kw)


# -- a synthetic series with a lesion at known voxels, for exact coordinates ------------------------------------------
SYN_SHAPE = (40, 48, 30)
SYN_AFFINE = np.array([[1.2, 0, 0, -24.0], [0, 1.0, 0, -24.0], [0, 0, 2.0, -30.0], [0, 0, 0, 1]])
LESION = (slice(10, 15), slice(30, 36), slice(11, 14))  # i 10-14, j 30-35, k 11-13


@pytest.fixture(scope="session")
def synthetic(pipeline):
    """A case whose FLAIR has a bright box (the 'lesion') at known voxels, and an item claiming slice 12 shows it.
    Returns (cases.jsonl with the pipeline's cases and this one, the item)."""
    import nibabel as nib

    from curation.imaging.render import save_png, slice_2d, to_png, window
    from curation.schema import Case, Evidence, Generator, Render, Series, Visit

    folder = pipeline / "synthetic" / "syn-FLAIR"
    folder.mkdir(parents=True, exist_ok=True)
    i, j, k = np.ogrid[:SYN_SHAPE[0], :SYN_SHAPE[1], :SYN_SHAPE[2]]
    head = ((i - 19.5) / 15) ** 2 + ((j - 23.5) / 19) ** 2 + ((k - 14.5) / 13) ** 2 <= 1
    data = np.where(head, 0.35 + 0.1 * ((i + j) % 2), 0.0).astype(np.float32)
    data[LESION] = 1.0
    nib.save(nib.Nifti1Image(data, SYN_AFFINE), folder / "volume.nii.gz")
    render = "synthetic/syn-FLAIR/axial_015.png"
    save_png(to_png(window(slice_2d(data, "axial", 15), 0.35, 1.0), 256, (1.0, 1.2)), pipeline / render)
    series = Series(series_id="syn-FLAIR", sequence="FLAIR", format="nifti", nifti="synthetic/syn-FLAIR/volume.nii.gz",
                    shape=SYN_SHAPE, spacing=(1.2, 1.0, 2.0),
                    renders=[Render(plane="axial", slice_index=15, window=(0.35, 1.0), path=render)])
    case = Case(case_id="syn-case", source="adni", license="test", visits=[Visit(visit_id="v0", series=[series])])
    cases = pipeline / "synthetic" / "cases.jsonl"
    cases.write_text((pipeline / "extract" / "cases.jsonl").read_text() + case.model_dump_json() + "\n")
    item = Item(item_id="syn-item", case_id="syn-case", source="adni", task_type="lesion_recognition", format="mcq",
                question="Which abnormality does this FLAIR image show?", options=["A lesion", "No abnormality"],
                answer="A lesion", answer_index=0, images=[render], generator=Generator(kind="template"),
                evidence=[Evidence(image=render, series_id="syn-FLAIR", visit_id="v0", sequence="FLAIR",
                                   target="lesion", plane="axial", slice_index=12, position_mm=-6.0)],
                license="test", split="test", status="kept")
    return cases, item


def plain_items(pipeline: Path, n: int = 1) -> list[Item]:
    """Demo MCQ items without evidence, each showing the axial render of a volume of its case."""
    from curation.schema import Case

    cases = {c.case_id: c for c in read_jsonl(pipeline / "extract" / "cases.jsonl", Case)}
    out = []
    for it in items(pipeline):
        for s in cases[it.case_id].all_series() if it.case_id in cases and it.format.value == "mcq" else []:
            axial = next((r for r in s.renders if r.plane == "axial" and r.slice_index is not None), None)
            if s.nifti and axial:
                update = {"item_id": it.item_id + "-plain", "evidence": [], "images": [axial.path],
                          "facts": {**it.facts, "axial_slice": axial.slice_index}}
                out.append(it.model_copy(update=update))
                break
        if len(out) == n:
            return out
    raise AssertionError(f"fewer than {n} demo items with an axial render of a volume")


def blob_box(png: Path) -> tuple[float, float, float, float]:
    """The lesion's bounding box in a stack page, as fractions of its width and height (the rendering's truth)."""
    from PIL import Image

    px = np.asarray(Image.open(png).convert("L"), dtype=float)
    px[:20, :] = 0  # the corner label
    ys, xs = np.nonzero(px > 150)
    h, w = px.shape
    return xs.min() / w, ys.min() / h, (xs.max() + 1) / w, (ys.max() + 1) / h


def region(page: int, box: tuple[float, float, float, float], label: str = "Lesion", *,
           size: tuple[int, int], point: bool = False) -> dict:
    x0, y0, x1, y1 = (100 * c for c in box)
    kind = "keypointlabels" if point else "rectanglelabels"
    value = ({"x": x0, "y": y0, "width": 1.0} if point else
             {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0, "rotation": 0})
    return {"from_name": "evidence_point" if point else "evidence_box", "to_name": "stack", "type": kind,
            "item_index": page, "original_width": size[0], "original_height": size[1], "image_rotation": 0,
            "value": {**value, kind: [label]}}


def annotate_evidence(client, task_id: int, user_id: int, verdict: str | None, visible: str,
                      regions: list[dict]) -> None:
    result = [{"from_name": "evidence_visible", "to_name": "stack", "type": "choices",
               "value": {"choices": [visible]}}, *regions]
    if verdict:
        result.append({"from_name": "verdict", "to_name": "question_text", "type": "choices",
                       "value": {"choices": [verdict]}})
    client.annotations.create(id=task_id, completed_by=user_id, result=result)


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


def test_review_round_trip_agreement_and_adjudication(pipeline, tmp_path, server):
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
    base = items(pipeline)
    # more than two batches of ten, whatever the demo corpus yields: copies under their own ids
    its = [it.model_copy(update={"item_id": f"{it.item_id}-{n}"}) for n in range(-(-21 // len(base))) for it in base]
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


def test_pushed_task_holds_the_stack_and_a_changed_item_updates_it(pipeline, synthetic):
    cases, syn = synthetic
    p = params("stacks", cases=str(cases))
    plain = plain_items(pipeline)[0]
    first = lsr.push(p, [syn, plain])
    assert first["created"] == 2
    client = lsr.connect(p)
    ids = tasks_by_item(client, first["project_id"])
    data = client.tasks.get(id=ids["syn-item"]).data
    # the evidence slice first and framed, then every second slice through the head plus the slices near slice 12
    pages = data["stack_pages"]
    assert pages[0][:2] == [0, 12] and pages[0][2] == pytest.approx(-6.0)
    assert data["stack"][0].startswith("/data/local-files/?d=review-stacks/") and data["stack"][0].endswith(
        "axial_012_evidence.png")
    slices = [pg[1] for pg in pages[1:]]
    assert slices == sorted(slices) and {10, 11, 13, 14} <= set(slices) and 12 not in slices
    assert all(b - a <= 2 for a, b in zip(slices, slices[1:], strict=False))
    assert len(pages) == len(data["stack"]) <= p.stack.max_slices
    assert data["stack_series"][0]["series_id"] == "syn-FLAIR" and data["stack_series"][0]["shape"] == list(SYN_SHAPE)
    assert data["images"] == ["/data/local-files/?d=synthetic/syn-FLAIR/axial_015.png"]  # its own renders kept
    from PIL import Image

    framed = np.asarray(Image.open(pipeline / data["stack_paths"][0]).convert("RGB"))
    assert tuple(framed[100, 1]) == (255, 210, 0)  # the yellow frame marks the evidence slice
    for path in data["stack_paths"]:
        assert (pipeline / path).is_file()
    # an item without evidence: its series' stack opens at the slice of its own axial render
    plain_data = client.tasks.get(id=ids[plain.item_id]).data
    assert plain_data["stack_pages"][0][1] == plain.facts["axial_slice"]
    # the curators move the claimed evidence: the same task, a new stack
    moved = syn.model_copy(update={"evidence": [syn.evidence[0].model_copy(update={"slice_index": 13})]})
    assert lsr.push(p, [moved, plain]) == {"updated": 1, "unchanged": 1, "project_id": first["project_id"]}
    ids2 = tasks_by_item(client, first["project_id"])
    assert ids2 == ids
    data = client.tasks.get(id=ids["syn-item"]).data
    assert data["stack_pages"][0][1] == 13 and data["stack"][0].endswith("axial_013_evidence.png")


def test_evidence_round_trip_to_the_release(pipeline, synthetic, tmp_path, server):
    import pyarrow.parquet as pq

    from curation.params import ReleaseParams
    from curation.release.build import run as build

    cases, syn = synthetic
    p = params(f"evidence {server.port}", cases=str(cases), annotations=str(tmp_path / "snap.json"))
    other, hidden = plain_items(pipeline, 2)
    pushed = lsr.push(p, [syn, other, hidden])
    client = lsr.connect(p)
    a = client.users.create(username="ev_a", email="ev_a@reviewers.example.org", password="pw-a-123456").id
    b = client.users.create(username="ev_b", email="ev_b@reviewers.example.org", password="pw-b-123456").id
    ids = tasks_by_item(client, pushed["project_id"])
    data = client.tasks.get(id=ids["syn-item"]).data
    page = next(n for n, pg in enumerate(data["stack_pages"]) if pg[1] == 13)  # not the first page: item_index counts
    png = pipeline / data["stack_paths"][page]
    box = blob_box(png)
    size = tuple(data["stack_series"][0]["png_size"])
    half = (box[2] - box[0]) / 2
    shifted = (box[0] + half, box[1], box[2] + half, box[3])  # IoU with box: 1/3
    annotate_evidence(client, ids["syn-item"], a, "Accept", "Yes", [region(page, box, size=size)])
    annotate_evidence(client, ids["syn-item"], b, "Accept", "Yes", [region(page, shifted, size=size)])
    other_size = tuple(client.tasks.get(id=ids[other.item_id]).data["stack_series"][0]["png_size"])
    annotate_evidence(client, ids[other.item_id], a, "Accept", "Yes",
                      [region(0, (0.5, 0.5, 0.5, 0.5), "Hippocampus", size=other_size, point=True)])
    annotate_evidence(client, ids[other.item_id], b, "Accept", "Wrong slice",
                      [region(3, (0.5, 0.5, 0.5, 0.5), "Hippocampus", size=other_size, point=True)])
    annotate_evidence(client, ids[hidden.item_id], a, "Accept", "No", [])  # accepted, but the evidence is not there

    st = lsr.status(p)
    assert st["evidence_agreement"] == {"pairs": 2, "same_slice_rate": 0.5, "rectangle_pairs": 1,
                                        "rectangle_iou": pytest.approx(1 / 3, abs=0.02)}
    assert st["agreement"]["doubly_reviewed"] == 2 and st["agreement"]["cohen_kappa_verdict"] == 1.0

    snap = tmp_path / "snap.json"
    lsr.pull(p, snap)
    src = tmp_path / "in"
    src.mkdir()
    (src / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in (syn, other, hidden)))
    report = merge(p, src, snap, tmp_path / "merged")
    out = {i.item_id: i for i in read_jsonl(tmp_path / "merged" / "items.jsonl", Item)}
    assert hidden.item_id not in out and report.counts["rejected_by_review:evidence_not_visible"] == 1
    assert report.counts["evidence_marked"] == 2 and report.counts["evidence_wrong_slice"] == 1
    assert report.metrics["evidence_same_slice_rate"] == 0.5
    marks = out["syn-item"].review.evidence
    assert len(marks) == 2 and {m.slice_index for m in marks} == {13}

    release = build(ReleaseParams(redistribution={"adni": "reference"}, arrow_copy=False), tmp_path / "merged",
                    tmp_path / "releases", params_file=ROOT / "params.yaml")
    root = tmp_path / "releases" / release.metrics["release"]
    rows = {r["item_id"]: r for f in sorted((root / "data").glob("*.parquet")) for r in pq.read_table(f).to_pylist()}
    evidence = json.loads(rows["syn-item"]["evidence"])
    claimed = [e for e in evidence if e["kind"] == "claimed"]
    assert claimed == [{"kind": "claimed", "series": 0, "sequence": "FLAIR", "target": "lesion", "plane": "axial",
                        "slice_index": 12, "position_mm": -6.0, "target_fraction": None}]
    mark = next(e for e in evidence if e["kind"] == "marked" and e["image_box"] == pytest.approx(list(box), abs=1e-4))
    assert mark["series"] == 0 and mark["label"] == "lesion" and mark["shape"] == "rectangle"
    assert mark["slice_index"] == 13 and mark["position_mm"] == pytest.approx(-4.0)
    # the box drawn round the rendered lesion lands on the lesion's voxels (edges at i 9.5-14.5, j 29.5-35.5) ...
    assert mark["voxel_min"] == pytest.approx([9.5, 29.5, 13], abs=0.35)
    assert mark["voxel_max"] == pytest.approx([14.5, 35.5, 13], abs=0.35)
    # ... and on its world position through the affine (x = 1.2 i - 24, y = j - 24, z = 2 k - 30)
    assert mark["mm_min"] == pytest.approx([-12.6, 5.5, -4.0], abs=0.45)
    assert mark["mm_max"] == pytest.approx([-6.6, 11.5, -4.0], abs=0.45)
    # a reference-only source ships coordinates only: no series id, no path, no pixels of the stack
    text = rows["syn-item"]["evidence"]
    assert "syn-FLAIR" not in text and ".png" not in text and "review-stacks" not in text
    assert rows["syn-item"]["images"] == [] and not list((root / "images").glob("syn-item*"))
