"""lmms-eval task functions for a medbench-curation release (written by `curate release export --format lmms-eval`).

Each item is asked with the user text `curate evaluate` sends (pass `system_prompt.txt` as the system instruction
for the same system message) and scored by `medbench_scoring.py`, the project's own scoring code.
"""

from __future__ import annotations

import importlib.util
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
log = logging.getLogger("medbench")


def _scoring() -> Any:
    spec = importlib.util.spec_from_file_location("medbench_scoring", HERE / "medbench_scoring.py")
    if spec is None or spec.loader is None:
        raise RuntimeError(f"{HERE / 'medbench_scoring.py'}: cannot load the scoring module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ms = _scoring()


def with_images(dataset: Any) -> Any:
    """The items that carry their images (reference-only items need `curate release rebuild`, see README.md)."""
    return dataset.filter(lambda doc: doc["has_pixels"])


def every_item(dataset: Any) -> Any:
    return dataset


def doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    return [img.convert("RGB") for img in doc["images"]]


def doc_to_no_visual(doc: dict[str, Any]) -> list[Any]:
    return []


def doc_to_text(doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None) -> str:
    return str(doc["prompt"])


def process_results(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    response = results[0] if results else ""
    ok = ms.grade(doc["format"], response, doc["options"], doc["answer_index"], doc["answer"])
    return {"accuracy": float(ok), "by_category": {"categories": [f"format:{doc['format']}", *doc["dimensions"]],
                                                   "correct": bool(ok)}}


def aggregate_by_category(results: list[dict[str, Any]]) -> float:
    """Logs the accuracy per format, task type and dimension; returns the mean over categories."""
    tally: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        for c in r["categories"]:
            tally[c].append(r["correct"])
    per = {c: sum(v) / len(v) for c, v in sorted(tally.items())}
    for c, acc in per.items():
        log.info("medbench %s: accuracy %.4f over %d items", c, acc, len(tally[c]))
    return sum(per.values()) / len(per) if per else 0.0
