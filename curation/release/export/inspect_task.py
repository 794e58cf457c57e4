"""``--format inspect``: an Inspect (``inspect_ai``) task file over the release, its samples in ``samples.jsonl``
(the system and user messages ``curate evaluate`` sends, the images as files, dialogues' later turns), and its
``_no_image`` twin, the blind baseline."""

from __future__ import annotations

import json
from pathlib import Path

from curation.records import write_text
from curation.release.export.harness import ExportOptions, asset, collect, export_dir, write_common

TASK_FILE = "medbench_inspect.py"


def write(release: Path, out: Path, opts: ExportOptions) -> str:
    with export_dir(out) as root:
        got = collect(release, root, opts)
        lines = []
        for it in got.items:
            lines.append(json.dumps({
                "id": it.row.item_id, "system": it.system, "user": it.user, "images": it.images, "asks": it.asks,
                "target": it.letter if it.row.format == "mcq" else (it.row.reference_answer or it.row.answer),
                "judge_system": it.judge_system, "judge_user": it.judge_user, "max_tokens": it.max_tokens,
                "metadata": it.metadata(),
            }, ensure_ascii=False))
        write_text(root / "samples.jsonl", "\n".join(lines) + "\n")
        write_text(root / TASK_FILE, asset("medbench_inspect.py"))
        n_pix = sum(bool(it.images) for it in got.items)
        tasks = {f"{TASK_FILE}@medbench": f"the {n_pix} items with images, asked with them",
                 f"{TASK_FILE}@medbench_no_image": f"all {len(got.items)} items, asked without images (the blind "
                                                   "baseline)"}
        write_common(root, release, "inspect", got, opts, tasks)
    return f"{len(got.items)} items ({n_pix} with images) -> {out}/{TASK_FILE}"
