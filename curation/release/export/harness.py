"""What every harness export shares: the release's items as ``curate evaluate`` asks them (the same rendered
``eval_answer`` prompt, the same images, a dialogue's later turns), the judge prompt for open answers, per-dimension
categories, the images written once under ``images/``, reference-only items listed with the rebuild step, and the
scoring module every export ships (generated from the project's own scoring code, so a harness scores a response
exactly as ``curate evaluate`` does)."""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from curation.answering import AnswerItem, AnswerParams, Ask, EvalItem, dialogue_asks
from curation.llm import load_prompt
from curation.records import staged_dir, write_bytes, write_text
from curation.release import read
from curation.release.rebuild import rebuilt_images
from curation.schema import ReleaseRow
from curation.text import LETTERS

RESPONSE_MARK = "<<<CANDIDATE_RESPONSE>>>"
"""Where the judge's user message takes the candidate's response (the rest is rendered at export time)."""

REBUILD_STEP = ("curate release rebuild RELEASE REBUILT --raw SOURCE=PATH_TO_YOUR_COPY, then export again with "
                "--images REBUILT/images")


@dataclass(frozen=True)
class ExportOptions:
    """What an export needs beyond the release: the prompts ``curate evaluate`` uses, the judge's rubric, and the
    images ``curate release rebuild`` made for reference-only items."""

    prompts_dir: Path
    judge_weights: dict[str, float]
    judge_pass_threshold: float
    images: Path | None = None


@dataclass
class HarnessItem:
    """One release item as a harness asks it."""

    row: ReleaseRow
    images: list[str]  # file names under images/ (empty: reference-only and not rebuilt)
    system: str
    user: str  # the first ask, rendered as curate evaluate renders it
    asks: list[str]  # a dialogue's later clinician turns, asked in order
    judge_system: str
    judge_user: str  # with RESPONSE_MARK where the candidate's answer goes
    max_tokens: int = 512

    @property
    def letter(self) -> str:
        return LETTERS[self.row.answer_index] if self.row.answer_index is not None else ""

    @property
    def category(self) -> str:
        return self.row.task_type

    def metadata(self) -> dict[str, Any]:
        """What every harness keeps beside a sample: how to score it and the dimensions it is counted under."""
        r = self.row
        return {
            "item_id": r.item_id, "split": r.split, "format": r.format, "task_type": r.task_type,
            "visual_dims": list(r.visual_dims), "reasoning_dims": list(r.reasoning_dims),
            "dimensions": dimensions(r), "options": list(r.options), "answer_index": r.answer_index, "answer": r.answer,
            "reference": r.reference_answer or r.answer, "source": r.source, "license": r.license,
            "attribution": r.attribution, "has_pixels": bool(self.images),
        }


def dimensions(row: ReleaseRow) -> list[str]:
    """The categories an item is counted under: its task type and each visual and reasoning dimension."""
    return [f"task_type:{row.task_type}", *(f"visual:{d}" for d in row.visual_dims),
            *(f"reasoning:{d}" for d in row.reasoning_dims)]


@dataclass
class Collected:
    items: list[HarnessItem] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


def collect(release: Path, out: Path, opts: ExportOptions) -> Collected:
    """Every row of the release as a ``HarnessItem``, its pixels written to ``out/images`` (embedded, or rebuilt and
    matching their references); rows without pixels keep ``images`` empty and are counted."""
    answer_prompt = load_prompt("eval_answer", opts.prompts_dir)
    judge_prompt = load_prompt("eval_judge", opts.prompts_dir)
    step = AnswerItem(AnswerParams(temperature=0.0), answer_prompt)
    got = Collected()
    (out / "images").mkdir(parents=True, exist_ok=True)
    for row in read.rows(release):
        pixels = [img.data for img in row.images if img.data]
        if not pixels and row.image_refs:
            pixels, why = rebuilt_images(row, opts.images)
            got.counts["reference_only:rebuilt" if not why else f"reference_only:{why}"] += 1
        names = []
        for n, data in enumerate(pixels):
            name = f"{row.item_id}_{n}.png"
            write_bytes(out / "images" / name, data)
            names.append(name)
        it = EvalItem.from_row(row, [])
        system, user = step.messages(Ask(it, 0))
        judge_system, judge_user = judge_prompt.messages(question=it.question, options=it.options,
                                                         reference=it.reference, response=RESPONSE_MARK)
        got.items.append(HarnessItem(
            row=row, images=names, system=system["content"], user=user["content"][0]["text"],
            asks=dialogue_asks(it)[1:] if it.format == "multi_turn" else [], judge_system=judge_system["content"],
            judge_user=judge_user["content"], max_tokens=answer_prompt.max_tokens))
        got.counts[f"format:{row.format}"] += 1
        got.counts["with_pixels" if names else "without_pixels"] += 1
    return got


