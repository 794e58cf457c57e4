"""Validity gates on a small corpus built here: planted shortcuts are blocked with the right reason, a fair
template passes; model baselines against the local OpenAI-compatible server; leak rules; the release's refusal."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from curation.errors import InputError, VerificationError
from curation.jsonio import read_jsonl
from curation.params import FilterParams, LlmParams, ModelSpec, ReleaseParams, ValidityParams
from curation.quality.blind import measure_blind
from curation.quality.filter import run as filter_run
from curation.quality.leaks import load_rules, mapping_leaks, sibling_leaks
from curation.schema import Evidence, Generator, Item, Turn
from curation.testing.openai_server import OpenAIServer, Reply, user_text

from .conftest import ROOT
from .factories import without_git

L = "ABCDE"
GRADES = ["grade 1", "grade 2", "grade 3", "grade 4", "grade 5"]
LONG_KEYS = [f"swelling of the {w} cortex with sulcal effacement" for w in
             ("left frontal", "right frontal", "left parietal", "right parietal", "left temporal", "right temporal",
              "left occipital", "right occipital", "left insular", "right insular")]
SHORT = ["a simple arachnoid cyst", "a small extra-axial mass", "vasogenic oedema around a mass",
         "a low-grade intrinsic tumour"]  # shorter than every key, but not so short that one item gives it away
DX = ["stroke", "glioma", "abscess", "lymphoma", "metastasis"]
FINDINGS = ["infarct", "haemorrhage", "demyelination", "glioblastoma multiforme"]


@pytest.fixture(scope="module", autouse=True)
def _no_git() -> Iterator[None]:
    with without_git():
        yield


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CURATION_LLM_BASE_URL", raising=False)


def png(path: Path, shade: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("L", (32, 32), 0)
    im.paste(shade, (8, 8, 24, 24))
    im.save(path)
    return str(path)


def item(tpl: str, n: int, question: str, options: list[str], key: int, context: str = "", **kw) -> Item:
    case = kw.pop("case_id", f"case-{n:02d}")
    return Item(item_id=f"itm-{tpl}-{n:02d}", case_id=case, source="radiopaedia", task_type="lesion_recognition",
                format="mcq", question=question, options=options, answer=options[key], answer_index=key,
                context=context, images=[png(Path("img") / f"{tpl}-{n}.png", 40 + 20 * (n % 10))],
                evidence=[Evidence(image=f"img/{tpl}-{n}.png", sequence="T1w", plane="axial", target="lesion")],
                template_id=tpl, generator=Generator(kind="template", template_id=tpl), license="CC BY-NC-SA 3.0",
                **kw)


def rotate(options: list[str], key_text: str, pos: int) -> tuple[list[str], int]:
    others = [o for o in options if o != key_text]
    opts = others[:pos] + [key_text] + others[pos:]
    return opts, pos


def corpus() -> list[Item]:
    out = []
    for n in range(10):  # fair: equal-length options, answers and letters balanced, nothing in the text
        out.append(item("fair", n, "How would you grade the abnormality on this image?", GRADES, n % 5))
    for n in range(10):  # the key is always the longest option
        opts, k = rotate(SHORT + [LONG_KEYS[n]], LONG_KEYS[n], n % 5)
        out.append(item("longest_key", n, "What is the principal abnormality on this image?", opts, k))
    for n in range(10):  # the context states the answer
        dx = DX[n % 5]
        out.append(item("context_states", n, "Which diagnosis fits this MRI?", DX, DX.index(dx),
                        context=f"The referral letter mentions {dx}."))
    for n in range(10):  # a constant answer at rotating positions; a distractor is always longer
        opts, k = rotate(FINDINGS + ["no abnormality"], "no abnormality", n % 5)
        out.append(item("constant_answer", n, "Is there an abnormality in this brain?", opts, k))
    return out


def write(items: list[Item], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "items.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in items))
    return folder


def fparams(**kw) -> FilterParams:
    return FilterParams(prompts_dir=str(ROOT / "templates" / "prompts"), lexicon=None, **kw)


def rejected(folder: Path) -> dict[str, dict]:
    return {r["item_id"]: r for r in read_jsonl(folder / "rejected.jsonl")}


def test_planted_shortcuts_are_blocked_with_their_reason_and_a_fair_template_passes(tmp_path):
    report = filter_run(fparams(), write(corpus(), tmp_path / "in"), tmp_path / "out",
                        validity_path=tmp_path / "reports" / "validity.json",
                        plot_path=tmp_path / "reports" / "validity_plot.json")
    v = json.loads((tmp_path / "reports" / "validity.json").read_text())
    t = v["templates"]
    assert t["fair"]["blocked"] is False and t["fair"]["best_blind_lift"] <= 0.0
    assert t["fair"]["chance"] == 0.2 and t["fair"]["blind_baselines"]["majority_answer"] == 0.0
    assert t["longest_key"]["reasons"] == ["blind_baseline:longest_option"]
    assert t["longest_key"]["blind_baselines"]["longest_option"] == 1.0
    assert t["context_states"]["reasons"] == ["blind_baseline:stated_in_context"]
    assert t["constant_answer"]["reasons"] == ["blind_baseline:majority_answer"]
    assert t["constant_answer"]["blind_baselines"]["longest_option"] == 0.0
    rej = rejected(tmp_path / "out")
    for tpl, reason in (("longest_key", "blind_baseline:longest_option"),
                        ("context_states", "blind_baseline:stated_in_context"),
                        ("constant_answer", "blind_baseline:majority_answer")):
        for n in range(10):
            assert reason in rej[f"itm-{tpl}-{n:02d}"]["reasons"]
        assert report.counts[f"rejected:{reason}"] == 10
    assert "longest_option 100.0% vs chance 20.0%" in rej["itm-longest_key-00"]["detail"]
    kept = list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))
    assert {i.template_id for i in kept} == {"fair"} and len(kept) == 10
    assert kept[0].quality.template_validity.blocked is False
    # cue metrics and effective items (distinct case and answer)
    assert t["longest_key"]["cue"]["key_is_longest_rate"] == 1.0 and t["fair"]["cue"]["key_is_longest_rate"] == 0.0
    assert t["fair"]["cue"]["answer_letters"] == {"A": 2, "B": 2, "C": 2, "D": 2, "E": 2}
    assert t["constant_answer"]["effective_items"] == 10
    assert v["overall"]["templates_blocked"] == ["constant_answer", "context_states", "longest_key"]
    assert v["overall"]["items_blocked"] == 30 and v["overall"]["kept_items"] == 10
    # without an endpoint the model baselines say why they did not run
    assert v["model_baselines"]["status"].startswith("skipped: no LLM endpoint")
    assert report.skipped_steps["model_baselines"].startswith("skipped: no LLM endpoint")
    plot = json.loads((tmp_path / "reports" / "validity_plot.json").read_text())
    assert {r["template"]: r["lift_points"] for r in plot}["longest_key"] == 80.0


def test_threshold_is_a_parameter_and_report_only_mode_keeps_items(tmp_path):
    items = corpus()
    loose = filter_run(fparams(validity=ValidityParams(max_blind_lift=0.9)), write(items, tmp_path / "in"),
                       tmp_path / "a")
    assert loose.metrics["validity"]["templates_blocked"] == []
    filter_run(fparams(validity=ValidityParams(block=False)), write(items, tmp_path / "in"), tmp_path / "b")
    kept = list(read_jsonl(tmp_path / "b" / "items.jsonl", Item))
    marked = {i.template_id for i in kept if i.quality.template_validity.above_threshold}
    assert marked == {"longest_key", "constant_answer"}  # context_states items also leak the answer itself


def test_release_refuses_unblocked_shortcut_templates_unless_named(tmp_path):
    from curation.release.build import run as release

    filter_run(fparams(validity=ValidityParams(block=False)), write(corpus(), tmp_path / "in"), tmp_path / "f",
               validity_path=tmp_path / "validity.json")
    p = ReleaseParams(arrow_copy=False)
    with pytest.raises(VerificationError, match=r"constant_answer, longest_key beat chance blind"):
        release(p, tmp_path / "f", tmp_path / "rel", validity=tmp_path / "validity.json")
    assert not (tmp_path / "rel" / "neuro-bench-0.1.0").exists()
    p.allow_shortcut_templates = ["constant_answer", "longest_key"]
    release(p, tmp_path / "f", tmp_path / "rel", validity=tmp_path / "validity.json")
    card = (tmp_path / "rel" / "neuro-bench-0.1.0" / "README.md").read_text()
    assert "Warning: shortcut templates released on purpose" in card and "constant_answer, longest_key" in card
    assert "| `longest_key` (**above threshold**) | 10 | lesion (10) | T1w axial (10) |" in card


def test_card_reports_blocked_templates_and_an_empty_release_still_builds(tmp_path):
    from typer.testing import CliRunner

    from curation.cli import app
    from curation.release.build import run as release

    shortcuts = [i for i in corpus() if i.template_id != "fair"]
    filter_run(fparams(), write(shortcuts, tmp_path / "in"), tmp_path / "f", validity_path=tmp_path / "v.json")
    r = release(ReleaseParams(arrow_copy=False), tmp_path / "f", tmp_path / "rel", validity=tmp_path / "v.json")
    assert r.outputs == 0
    root = tmp_path / "rel" / "neuro-bench-0.1.0"
    card = (root / "README.md").read_text()
    assert "This release has no items" in card and "### Blocked templates" in card and "data_files: []" in card
    assert re.search(r"\| `longest_key` \| 10 \| blind_baseline:longest_option: longest_option 100.0% vs chance", card)
    prm = tmp_path / "params.yaml"
    prm.write_text("evaluate: {models: [{name: m, model: m, base_url: 'http://127.0.0.1:9/v1'}]}\n")
    res = CliRunner().invoke(app, ["evaluate", str(root), "--out", str(tmp_path / "eval"), "--params", str(prm)])
    assert res.exit_code == 0 and "evaluate: skipped: the release has no items" in res.output
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["skipped"] == "the release has no items"


def test_release_refuses_a_bad_validity_report_in_one_line(tmp_path):
    from curation.release.build import run as release

    filter_run(fparams(), write(corpus()[:10], tmp_path / "in"), tmp_path / "f")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(Exception, match="not a validity report") as exc:
        release(ReleaseParams(arrow_copy=False), tmp_path / "f", tmp_path / "rel", validity=tmp_path / "bad.json")
    assert "\n" not in str(exc.value)


# -- model baselines ----------------------------------------------------------------------------------------
def text_only_responder(items: list[Item]):
    """A model that answers from the text alone: right whenever it can read the item's key off the prompt."""
    keys = {i.question: L[i.answer_index] for i in items}

    def respond(body: dict, n: int) -> Reply:
        q = user_text(body).split("Question: ", 1)[1].split("\n", 1)[0].strip()
        return Reply(keys[q] if q in keys else "I cannot tell.")

    return respond


