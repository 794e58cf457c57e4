"""Load a `curate release export --format lmms-eval` folder with lmms-eval itself (run with the Python of
.venv-lmms-eval: `make check-lmms-eval`): its TaskManager indexes the folder's YAMLs, builds both tasks over the
exported Parquet, and each document goes through the task's own doc_to_text, doc_to_visual and process_results with
a right letter (scored 1) and "The answer is b." style malformed answer (scored 0). Exits non-zero on any mismatch."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: Path) -> int:
    from lmms_eval.tasks import TaskManager, get_task_dict

    info = json.loads((folder / "export.json").read_text(encoding="utf-8"))
    tasks = get_task_dict(["medbench", "medbench_no_image"], TaskManager(include_path=str(folder),
                                                                        include_defaults=False))
    problems = []
    for name, task in tasks.items():
        docs = list(task.eval_docs)
        with_images = name == "medbench"
        for doc in docs:
            prompt = task.doc_to_text(doc)
            visuals = task.doc_to_visual(doc)
            if prompt != doc["prompt"] or (len(visuals) != len(doc["images"]) if with_images else visuals):
                problems.append(f"{name} {doc['item_id']}: prompt or visuals differ from the export")
            if doc["format"] == "mcq":
                right = "ABCDEFGH"[doc["answer_index"]]
                ok = task.process_results(doc, [f"The answer is ({right})."])["accuracy"]
                bad = task.process_results(doc, [f"The answer is {right.lower()}."])["accuracy"]
                if (ok, bad) != (1.0, 0.0):
                    problems.append(f"{name} {doc['item_id']}: scored {ok}, {bad} (want 1.0, 0.0)")
        print(f"{name}: {len(docs)} documents, images {'on' if with_images else 'off'}")
    for p in problems:
        print(p, file=sys.stderr)
    print(f"lmms-eval check of {info['release']}: {'FAILED' if problems else 'ok'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