def scoring_module() -> str:
    """``medbench_scoring.py``: the project's own answer reading and scoring (``curation.text.plain`` and
    ``spaced``, ``curation.answering.extract_letter``, ``is_refusal``, ``grade`` and ``weighted_score``), their source
    copied from the running code with the constants they read, for harnesses that cannot import ``curation``."""
    from curation import answering, text

    patterns = {k: (v.pattern, int(v.flags)) for k, v in text._NOT_WORD.items()}
    parts = [
        '"""Answer reading and scoring of medbench-curation (generated by `curate release export` from the project\'s '
        "own code: a harness\nscores a response exactly as `curate evaluate` does). Do not edit; export again.\"\"\"",
        "", "from __future__ import annotations", "", "import re", "from collections.abc import Mapping, Sequence", "",
        f"LETTERS = {text.LETTERS!r}",
        "_NOT_WORD = {" + ", ".join(f"{k!r}: re.compile({p!r}, {f})" for k, (p, f) in patterns.items()) + "}",
        f"_REFUSAL = re.compile({answering._REFUSAL.pattern!r}, {int(answering._REFUSAL.flags)})", "",
    ]
    for fn in (text.plain, text.spaced, answering.extract_letter, answering.is_refusal, answering.grade,
               answering.weighted_score):
        parts += ["", inspect.getsource(fn)]
    return "\n".join(parts).rstrip() + "\n"


def asset(name: str) -> str:
    """A file shipped with every export of its harness (``curation/release/export/assets/``)."""
    return resources.files("curation.release.export").joinpath("assets", name).read_text(encoding="utf-8")


@contextmanager
def export_dir(out: Path) -> Iterator[Path]:
    """The export folder, built beside ``out`` and swapped in whole on success."""
    with staged_dir(out) as staging:
        yield staging


def write_common(root: Path, release: Path, harness: str, got: Collected, opts: ExportOptions,
                 tasks: dict[str, str]) -> None:
    """What every export carries beside its harness files: ``medbench_scoring.py``, ``judge_prompt.json``,
    ``references.jsonl`` (items whose images you must rebuild), ``export.json`` (what was written) and a README."""
    from curation.jsonio import read_json

    manifest = read_json(release / "manifest.json")
    write_text(root / "medbench_scoring.py", scoring_module())
    judge = load_prompt("eval_judge", opts.prompts_dir)
    write_text(root / "judge_prompt.json", json.dumps({
        "prompt": f"{judge.id}@v{judge.version}", "system": judge.system.strip(), "user_template": judge.user,
        "response_schema": judge.response_schema, "weights": opts.judge_weights,
        "pass_threshold": opts.judge_pass_threshold,
        "rule": "correct when the judge says correct and the weighted rubric score reaches pass_threshold",
    }, indent=2) + "\n")
    refs = [{"item_id": it.row.item_id, "source": it.row.source, "rebuild": REBUILD_STEP,
             "image_refs": [json.loads(r) for r in it.row.image_refs]}
            for it in got.items if it.row.image_refs and not it.images]
    write_text(root / "references.jsonl", "".join(json.dumps(r, sort_keys=True) + "\n" for r in refs))
    info = {"harness": harness, "release": f"{manifest['name']}-{manifest['version']}",
            "release_manifest_sha256": _digest(release), "tasks": tasks,
            "counts": dict(sorted(got.counts.items())), "reference_only_without_pixels": len(refs),
            "rebuild_step": REBUILD_STEP if refs else None}
    write_text(root / "export.json", json.dumps(info, indent=2, sort_keys=True) + "\n")
    lines = [f"# {info['release']} for {harness}", "",
             f"Written by `curate release export --format {harness}` from release {info['release']}.", "",
             "| task | what it asks |", "|---|---|", *(f"| `{k}` | {v} |" for k, v in tasks.items()), "",
             "Answers are scored by `medbench_scoring.py`, generated from the project's own scoring code, so a "
             "response scores here as it does in `curate evaluate`. Open answers are graded by the judge prompt in "
             "`judge_prompt.json` when a judge model is given, else by whether the reference answer appears in the "
             "response.", ""]
    if refs:
        lines += [f"{len(refs)} item(s) come from sources whose data-use agreements forbid redistributing images "
                  "(ADNI, OASIS): they are listed in `references.jsonl` with the SHA-256 of each image and are in the "
                  "`_no_image` tasks only. To run them with their images:", "", f"    {REBUILD_STEP}", ""]
    write_text(root / "README.md", "\n".join(lines))


def _digest(release: Path) -> str:
    from curation.jsonio import sha256_file

    return sha256_file(release / "manifest.json")
