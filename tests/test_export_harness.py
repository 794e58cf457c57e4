"""``curate release export`` for the evaluation harnesses (Inspect, lmms-eval, VLMEvalKit) on a small release built
here: the files each harness loads, the _no_image twins, reference-only items listed with the rebuild step, the
shipped scoring module against the project's own; and parity in a real harness: Inspect (its own venv, as `make
test` installs it) runs the exported tasks against the local OpenAI-compatible server with a seeded mix of right,
wrong and malformed answers, and its accuracy equals `curate evaluate`'s on the same answers, with and without
images."""

from __future__ import annotations

import base64
import csv
import importlib.util
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from curation.answering import extract_letter, grade
from curation.params import EvaluateParams
from curation.release.export import ExportOptions, export
from curation.testing.openai_server import OpenAIServer, Reply, user_text
from curation.text import LETTERS

from .factories import GRADES, QUESTION, item, project_params, without_git, write_items

ROOT = Path(__file__).resolve().parents[1]
INSPECT = ROOT / ".venv-inspect" / "bin" / "inspect"
N_MCQ, N_OPEN = 12, 4


def options() -> ExportOptions:
    judge = EvaluateParams().judge
    return ExportOptions(prompts_dir=ROOT / "templates" / "prompts", judge_weights=dict(judge.weights),
                         judge_pass_threshold=judge.pass_threshold)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """12 MCQs and 4 open items with pixels (each its own question), one ADNI MCQ released as a reference."""
    root = tmp_path_factory.mktemp("export-release")
    old = Path.cwd()
    os.chdir(root)  # the items' images are written relative to the project root
    try:
        items = [item(n, question=f"{QUESTION} (case {n})", visual_dims=["fine_detail"] if n % 3 == 0 else [])
                 for n in range(N_MCQ)]
        items += [item(50 + n, template="open_tpl", format="open", options=[], key=0, answer=f"glioma grade {n + 1}",
                       reference_answer=f"glioma grade {n + 1}", task_type="direct_diagnosis",
                       question=f"What is the diagnosis in case {50 + n}?") for n in range(N_OPEN)]
        items.append(item(90, source="adni", template="adni_tpl", question=f"{QUESTION} (case 90)"))
        with without_git():
            from curation.release.build import run as build

            params = project_params().release.model_copy(update={"arrow_copy": False})
            build(params, write_items(root / "review", items), root / "releases")
        yield root / "releases" / "neuro-bench-0.1.0"
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def exports(release: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("exports")
    for fmt in ("inspect", "lmms-eval", "vlmevalkit"):
        export(release, out / fmt, fmt, options())
    return {fmt: out / fmt for fmt in ("inspect", "lmms-eval", "vlmevalkit")}


def read_tsv(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(1 << 30)
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_vlmevalkit_tsv_has_its_documented_columns_and_one_row_per_mcq_item(exports, release):
    rows = read_tsv(exports["vlmevalkit"] / "neuro_bench.tsv")
    assert list(rows[0])[:3] == ["index", "image", "question"]
    assert {"A", "B", "C", "D", "E", "answer", "category", "hint"} <= set(rows[0])
    assert len(rows) == N_MCQ and [r["index"] for r in rows] == [str(i) for i in range(N_MCQ)]
    assert len({r["item_id"] for r in rows}) == N_MCQ
    for r in rows:
        png = base64.b64decode(r["image"])
        assert png.startswith(b"\x89PNG")
        assert r["answer"] in "ABCDE" and r[r["answer"]] in GRADES and r["category"] == "lesion_recognition"
    # the blind twin: every MCQ (the reference-only one too), no image column
    blind = read_tsv(exports["vlmevalkit"] / "neuro_bench_no_image.tsv")
    assert len(blind) == N_MCQ + 1 and "image" not in blind[0]
    assert len(read_tsv(exports["vlmevalkit"] / "neuro_bench_open.tsv")) == N_OPEN


def test_reference_only_items_are_listed_with_the_rebuild_step(exports):
    for fmt, folder in exports.items():
        refs = [json.loads(x) for x in (folder / "references.jsonl").read_text().splitlines()]
        assert [r["source"] for r in refs] == ["adni"], fmt
        assert refs[0]["image_refs"][0]["sha256"] and "curate release rebuild" in refs[0]["rebuild"]
        assert "curate release rebuild" in (folder / "README.md").read_text()
        assert not list((folder / "images").glob("itm-adni_tpl-*")), fmt  # no ADNI pixels leave the release
        judge = json.loads((folder / "judge_prompt.json").read_text())
        assert judge["prompt"] == "eval_judge@v1" and "Candidate answer" in judge["user_template"]


def test_inspect_samples_carry_the_prompt_curate_evaluate_sends(exports, release):
    from curation.answering import AnswerItem, AnswerParams, Ask, EvalItem
    from curation.llm import load_prompt
    from curation.release import read

    samples = {s["id"]: s for s in map(json.loads, (exports["inspect"] / "samples.jsonl").read_text().splitlines())}
    step = AnswerItem(AnswerParams(temperature=0.0), load_prompt("eval_answer", ROOT / "templates" / "prompts"))
    for row in read.rows(release):
        system, user = step.messages(Ask(EvalItem.from_row(row, []), 0))
        s = samples[row.item_id]
        assert (s["system"], s["user"]) == (system["content"], user["content"][0]["text"])
        assert s["metadata"]["dimensions"][0] == f"task_type:{row.task_type}"
        for n, name in enumerate(s["images"]):
            assert (exports["inspect"] / "images" / name).read_bytes() == row.images[n].data
    assert sum(not s["images"] for s in samples.values()) == 1


def test_lmms_eval_export_follows_its_task_format(exports):
    import pyarrow.parquet as pq

    folder = exports["lmms-eval"]

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))
    for task in ("medbench", "medbench_no_image"):
        cfg = yaml.load((folder / f"{task}.yaml").read_text(), Loader=Loader)  # noqa: S506 (a SafeLoader)
        assert cfg["task"] == task and cfg["output_type"] == "generate_until" and cfg["test_split"] == "test"
        assert Path(cfg["dataset_kwargs"]["data_files"]["test"]).is_file()
        for key in ("doc_to_visual", "doc_to_text", "process_results", "process_docs"):
            kind, name = cfg[key]
            assert kind == "function" and name.startswith("utils.")
    table = pq.read_table(folder / "data" / "medbench-00000-of-00001.parquet").to_pylist()
    assert len(table) == N_MCQ + N_OPEN + 1 and sum(r["has_pixels"] for r in table) == N_MCQ + N_OPEN
    # utils.py scores with the shipped scoring module, as curate evaluate would
    spec = importlib.util.spec_from_file_location("medbench_lmms_utils", folder / "utils.py")
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    mcq = next(r for r in table if r["format"] == "mcq")
    right = LETTERS[mcq["answer_index"]]
    assert utils.process_results(mcq, [f"The answer is ({right})."])["accuracy"] == 1.0
    assert utils.process_results(mcq, [f"The answer is {right.lower()}."])["accuracy"] == 0.0


