"""``--format lmms-eval``: an lmms-eval task folder in its documented format (task YAMLs plus ``utils.py``), over one
Parquet file of the release's MCQ and open items (images embedded); ``medbench`` asks the items that have images with
them, ``medbench_no_image`` every item without. Run ``lmms-eval --include_path OUT --tasks medbench,...``."""

from __future__ import annotations

from pathlib import Path

import yaml

from curation.records import write_text
from curation.release.export.harness import ExportOptions, asset, collect, dimensions, export_dir, write_common

DATA = "data/medbench-00000-of-00001.parquet"


def _yaml(task: str, data: Path, with_images: bool, max_tokens: int) -> str:
    """One task's YAML; ``!function`` tags are lmms-eval's way to name a function of the folder's utils.py."""
    config = {
        "task": task, "dataset_path": "parquet", "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test", "output_type": "generate_until",
        "doc_to_visual": "FN:utils.doc_to_visual" if with_images else "FN:utils.doc_to_no_visual",
        "doc_to_text": "FN:utils.doc_to_text", "doc_to_target": "target",
        "process_docs": "FN:utils.with_images" if with_images else "FN:utils.every_item",
        "generation_kwargs": {"max_new_tokens": max_tokens, "temperature": 0, "do_sample": False},
        "process_results": "FN:utils.process_results",
        "metric_list": [
            {"metric": "accuracy", "aggregation": "mean", "higher_is_better": True},
            {"metric": "by_category", "aggregation": "FN:utils.aggregate_by_category", "higher_is_better": True},
        ],
        "metadata": {"version": 1},
    }
    return _tag(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))

def _tag(text: str) -> str:
    """Turn the ``FN:module.name`` placeholders into lmms-eval's ``!function module.name`` tags."""
    import re

    return re.sub(r"(['\"]?)FN:([A-Za-z_][\w.]*)\1", r"!function \2", text)


def write(release: Path, out: Path, opts: ExportOptions) -> str:
    from datasets import Dataset, Features, Image, Sequence, Value

    out = Path(out).resolve()
    with export_dir(out) as root:
        got = collect(release, root, opts)
        items = [it for it in got.items if it.row.format in ("mcq", "open")]
        got.counts["lmms_eval:left_out_multi_turn"] = sum(it.row.format == "multi_turn" for it in got.items)
        text = {"item_id", "split", "format", "task_type", "prompt", "target", "answer", "source"}
        features = Features({**{k: Value("string") for k in sorted(text)}, "answer_index": Value("int32"),
                             "options": Sequence(Value("string")), "dimensions": Sequence(Value("string")),
                             "has_pixels": Value("bool"), "images": Sequence(Image())})
        cols: dict[str, list[object]] = {k: [] for k in features}
        for it in items:
            r = it.row
            for k, v in {"item_id": r.item_id, "split": r.split, "format": r.format, "task_type": r.task_type,
                         "prompt": it.user, "target": it.letter if r.format == "mcq" else r.answer,
                         "answer": r.answer, "source": r.source, "answer_index": r.answer_index,
                         "options": list(r.options), "dimensions": dimensions(r), "has_pixels": bool(it.images),
                         "images": [{"bytes": (root / "images" / n).read_bytes(), "path": n} for n in it.images]
                         }.items():
                cols[k].append(v)
        (root / "data").mkdir(parents=True, exist_ok=True)
        Dataset.from_dict(cols, features=features).to_parquet(str(root / DATA))
        max_tokens = max((it.max_tokens for it in items), default=512)
        # the YAML names the data where the export will stand once swapped in (export again after moving it)
        write_text(root / "medbench.yaml", _yaml("medbench", out / DATA, True, max_tokens))
        write_text(root / "medbench_no_image.yaml", _yaml("medbench_no_image", out / DATA, False, max_tokens))
        write_text(root / "utils.py", asset("lmms_utils.py"))
        write_text(root / "system_prompt.txt", (items[0].system if items else "") + "\n")
        n_pix = sum(bool(it.images) for it in items)
        tasks = {"medbench": f"the {n_pix} MCQ and open items with images, asked with them",
                 "medbench_no_image": f"all {len(items)} MCQ and open items, without images (the blind baseline)"}
        write_common(root, release, "lmms-eval", got, opts, tasks)
    return f"{len(items)} items ({n_pix} with images) -> {out} (lmms-eval --include_path {out})"