@pytest.mark.integration  # a local HTTP server
def test_model_answering_from_text_alone_blocks_the_template(tmp_path):
    fair = [item("fair", n, f"Case {n}: how would you grade the abnormality on this image?", GRADES, n % 5)
            for n in range(10)]
    with OpenAIServer(text_only_responder(fair)) as server:
        llm = LlmParams(base_url=server.base_url, model="local-verifier", backoff_s=0.01,
                        cache_dir=str(tmp_path / "cache"))
        models = [ModelSpec(name="blind-vlm", model="local-vlm", base_url=server.base_url)]
        p = fparams(llm_verifier=False, text_only_check=False, validity=ValidityParams(models=models))
        report = filter_run(p, write(fair, tmp_path / "in"), tmp_path / "out", llm=llm,
                            validity_path=tmp_path / "validity.json")
        sent = list(server.requests)
    v = json.loads((tmp_path / "validity.json").read_text())
    t = v["templates"]["fair"]
    assert t["best_blind_lift"] <= 0  # blind rules find nothing: only the model shows the shortcut
    assert t["models"]["blind-vlm"] == {"no_image": 1.0, "own_image": 1.0, "swapped_image": 1.0,
                                        "blank_image": 1.0, "answered_without_image": 10}
    assert t["blocked"] and t["reasons"] == ["model_without_image:blind-vlm:no_image",
                                             "model_without_image:blind-vlm:blank_image"]
    assert v["model_baselines"]["status"] == "run"
    assert v["model_baselines"]["models"]["blind-vlm"]["overall"]["no_image"] == 1.0
    assert v["overall"]["answered_without_image"] == {"blind-vlm": 10}
    assert report.counts["tagged:answered_without_image:blind-vlm"] == 10
    assert all("model_without_image:blind-vlm:no_image" in r["reasons"] for r in rejected(tmp_path / "out").values())
    # four conditions per item: none without an image, and the own, another case's and a blank image
    images = [[p["image_url"]["url"] for p in b["messages"][-1]["content"] if p["type"] == "image_url"]
              if isinstance(b["messages"][-1]["content"], list) else [] for b in sent]
    assert len(sent) == 40 and sum(1 for i in images if not i) == 10
    import base64

    decoded = [Image.open(io.BytesIO(base64.b64decode(i[0].split(",", 1)[1]))) for i in images if i]
    blank = [im for im in decoded if im.getextrema() == (0, 0)]
    assert len(blank) == 10 and all(im.size == (32, 32) for im in blank)
    own = {Path(i.images[0]).read_bytes() for i in fair}
    assert sum(1 for i in images if i and base64.b64decode(i[0].split(",", 1)[1]) in own) == 20  # own + swapped