@pytest.mark.parametrize("text", ["C", "(C)", "The answer is (C).", "The answer is b.", "A or B", "moderate",
                                  "very mild dementia", "I cannot determine this.", "", "Answer: C. No, D."])
def test_the_shipped_scoring_module_reads_answers_as_curate_does(exports, text):
    spec = importlib.util.spec_from_file_location("medbench_scoring_t", exports["inspect"] / "medbench_scoring.py")
    ms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ms)
    opts = ["mild dementia", "moderate dementia", "no dementia", "very mild dementia", "severe dementia"]
    assert ms.extract_letter(text, opts) == extract_letter(text, opts)
    for fmt, idx, ans in (("mcq", 2, opts[2]), ("open", None, "moderate")):
        assert ms.grade(fmt, text, opts if fmt == "mcq" else [], idx, ans) == grade(fmt, text, opts if fmt == "mcq"
                                                                                    else [], idx, ans)


# -- parity in a real harness ------------------------------------------------------------------------------------


def scripted_answers(release: Path) -> dict[tuple[str, bool], str]:
    """(the item's question, asked with images) -> the answer, a seeded mix: right letters, right option texts, wrong
    letters, malformed answers ("The answer is b.": a lower-case letter commits to nothing) and refusals."""
    from curation.release import read

    rng = random.Random(50)
    answers = {}
    for row in read.rows(release):
        for seen in (True, False):
            if row.format == "mcq":
                right, wrong = LETTERS[row.answer_index], LETTERS[(row.answer_index + 1) % len(row.options)]
                kind = rng.choice(["letter", "text", "wrong", "malformed", "refusal"])
                answers[row.question, seen] = {
                    "letter": f"{right}\nThe image shows it.", "text": f"It is {row.answer}.",
                    "wrong": f"({wrong})", "malformed": f"The answer is {right.lower()}.",
                    "refusal": "I cannot determine this from the image."}[kind]
            else:
                kind = rng.choice(["right", "wrong", "refusal"])
                answers[row.question, seen] = {"right": f"This is {row.answer}.", "wrong": "A meningioma.",
                                               "refusal": "I am unable to answer."}[kind]
    return answers


