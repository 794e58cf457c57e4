"""``--format vlmevalkit``: VLMEvalKit's benchmark TSVs. ``NAME.tsv`` has its documented MCQ columns (``index``,
base64 ``image`` (a JSON list of them for a multi-image item), ``question``, ``hint``, ``A``.., ``answer`` as a letter,
``category``), one row per MCQ item with images; ``NAME_open.tsv`` the open items (``answer`` is the reference); each
has a ``_no_image`` twin with every item and no ``image`` column (the blind baseline)."""

from __future__ import annotations

import base64
import csv
import io
import json
from pathlib import Path

from curation.records import write_text
from curation.release.export.harness import ExportOptions, HarnessItem, collect, export_dir, write_common
from curation.text import LETTERS

MCQ_COLUMNS = ["index", "image", "question", "hint", *LETTERS, "answer", "category", "l2-category", "split",
               "item_id", "prompt"]
OPEN_COLUMNS = ["index", "image", "question", "hint", "answer", "category", "l2-category", "split", "item_id",
                "prompt"]


def _image(root: Path, it: HarnessItem) -> str:
    encoded = [base64.b64encode((root / "images" / n).read_bytes()).decode() for n in it.images]
    return encoded[0] if len(encoded) == 1 else json.dumps(encoded)


def _row(root: Path, it: HarnessItem, index: int, with_image: bool) -> dict[str, str]:
    r = it.row
    row = {"index": str(index), "question": r.question, "hint": r.context, "category": r.task_type,
           "l2-category": ";".join([*(f"visual:{d}" for d in r.visual_dims),
                                    *(f"reasoning:{d}" for d in r.reasoning_dims)]),
           "split": r.split, "item_id": r.item_id, "prompt": it.user}
    if with_image:
        row["image"] = _image(root, it)
    if r.format == "mcq":
        row.update({LETTERS[i]: o for i, o in enumerate(r.options)})
        row["answer"] = it.letter
    else:
        row["answer"] = r.reference_answer or r.answer
    return row


def _tsv(rows: list[dict[str, str]], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, delimiter="\t", lineterminator="\n", restval="")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write(release: Path, out: Path, opts: ExportOptions) -> str:
    from curation.jsonio import read_json

    name = read_json(release / "manifest.json")["name"].replace("-", "_")
    with export_dir(out) as root:
        got = collect(release, root, opts)
        tasks = {}
        for fmt, columns, suffix in (("mcq", MCQ_COLUMNS, ""), ("open", OPEN_COLUMNS, "_open")):
            items = [it for it in got.items if it.row.format == fmt]
            seen = [it for it in items if it.images]
            write_text(root / f"{name}{suffix}.tsv", _tsv([_row(root, it, i, True) for i, it in enumerate(seen)],
                                                          columns))
            write_text(root / f"{name}{suffix}_no_image.tsv",
                       _tsv([_row(root, it, i, False) for i, it in enumerate(items)],
                            [c for c in columns if c != "image"]))
            tasks[f"{name}{suffix}.tsv"] = f"{len(seen)} {fmt} items with their images"
            tasks[f"{name}{suffix}_no_image.tsv"] = f"all {len(items)} {fmt} items, no image (the blind baseline)"
        write_common(root, release, "vlmevalkit", got, opts, tasks)
    n = sum(it.row.format == "mcq" and bool(it.images) for it in got.items)
    return f"{n} MCQ rows with images -> {out}/{name}.tsv"
