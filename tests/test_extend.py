"""Adding a thing is adding its files (issue 52), shown in a copy of the project where git then lists the added files
and no file edited: a source is its ingest module and its spec (read by ``curate ingest``, de-identified by
``curate deid run``); an LLM step is its module and its prompt (run by default on an item, against a local
OpenAI-compatible server); a per-item gate is its module (``curate filter`` rejects by it, counted); a template
is a YAML file (``curate generate`` makes its items)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from .conftest import ROOT

pytestmark = pytest.mark.integration  # git, and the copy's own curate in a subprocess

MODULE = '''"""A folder per case (its name is the case's id in the source): history.txt, and PNG figures each with its
caption in a .txt file of the same name."""

from __future__ import annotations

from curation.ingest.base import IngestContext
from curation.schema import Case, Figure, SourceName


def ingest(ctx: IngestContext) -> list[Case]:
    cases = []
    for folder in sorted(p for p in ctx.raw.iterdir() if p.is_dir()):
        ctx.report.inputs += 1
        case_id = ctx.case_id(folder.name)
        figures = [Figure(figure_id=png.stem, path=ctx.store(png, case_id, png.name),
                          caption=png.with_suffix(".txt").read_text(encoding="utf-8"))
                   for png in sorted(folder.glob("*.png"))]
        cases.append(Case(case_id=case_id, source=SourceName("teaching-folder"), license=ctx.spec["license"],
                          attribution=ctx.spec["attribution"], figures=figures,
                          history=(folder / "history.txt").read_text(encoding="utf-8")))
    return cases
'''
SPEC = '''# A teaching file kept as a folder per case (curation/ingest/teaching_folder.py).
license: "CC BY 4.0"
attribution: "Teaching folder of the test"
'''


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}  # the copy's curation package, not the one installed
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def _ok(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``_run``, which must succeed."""
    r = _run(cmd, cwd)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


def _copy(repo: Path) -> Path:
    """The project's code, templates and params in a git repository of their own."""
    tracked = subprocess.run(["git", "ls-files", "curation", "templates", "params.yaml"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "project"]):
        _ok(cmd, repo)
    return repo


def _changed(repo: Path) -> list[str]:
    r = _run(["git", "status", "--porcelain", "--untracked-files=all", "curation", "templates", "params.yaml"], repo)
    return sorted(r.stdout.splitlines())


def test_a_new_source_is_its_module_and_its_spec(tmp_path: Path) -> None:
    repo = _copy(tmp_path / "repo")

    (repo / "curation/ingest/teaching_folder.py").write_text(MODULE, encoding="utf-8")
    (repo / "curation/ingest/specs/teaching-folder.yaml").write_text(SPEC, encoding="utf-8")
    raw = repo / "data/raw/teaching-folder"
    for case in ("case-17", "case-18"):
        (raw / case).mkdir(parents=True)
        (raw / case / "history.txt").write_text("A 61-year-old with a first seizure.", encoding="utf-8")
        Image.fromarray((np.arange(64 * 64).reshape(64, 64) % 251).astype(np.uint8)).save(raw / case / "f1.png")
        (raw / case / "f1.txt").write_text("Axial FLAIR: a right frontal lesion.", encoding="utf-8")

    py = [sys.executable, "-m", "curation.cli"]
    _ok([*py, "ingest", "teaching-folder", "data/raw/teaching-folder", "data/interim/ingest/teaching-folder"], repo)
    cases = [json.loads(line) for line in (repo / "data/interim/ingest/teaching-folder/cases.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [c["source"] for c in cases] == ["teaching-folder"] * 2
    assert all(c["figures"][0]["caption"] and c["license"] == "CC BY 4.0" for c in cases)
    _ok([*py, "deid", "run", "data/interim/ingest", "data/interim/deid"], repo)
    assert len((repo / "data/interim/deid/cases.jsonl").read_text(encoding="utf-8").splitlines()) == 2

    assert _changed(repo) == ["?? curation/ingest/specs/teaching-folder.yaml", "?? curation/ingest/teaching_folder.py"]


STEP = '''"""A one-line plain-language summary of an item's answer, for a reader who is not a clinician."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from curation.generate.augment.base import ItemStep
from curation.schema import Item


class PlainWordsReply(BaseModel):
    summary: str


class PlainWords(ItemStep[PlainWordsReply]):
    name = "plain_words"
    version = 1
    prompt_name = "plain_words"
    reply_model = PlainWordsReply

    def applies(self, item: Item) -> bool:
        return not item.reference_answer

    def values(self, inp: Item) -> dict[str, Any]:
        return {"question": inp.question, "answer": inp.answer}

    def replaced(self, item: Item) -> dict[str, Any]:
        return {"reference_answer": item.reference_answer}

    def change(self, item: Item, reply: PlainWordsReply) -> None:
        item.reference_answer = " ".join(reply.summary.split())
'''
PROMPT = '''id: plain_words
version: 1
max_tokens: 200
system: |
  You explain a neuroradiology exam answer in one plain sentence. Reply with JSON only.
user: |
  Question: {{ question }}
  Answer: {{ answer }}
response_schema:
  type: object
  properties:
    summary: {type: string, minLength: 10, maxLength: 300}
  required: [summary]
  additionalProperties: false
'''
RUN_STEP = '''
import json, sys
from curation.generate.augment import STEPS, Augmenter, chosen
from curation.llm import LLMClient
from curation.params import GenerateParams, LlmParams
from curation.report import Report
from curation.schema import Generator, Item

item = Item(item_id="itm-1", case_id="case-1", source="medpix", task_type="lesion_recognition", format="mcq",
            question="Which sequence is shown?", options=["FLAIR", "T1w", "DWI"], answer="FLAIR", answer_index=0,
            license="x", generator=Generator(kind="template", template_id="t", template_version="1"))
params = GenerateParams()  # llm_steps: all
llm = LlmParams(base_url=sys.argv[1], model="local-test", cache_dir="llm-cache")
report = Report(stage="generate")
Augmenter(params, LLMClient(llm), report, print, "templates/prompts").augment([item])
print(json.dumps({"steps": list(STEPS), "chosen": chosen(params.llm_steps), "reference": item.reference_answer,
                  "augmented": [a.step for a in item.augmentations], "counts": dict(report.counts)}))
'''


def test_a_new_llm_step_is_its_module_and_its_prompt(tmp_path: Path) -> None:
    from curation.testing.openai_server import OpenAIServer, Reply

    repo = _copy(tmp_path / "repo")
    (repo / "curation/generate/augment/plain_words.py").write_text(STEP, encoding="utf-8")
    (repo / "templates/prompts/plain_words.yaml").write_text(PROMPT, encoding="utf-8")
    summary = "The bright fluid-suppressed signal shows this is a FLAIR image."

    def reply(body: dict, n: int) -> Reply:
        asks = json.dumps(body["messages"])
        return Reply(json.dumps({"summary": summary}) if "plain sentence" in asks else "not json")

    with OpenAIServer(reply) as server:
        r = _ok([sys.executable, "-c", RUN_STEP, server.base_url], repo)
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["steps"][-1] == "plain_words" and "plain_words" in out["chosen"], out
    assert out["reference"] == summary and "plain_words" in out["augmented"], out
    assert out["counts"]["llm:plain_words:ok"] == 1, out
    assert _changed(repo) == ["?? curation/generate/augment/plain_words.py", "?? templates/prompts/plain_words.yaml"]


GATE = '''"""Gate: a question written all in capitals reads as shouting, and as a cue."""

from __future__ import annotations

from curation.quality.item_gates import ItemGate
from curation.schema import Item


def check(item: Item, synonyms: list[set[str]]) -> list[str]:
    return ["question_in_capitals"] if item.question.isupper() else []


GATE = ItemGate("capitals", 60, check)
'''
WRITE_ITEMS = '''
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from curation.jsonio import write_jsonl
from curation.schema import Evidence, Generator, Item

spec = json.loads(sys.argv[1])
items = []
for n, (question, options, at, sequence) in enumerate(spec["rows"]):
    img = f"img/{n}.png"
    Path("img").mkdir(exist_ok=True)
    Image.fromarray(np.full((32, 32), 20 + 15 * n, np.uint8)).save(img)
    items.append(Item(item_id=f"itm-{n}", case_id=f"case-{n}", source="medpix", task_type=spec["task_type"],
                      format="mcq", question=question, options=options, answer=options[at], answer_index=at,
                      images=[img], evidence=[Evidence(image=img, sequence=sequence, plane="axial")],
                      license="x", template_id=spec["template"], split="test",
                      generator=Generator(kind="template", template_id=spec["template"], template_version="1")))
write_jsonl(Path("generate/items.jsonl"), items)
'''


def _filter_with(tmp_path: Path, module: str, text: str, spec: dict) -> Path:
    """A copy of the project with one module added, and ``curate filter`` run there on the MCQs ``spec`` describes
    (its template, task type, and rows of question, options, key index and sequence)."""
    repo = _copy(tmp_path / "repo")
    (repo / module).write_text(text, encoding="utf-8")
    (repo / "generate").mkdir()
    _ok([sys.executable, "-c", WRITE_ITEMS, json.dumps(spec)], repo)
    _ok([sys.executable, "-m", "curation.cli", "filter", "generate", "filtered", "--report", "filter.json",
         "--validity", "validity.json"], repo)
    return repo


def test_a_new_gate_is_its_module(tmp_path: Path) -> None:
    options = ["FLAIR", "T1w", "DWI"]
    rows = [("WHICH SEQUENCE IS SHOWN?" if n == 0 else "Which sequence is shown?", options, n % 3, options[n % 3])
            for n in range(6)]
    repo = _filter_with(tmp_path, "curation/quality/item_gates/capitals.py", GATE,
                        {"template": "seq", "task_type": "sequence_identification", "rows": rows})
    lines = (repo / "filtered/rejected.jsonl").read_text(encoding="utf-8").splitlines()
    rejected = [json.loads(line) for line in lines]
    assert [(x["item_id"], x["reasons"]) for x in rejected] == [("itm-0", ["question_in_capitals"])], rejected
    report = json.loads((repo / "filter.json").read_text(encoding="utf-8"))
    assert report["counts"]["rejected:question_in_capitals"] == 1, report["counts"]
    assert _changed(repo) == ["?? curation/quality/item_gates/capitals.py"]


BASELINE = '''"""The shortest option: a key written more tersely than its distractors."""

from __future__ import annotations

from curation.quality.baselines import Baseline, Corpus, argmax
from curation.schema import Item


def pick(item: Item, c: Corpus) -> list[int]:
    return argmax([1 / max(1, len(o.strip())) for o in item.options])


BASELINE = Baseline("shortest_option", 45, pick)
'''


def test_a_new_blind_baseline_is_its_module(tmp_path: Path) -> None:
    """A baseline module is run by filter (params: all) and named as the template's best where it is."""
    rows = []
    for n in range(12):  # the key, always the shortest option, at each place in turn
        options = [f"a long description number {n} of what is seen", f"another long account {n} of the image"]
        options.insert(n % 3, f"k{n}")
        rows.append(("What does the image show?", options, n % 3, None))
    repo = _filter_with(tmp_path, "curation/quality/baselines/shortest_option.py", BASELINE,
                        {"template": "terse", "task_type": "lesion_recognition", "rows": rows})
    validity = json.loads((repo / "validity.json").read_text(encoding="utf-8"))
    assert "shortest_option" in validity["baselines"], validity["baselines"]
    terse = validity["templates"]["terse"]
    assert terse["best_blind_baseline"] == "shortest_option" and terse["blind_baselines"]["shortest_option"] == 1.0
    assert terse["blocked"], terse
    assert _changed(repo) == ["?? curation/quality/baselines/shortest_option.py"]


TEMPLATE = '''# Acquisition: the plane an image is shown in (an open question; the image decides it).
- id: image_plane
  version: 1
  task_type: sequence_identification
  format: open
  requires: [image.hippocampus]
  images: [image.hippocampus]
  question: "In which anatomical plane is this MRI image shown?"
  answer: "{{ image.hippocampus.plane }}"
  reference_answer: "{{ image.hippocampus.plane | capitalize }}."
'''
WRITE_CASE = '''
from pathlib import Path

from curation.jsonio import write_jsonl
from curation.schema import Case, Patient, Render, Series, Visit

renders = [Render(plane="axial", slice_index=90, path="r/axial_090.png", role="mid"),
           Render(plane="coronal", slice_index=97, path="r/coronal_097.png", role="target", target="hippocampus",
                  position_mm=-21.0, located_by="atlas_registration")]
t1 = Series(series_id="S0", sequence="T1w", format="nifti", renders=renders, qc={"pass": True})
visit = Visit(visit_id="bl", days_from_baseline=0, scores={"MMSE": 24.0, "Hippocampus": 5200.0}, series=[t1])
case = Case(case_id="adni-x", source="adni", license="ADNI DUA", patient=Patient(age=74, sex="F"), visits=[visit])
write_jsonl(Path("extract/cases.jsonl"), [case])
'''


def test_a_new_template_is_its_file(tmp_path: Path) -> None:
    repo = _copy(tmp_path / "repo")
    (repo / "templates/questions/planes.yaml").write_text(TEMPLATE, encoding="utf-8")
    (repo / "extract").mkdir()
    _ok([sys.executable, "-c", WRITE_CASE], repo)
    _ok([sys.executable, "-m", "curation.cli", "generate", "extract", "generated"], repo)
    items = [json.loads(line) for line in (repo / "generated/items.jsonl").read_text(encoding="utf-8").splitlines()]
    made = [i for i in items if i["template_id"] == "image_plane"]
    assert len(made) == 1 and made[0]["answer"] == "coronal", [(i["template_id"], i["answer"]) for i in items]
    assert made[0]["images"] == ["r/coronal_097.png"]
    assert _changed(repo) == ["?? templates/questions/planes.yaml"]