def responder(answers: dict[tuple[str, bool], str]):
    def respond(body, n):
        seen = any(isinstance(m.get("content"), list) and any(p.get("type") == "image_url" for p in m["content"])
                   for m in body["messages"])
        text = user_text(body)
        question = next(q for q, s in answers if s == seen and f"Question: {q}\n" in text + "\n")
        return Reply(answers[question, seen])

    return respond


def run_inspect(task: Path, name: str, base_url: str, log_dir: Path) -> dict:
    if not INSPECT.exists():
        pytest.fail(f"{INSPECT} is missing: `make test` installs Inspect into .venv-inspect (make harness-tools)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "INSPECT_"))}
    env.update({"LOCAL_BASE_URL": base_url, "LOCAL_API_KEY": "local", "INSPECT_LOG_DIR": str(log_dir),
                "INSPECT_DISPLAY": "none"})
    proc = subprocess.run([str(INSPECT), "eval", f"{task}@{name}", "--model", "openai-api/local/local-vlm",
                           "--log-format", "json", "-M", "stream=false", "--max-retries", "0"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (log,) = log_dir.glob("*.json")
    return json.loads(log.read_text())


def metric(log: dict, name: str) -> float:
    (score,) = log["results"]["scores"]
    return score["metrics"][name]["value"]


@pytest.mark.integration
@pytest.mark.parametrize("no_image", [False, True], ids=["with_images", "no_image"])
def test_inspect_accuracy_equals_curate_evaluate_on_the_same_answers(release, exports, tmp_path, no_image):
    from curation.evaluate.run import evaluate
    from curation.params import ModelSpec

    answers = scripted_answers(release)
    p = EvaluateParams(splits=["test", "dev"], samples=1, k=[1], temperature=0.0, bertscore=False, circular=False,
                       prompts_dir=str(ROOT / "templates" / "prompts"), cache_dir=str(tmp_path / "cache"),
                       backoff_s=0.01, bootstrap_resamples=100, no_image=no_image)
    with OpenAIServer(responder(answers)) as server:
        m = evaluate(p, release, tmp_path / "eval", [ModelSpec(name="scripted", model="local-vlm",
                                                               base_url=server.base_url)])["scripted"]
        log = run_inspect(exports["inspect"] / "medbench_inspect.py", "medbench_no_image" if no_image else "medbench",
                          server.base_url, tmp_path / "inspect-logs")
    n = N_MCQ + N_OPEN + (1 if no_image else 0)
    assert m["overall"]["n_scored"] == n and log["results"]["completed_samples"] == n
    # the same answers scored the same, item by item, and so overall and per format (curate rounds to 4 places)
    curate = {s["item_id"]: s["correct"] for s in map(json.loads, (tmp_path / "eval" / "scripted" /
                                                                   "scores.jsonl").read_text().splitlines())}
    inspect_ = {s["id"]: s["scores"]["medbench_scorer"]["value"] == "C" for s in log["samples"]}
    assert inspect_ == curate
    assert metric(log, "accuracy") == pytest.approx(m["pass_at_1"], abs=5e-5)
    assert metric(log, "mcq") == pytest.approx(m["mcq_accuracy"], abs=5e-5)
    # and both are what the script says: a malformed or refused answer is wrong, the mix is no trivial 0 or 1
    from curation.release import read

    rows = [r for r in read.rows(release) if no_image or r.images]
    expected = [grade(r.format, answers[r.question, not no_image], r.options, r.answer_index, r.answer) for r in rows]
    assert m["pass_at_1"] == pytest.approx(sum(expected) / len(expected), abs=1e-4)
    assert 0 < sum(expected) < len(expected)
    assert any("The answer is" in answers[r.question, not no_image] and r.format == "mcq" for r in rows)
    result = {"condition": "no_image" if no_image else "with_images", "inspect_accuracy": metric(log, "accuracy"),
              "inspect_mcq": metric(log, "mcq"), "curate_pass_at_1": m["pass_at_1"],
              "curate_mcq_accuracy": m["mcq_accuracy"]}
    print(json.dumps(result), file=sys.stderr)