def test_swapped_image_comes_from_another_case_with_the_same_sequence():
    from curation.quality.ablation import swapped_images

    a = item("t", 1, "q", GRADES, 0)
    b = item("t", 2, "q", GRADES, 1)
    c = item("t", 3, "q", GRADES, 2, case_id="case-01")  # same case as a
    d = item("u", 4, "q", GRADES, 3)
    d.evidence = [Evidence(image=d.images[0], sequence="FLAIR")]
    swap = swapped_images([a, b, c, d], seed=13)
    assert swap[a.item_id] == b.images and swap[b.item_id] in (a.images, c.images)
    assert d.item_id not in swap  # no other FLAIR


# -- leak checks beyond exact strings ------------------------------------------------------------------------
CDR = ["no dementia", "very mild (questionable) dementia", "mild dementia", "moderate dementia", "severe dementia"]


@pytest.mark.parametrize(("context", "question", "options", "key", "task", "expected"), [
    ("MMSE 27/30, global CDR 0.5.", "What is the dementia stage?", CDR, 1, "direct_diagnosis",
     ["answer_leak_mapping:cdr_defines_stage"]),
    ("CDR = 2, MMSE 14.", "What is the dementia stage?", CDR, 3, "direct_diagnosis",
     ["answer_leak_mapping:cdr_defines_stage"]),
    ("CDR-SB 1.5.", "What is the dementia stage?", CDR, 1, "direct_diagnosis",
     ["answer_leak_mapping:cdr_sb_defines_stage"]),
    ("CDR-SB 1.5.", "What is the dementia stage?", CDR, 2, "direct_diagnosis", []),  # the key is not what CDR-SB says
    ("", "This image shows restricted diffusion. On which sequence was it acquired?",
     ["T1w", "T2w", "FLAIR", "DWI", "SWI"], 3, "sequence_identification",
     ["answer_leak_mapping:finding_names_sequence_dwi"]),
    ("", "Which MRI sequence is shown?", ["T1w", "T2w", "FLAIR", "DWI", "SWI"], 3, "sequence_identification", []),
    ("He received intravenous alteplase 40 minutes ago.", "What is the most appropriate next step?",
     ["Urgent CT angiography and assessment for thrombectomy", "Repeat MRI in 6 months", "Lumbar puncture",
      "Outpatient EEG"], 0, "next_step", ["answer_leak_mapping:treatment_gives_next_step_reperfusion"]),
])
def test_fixed_mapping_leaks(context, question, options, key, task, expected):
    it = item("m", 0, question, options, key, context=context)
    it.task_type = task
    assert mapping_leaks(it, load_rules()) == expected


