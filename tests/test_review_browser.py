"""The labeling UI, rendered by headless Chromium against the real server: the question, the slice stack with its
pager (opening on the slice with the demo lesion) and the evidence controls show."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from curation.deid.stage import series_pseudonym
from curation.jsonio import read_jsonl
from curation.pseudonyms import pseudonym
from curation.review import labelstudio as lsr
from curation.schema import Case, Evidence, Generator, Item

from .browser import chromium, login_cookie, screenshot_task
from .test_review_labelstudio import params


@pytest.fixture(autouse=True)
def _env(label_studio, pipeline, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.chdir(pipeline)


def baseline_flair(n: int) -> str:
    """The series id of demo ADNI subject ``n``'s baseline FLAIR after deidentify (its IDA image id pseudonymised)."""
    from curation.demo.adni import ADNI_SUBJECTS

    secret = os.environ["CURATION_SECRET"].encode()
    case_id = pseudonym("adni", ADNI_SUBJECTS[n][0], secret=secret)
    return series_pseudonym(case_id, f"I{100000 + 1000 * n + 1}", secret)


def lesion_item(pipeline: Path) -> Item:
    """An item claiming the demo lesion: the baseline FLAIR of the demo ADNI subject with a lesion, at the slice the
    normalize stage placed on the lesion (or, without one, the slice through the phantom's lesion centre)."""
    from curation.demo.adni import ADNI_SUBJECTS

    n, lesion = next((n, s[-1]) for n, s in enumerate(ADNI_SUBJECTS) if s[-1] is not None)
    series_id = baseline_flair(n)
    case, series = next((c, s) for c in read_jsonl(pipeline / "extract" / "cases.jsonl", Case)
                        for s in c.all_series() if c.source.value == "adni" and s.series_id == series_id)
    placed = next((r for r in series.renders if r.target == "lesion" and r.plane == "axial"), None)
    z = placed.slice_index if placed else int(round(lesion.center[2] * (series.shape[2] - 1)))
    axial = next(r for r in series.renders if r.plane == "axial")
    return Item(item_id="browser-lesion", case_id=case.case_id, source="adni", task_type="lesion_recognition",
                format="mcq", question="Which abnormality does this FLAIR study show?",
                options=["A white matter lesion", "No abnormality"], answer="A white matter lesion", answer_index=0,
                images=[(placed or axial).path], generator=Generator(kind="template"), license="test",
                evidence=[Evidence(image=(placed or axial).path, series_id=series_id, sequence="FLAIR",
                                   target="lesion", plane="axial", slice_index=z)])


def test_pushed_task_renders_stack_pager_and_question(pipeline, label_studio, tmp_path):
    if chromium() is None:
        pytest.fail("chromium is missing: `make test` installs it (apt package chromium)")
    item = lesion_item(pipeline)
    pushed = lsr.push(params("browser"), [item])
    client = lsr.connect(params("browser"))
    task = next(t for t in client.tasks.list(project=pushed["project_id"], fields="all")
                if t.data["item_id"] == item.item_id)
    n_pages = len(task.data["stack"])
    assert n_pages > 20 and task.data["stack_pages"][0][1] == item.evidence[0].slice_index
    cookie = login_cookie(label_studio.url, label_studio.username, label_studio.password)
    ready = (f"document.body.innerText.includes({json.dumps(item.question)}) && "
             "Array.from(document.images).filter(i => i.complete && i.naturalWidth >= 64).length >= 2 && "
             f"document.body.innerText.includes('{n_pages}')")
    shot = Path(pipeline / "browser-task.png")
    page = f"{label_studio.url}/projects/{pushed['project_id']}/data?task={task.id}"
    seen = screenshot_task(label_studio.url, cookie, page, shot, ready)
    assert seen["ready"], seen["text"][:800]
    text = seen["text"]
    assert item.question in text and "Verdict" in text and "Reject" in text
    # the pager of the stack ("1 of N"), the evidence labels and the visibility question
    assert f"of {n_pages}" in text or f"/ {n_pages}" in text or f"/{n_pages}" in text, text[:1500]
    for word in ("Lesion", "Hippocampus", "Ventricle", "Wrong slice", "claimed evidence"):
        assert word in text, word
    assert len(seen["images"]) >= 2, "the stack slice and the item's render did not load"
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.shape[1] >= 1200 and pixels.std() > 20, "the screenshot is blank"
    # the page shown is the slice through the demo lesion: FLAIR-bright voxels inside the head that the same slice of a
    # lesion-free demo subject's baseline FLAIR (same grid, same window rule) does not have
    from curation.demo.adni import ADNI_SUBJECTS
    from curation.review.stack import StackBuilder, load_index

    def bright(path: Path) -> int:
        px = np.asarray(Image.open(path).convert("L"))
        h, w = px.shape
        return int((px[h // 5: 4 * h // 5, w // 5: 4 * w // 5] >= 250).sum())

    m = next(n for n, subject in enumerate(ADNI_SUBJECTS) if subject[-1] is None)
    index = load_index(pipeline / "extract" / "cases.jsonl")
    control = next(ref for key, ref in index.items() if key.endswith(f"/{baseline_flair(m)}"))
    same_slice = StackBuilder(params("browser").stack, index, tmp_path / "stacks").build(
        control, "axial", item.evidence[0].slice_index, None)
    assert bright(pipeline / task.data["stack_paths"][0]) >= bright(Path(same_slice.paths[0])) + 50
