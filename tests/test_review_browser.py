"""The labeling UI, rendered by headless Chromium against the real server: the image and the question show."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from curation.records import read_jsonl
from curation.review import labelstudio as lsr
from curation.schema import Item

from .browser import chromium, login_cookie, screenshot_task
from .test_review_labelstudio import params


@pytest.fixture(autouse=True)
def _env(label_studio, pipeline, monkeypatch):
    monkeypatch.setenv("LABEL_STUDIO_URL", label_studio.url)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    monkeypatch.chdir(pipeline)


def test_pushed_task_renders_image_and_question(pipeline, label_studio, tmp_path):
    if chromium() is None:
        pytest.fail("chromium is missing: `make test` installs it (apt package chromium)")
    its = [i for i in read_jsonl(pipeline / "filter" / "items.jsonl", Item) if i.images][:2]
    pushed = lsr.push(params("browser"), its)
    client = lsr.connect(params("browser"))
    task = next(t for t in client.tasks.list(project=pushed["project_id"], fields="all")
                if t.data["item_id"] == its[0].item_id)
    cookie = login_cookie(label_studio.url, label_studio.username, label_studio.password)
    ready = (f"document.body.innerText.includes({json.dumps(its[0].question)}) && "
             "Array.from(document.images).some(i => i.complete && i.naturalWidth >= 64)")
    shot = tmp_path / "task.png"
    page = f"{label_studio.url}/projects/{pushed['project_id']}/data?task={task.id}"
    seen = screenshot_task(label_studio.url, cookie, page, shot, ready)
    assert seen["ready"], seen["text"][:500]
    assert its[0].question in seen["text"] and "Verdict" in seen["text"] and "Reject" in seen["text"]
    assert seen["images"], "the MRI render did not load"
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.shape[1] >= 1200 and pixels.std() > 20, "the screenshot is blank"