def test_named_patterns_are_expanded_on_load(tmp_path: Path) -> None:
    """`(?&name)` in a rule stands for the file's `patterns[name]`; a reference or name that does not fit is a
    one-line error naming the rules file."""
    rules = tmp_path / "rules.yaml"
    rule = {"id": "young_seizure", "cue": "(?s)^(?=.*(?&young))(?=.*seizure)", "answer": "glioma"}
    rules.write_text(json.dumps({"patterns": {"young": r"\b[23]\d-year-old\b"}, "rules": [rule]}))
    (loaded,) = load_rules(rules)
    assert loaded.cue.pattern == r"(?s)^(?=.*(?:\b[23]\d-year-old\b))(?=.*seizure)"
    it = item("y", 0, "Diagnosis?", ["low-grade glioma", "abscess"], 0, context="A 24-year-old had a seizure.")
    assert mapping_leaks(it, [loaded]) == ["answer_leak_mapping:young_seizure"]
    for patterns, cue, error in [
        ({"young": "[23]\\d"}, "(?&old)", "rules.0 (young_seizure).cue: no pattern named 'old' (patterns has young)"),
        ({}, "(?&young)", "no pattern named 'young' (patterns has none)"),
        ({"young": "[23]\\d", "old": "[89]\\d"}, "(?&young)", "patterns: old used by no rule"),
        ({"young": "(?&old)"}, "(?&young)", "patterns.young: must be one pattern, naming no other"),
        ({"young": "[23"}, "(?&young)", "patterns.young: not a valid pattern"),
        ({"Young": "x"}, "(?&Young)", "patterns: name 'Young' is not [a-z0-9_]+"),
    ]:
        rules.write_text(json.dumps({"patterns": patterns, "rules": [{**rule, "cue": cue}]}))
        with pytest.raises(InputError, match=re.escape(error)):
            load_rules(rules)


def test_sibling_answer_leaks_dialogues_included():
    a = item("dx", 0, "What is the most likely diagnosis?", ["glioblastoma", "abscess", "lymphoma", "metastasis"], 0)
    b = item("side", 1, "On which side is the lesion?", ["left", "right", "bilateral", "midline"], 0,
             context="Known glioblastoma, follow-up scan.", case_id=a.case_id)
    c = item("dx", 2, "What is the most likely diagnosis?", ["glioblastoma", "abscess", "lymphoma", "metastasis"], 1)
    dlg = c.model_copy(update={"item_id": "itm-dialogue", "format": "multi_turn", "options": [], "answer_index": None,
                               "answer": "frontal lobe", "template_id": "dialogue", "turns": [
                                   Turn(role="clinician", text="What do you see?"),
                                   Turn(role="model", text="A ring-enhancing abscess in the frontal lobe.")]})
    both = item("dd", 3, "Which two are possible?", ["glioblastoma", "abscess", "lymphoma", "metastasis"], 0,
                case_id="case-09")
    lists = item("ctx", 4, "Side?", ["left", "right", "midline", "bilateral"], 1, case_id="case-09",
                 context="Differential: glioblastoma or abscess.")
    leaks = sibling_leaks([a, b, c, dlg, both, lists])
    assert leaks == {a.item_id: ("sibling_answer_leak", b.item_id), c.item_id: ("sibling_answer_leak", dlg.item_id)}


def test_dialogue_stating_its_own_answer_in_a_clinician_turn_is_a_leak(tmp_path):
    from curation.quality.filter import check

    it = item("dialogue", 0, "A colleague asks for a consult.", GRADES, 0)
    it = it.model_copy(update={"format": "multi_turn", "options": [], "answer_index": None,
                               "answer": "multiple sclerosis", "turns": [
                                   Turn(role="clinician", text="I suspect multiple sclerosis. Do you agree?"),
                                   Turn(role="model", text="Yes, multiple sclerosis.")]})
    assert "answer_leak" in check(it)
    it.turns[0] = Turn(role="clinician", text="What do you make of this?")
    assert "answer_leak" not in check(it)


def test_blind_baselines_leave_the_item_out():
    items = [item("two", n, "q?", GRADES, 0 if n < 3 else 1) for n in range(4)]  # answers: 3x grade 1, 1x grade 2
    t = measure_blind(items, ValidityParams())["two"]
    # leave-one-out majority: the three grade-1 items see 2:1 for grade 1 (right), the grade-2 item sees 3:0 (wrong)
    assert t["blind_baselines"]["majority_answer"] == 0.75 and t["effective_items"] == 4


CATEGORIES = ["cognitively normal", "mild cognitive impairment", "dementia"]


def _by_score(mmse: int) -> str:
    return CATEGORIES[0] if mmse >= 27 else (CATEGORIES[1] if mmse >= 21 else CATEGORIES[2])


def test_a_score_in_the_context_that_decides_the_key_is_found_without_the_image(tmp_path):
    """The MMSE stated in the context maps to the key by fixed bands (a knowledge-only answer): the context_numbers
    baseline (the key of the items with the nearest stated numbers) answers it blind, and the template is blocked
    for it; the same questions with the score left out are not."""
    scores = [30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 18, 16, 14, 12, 29, 24, 17, 28, 22, 15]
    items = []
    for n, s in enumerate(scores):
        key = CATEGORIES.index(_by_score(s))
        opts, k = rotate(CATEGORIES, CATEGORIES[key], n % 3)
        items.append(item("scored", n, "Weighing this MRI and the score, which category fits best?", opts, k,
                          context=f"A patient with memory complaints scores {s}/30 on the MMSE."))
        items.append(item("unscored", n, "Weighing this MRI, which category fits best?", opts, k,
                          context="A patient with memory complaints."))
    t = measure_blind(items, ValidityParams())
    assert t["scored"]["best_blind_baseline"] == "context_numbers" and t["scored"]["blind_baselines"][
        "context_numbers"] >= 0.8
    assert t["unscored"]["blind_baselines"]["context_numbers"] == pytest.approx(1 / 3, abs=0.01)  # no idea: chance
    filter_run(fparams(), write(items, tmp_path / "in"), tmp_path / "out")
    v = json.loads((tmp_path / "out" / "validity.json").read_text())
    assert v["templates"]["scored"]["reasons"] == ["blind_baseline:context_numbers"]
    assert not v["templates"]["unscored"]["blocked"]


def test_a_few_items_cannot_block_a_template_by_noise_and_many_can(tmp_path):
    """The same cue (the key is the longest option on 2 of 3 items) over 3 items is uncertain (its interval spans
    the threshold: reported, not blocked), and over 30 items blocks the template."""
    items = []
    for tpl, n_items in (("few", 3), ("many", 30)):
        for n in range(n_items):  # every key its own (no answer repeats); the longest option on two items in three
            key = f"cortical swelling in region {n:02d} with sulcal effacement" if n % 3 else f"cyst {n:02d}"
            opts, k = rotate(SHORT + [key], key, n % 5)
            items.append(item(tpl, n, f"What is the principal abnormality on this {tpl} image?", opts, k))
    filter_run(fparams(), write(items, tmp_path / "in"), tmp_path / "out")
    v = json.loads((tmp_path / "out" / "validity.json").read_text())
    few, many = v["templates"]["few"], v["templates"]["many"]
    assert few["best_blind_lift"] > 0.1 and not few["blocked"] and few["uncertain"]
    lo, hi = few["lift_intervals"]["longest_option"]
    assert lo <= 0.1 < hi and "over 3 items" in few["uncertain"][0]
    assert many["blocked"] and many["reasons"] == ["blind_baseline:longest_option"]
    assert many["lift_intervals"]["longest_option"][0] > 0.1


def test_no_template_keys_one_answer_on_more_than_the_share_and_every_kept_item_has_a_difficulty(tmp_path):
    items = []
    for n in range(10):  # 8 of 10 keyed "grade 1"
        key = 0 if n < 8 else n - 7
        opts, k = rotate(GRADES, GRADES[key], n % 5)
        items.append(item("skewed", n, "How would you grade the abnormality on this image?", opts, k))
    filter_run(fparams(), write(items, tmp_path / "in"), tmp_path / "out")
    kept = list(read_jsonl(tmp_path / "out" / "items.jsonl", Item))
    keys = [i.answer for i in kept]
    assert keys.count("grade 1") / len(keys) <= 0.6 and {"grade 2", "grade 3"} <= set(keys)
    assert {r["reasons"][0] for r in rejected(tmp_path / "out").values()} == {"rebalanced_out:answer_share"}
    assert len(kept) + len(rejected(tmp_path / "out")) == 10
    assert all(i.difficulty in ("easy", "medium", "hard") and i.quality.difficulty_by == "rule" for i in kept)
