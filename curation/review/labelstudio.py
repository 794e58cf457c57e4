"""Expert review in Label Studio through ``label-studio-sdk``: push items, pull annotations, report progress.

- ``push`` is idempotent: tasks are keyed by ``item_id``; an unchanged item is left alone, a changed item
  (different content hash) has its task data updated, a new item becomes a task with the generated answer as
  a pre-annotation. Items go in batches, so a push cut off by a server restart is simply run again.
- ``pull`` writes every task with its annotations (sorted, deterministic) to the pinned snapshot that the
  ``review`` stage merges; a second project holds the adjudication queue.
- Images are referenced through Label Studio's local-files storage (``/data/local-files/?d=``), or sent as
  data URIs when the server cannot see the project's files.
"""

from __future__ import annotations

import html
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx

from curation.errors import InputError, ServiceError
from curation.params import ReviewParams
from curation.records import content_hash, read_jsonl, write_text
from curation.schema import Item

LETTERS = "ABCDEFGH"


def connect(params: ReviewParams) -> Any:
    from label_studio_sdk import LabelStudio

    url = os.environ.get("LABEL_STUDIO_URL") or params.label_studio_url
    key = os.environ.get("LABEL_STUDIO_API_KEY") or params.label_studio_api_key
    if not url or not key:
        raise ServiceError("no Label Studio server configured (set LABEL_STUDIO_URL and LABEL_STUDIO_API_KEY)")
    client = LabelStudio(base_url=url.rstrip("/"), api_key=key, timeout=params.timeout_s)
    client._curation_url = url  # noqa: SLF001 - kept for error messages
    return client


def _call(client: Any, what: str, fn: Callable[[], Any]) -> Any:
    """Run one API call; connection failures and HTTP errors become one-line ServiceErrors."""
    from label_studio_sdk.core.api_error import ApiError

    try:
        return fn()
    except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError, httpx.TimeoutException) as exc:
        raise ServiceError(f"cannot reach Label Studio at {client._curation_url} while {what} "
                          f"({type(exc).__name__}); run the same command again when it is back") from None
    except ApiError as exc:
        body = exc.body if isinstance(exc.body, str) else json.dumps(exc.body)[:300]
        raise ServiceError(f"Label Studio refused {what}: HTTP {exc.status_code} {body}") from None


# -- task data -----------------------------------------------------------------------------------------
def image_url(path: str, mode: str, root: Path) -> str:
    if mode == "data-uri":
        from curation.generate.augment import data_uri

        return data_uri(path)
    rel = Path(path).resolve().relative_to(root.resolve())
    return f"/data/local-files/?d={rel.as_posix()}"


def task_data(item: Item, mode: str = "local-files", root: Path = Path(".")) -> dict[str, Any]:
    options = "\n".join(f"{LETTERS[i]}. {o}" for i, o in enumerate(item.options))
    dims = (f"task: {item.task_type.value}; visual: {', '.join(d.value for d in item.visual_dims) or '-'}; "
            f"reasoning: {', '.join(d.value for d in item.reasoning_dims) or '-'}")
    body = {
        "item_id": item.item_id, "case_id": item.case_id,
        "meta": f"{item.item_id} | {item.source.value} | {item.format.value} | template {item.template_id or '-'} "
                f"(v{item.generator.template_version or '-'}) | {item.license}",
        "images": [image_url(p, mode, root) for p in item.images],
        "context": item.context or "(none)", "question": item.question, "options_text": options or "(open question)",
        "options": list(item.options), "answer": item.answer,
        "rationale": item.rationale or item.reference_answer or "(none)",
        # the dialogue view needs at least one entry to render
        "dialogue": [{"author": t.role, "text": t.text} for t in item.turns]
        or [{"author": "note", "text": "Single-turn item: no dialogue."}],
        "tags": dims, "visual_dims": [d.value for d in item.visual_dims],
        "reasoning_dims": [d.value for d in item.reasoning_dims],
    }
    body["content_hash"] = content_hash({k: v for k, v in body.items() if k != "images"} | {"images": item.images})
    return body


def prediction(item: Item) -> dict[str, Any]:
    """The generated item as a pre-annotation: reviewers edit in place instead of retyping."""

    def text(name: str, value: str) -> dict[str, Any]:
        return {"from_name": name, "to_name": "question_text", "type": "textarea", "value": {"text": [value]}}

    def choices(name: str, values: list[str]) -> dict[str, Any]:
        return {"from_name": name, "to_name": "question_text", "type": "choices", "value": {"choices": values}}

    result = [text("question", item.question), text("answer", item.answer)]
    if item.options:
        result.append(text("options", "\n".join(item.options)))
    if item.rationale or item.reference_answer:
        result.append(text("rationale", item.rationale or item.reference_answer or ""))
    if item.visual_dims:
        result.append(choices("visual_dims", [d.value for d in item.visual_dims]))
    if item.reasoning_dims:
        result.append(choices("reasoning_dims", [d.value for d in item.reasoning_dims]))
    return {"model_version": f"generator:{item.generator.kind}", "result": result}


# -- projects ------------------------------------------------------------------------------------------
def ensure_project(client: Any, title: str, label_config: str, params: ReviewParams, adjudication: bool = False) -> Any:
    # the reviewer guidelines live beside the labeling config and open from the interface's Instructions button
    path = Path(params.label_config).with_name("guidelines.md")
    guidelines = html.escape(path.read_text()) if path.exists() else ""
    settings = {
        "label_config": label_config,
        "expert_instruction": f'<pre style="white-space: pre-wrap">{guidelines}</pre>' if guidelines else "",
        "show_instruction": True, "show_skip_button": False, "enable_empty_annotation": False,
        "maximum_annotations": 1 if adjudication else max(1, params.reviewers_per_overlap_item),
        "overlap_cohort_percentage": 0 if adjudication else int(round(params.overlap_fraction * 100)),
        "show_overlap_first": True,
    }
    found = [p for p in _call(client, "listing projects", lambda: list(client.projects.list(title=title)))
             if p.title == title]
    if found:
        project = found[0]
        _call(client, "updating the project", lambda: client.projects.update(id=project.id, **settings))
        return project
    return _call(client, "creating the project", lambda: client.projects.create(title=title, **settings))


def ensure_local_storage(client: Any, project_id: int, folder: Path) -> None:
    folder = folder.resolve()
    existing = _call(client, "listing storages", lambda: list(client.import_storage.local.list(project=project_id)))
    if any(Path(s.path or "").resolve() == folder for s in existing):
        return
    _call(client, "attaching local-files storage", lambda: client.import_storage.local.create(
        project=project_id, path=str(folder), use_blob_urls=True, regex_filter=r".*\.png$",
        title="curation images"))


def existing_tasks(client: Any, project_id: int) -> dict[str, Any]:
    tasks = _call(client, "listing tasks", lambda: list(client.tasks.list(project=project_id, fields="all")))
    out: dict[str, Any] = {}
    for t in tasks:
        item_id = (t.data or {}).get("item_id")
        if item_id:
            out.setdefault(item_id, t)
    return out


def push(params: ReviewParams, items: Iterable[Item], *, adjudication: bool = False,
         batch_size: int = 50, on_batch: Callable[[int], None] | None = None,
         client: Any = None) -> dict[str, int]:
    """Create/update the project and its tasks; returns counts of created/updated/unchanged tasks."""
    client = client or connect(params)
    config_path = Path(params.label_config)
    try:
        label_config = config_path.read_text()
    except OSError:
        raise InputError("labeling config not found", config_path) from None
    title = params.project_title + (" - adjudication" if adjudication else "")
    project = ensure_project(client, title, label_config, params, adjudication)
    root = Path(params.local_files_root)
    items = list(items)
    if params.image_mode == "local-files":
        images = [str(Path(p).resolve()) for i in items for p in i.images]
        if images:
            folder = Path(os.path.commonpath(images))
            ensure_local_storage(client, project.id, folder if folder.is_dir() else folder.parent)
    have = existing_tasks(client, project.id)
    counts: Counter[str] = Counter()
    new: list[dict[str, Any]] = []
    for item in items:
        data = task_data(item, params.image_mode, root)
        if adjudication:
            data["adjudication"] = True
            data["reviews"] = [d.model_dump() for d in (item.review.decisions if item.review else [])]
            data["tags"] += " | reviews: " + "; ".join(
                f"{d['reviewer']}: {d['verdict']}" + (f" ({d['reject_reason']})" if d.get("reject_reason") else "")
                for d in data["reviews"])
        task = have.get(item.item_id)
        if task is None:
            new.append({"data": data, "predictions": [prediction(item)]})
        elif (task.data or {}).get("content_hash") != data["content_hash"]:
            _call(client, f"updating task {task.id}", lambda t=task, d=data: client.tasks.update(id=t.id, data=d))
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    for n in range(0, len(new), batch_size):
        batch = new[n:n + batch_size]
        _call(client, "importing tasks", lambda b=batch: client.projects.import_tasks(
            id=project.id, request=b, return_task_ids=True))
        counts["created"] += len(batch)
        if on_batch is not None:
            on_batch(counts["created"])
    counts["project_id"] = project.id
    return dict(counts)


def pull(params: ReviewParams, out: Path, client: Any = None) -> dict[str, int]:
    """Export every task with its annotations (review and adjudication projects) into one sorted JSON file."""
    client = client or connect(params)
    tasks: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for title in (params.project_title, params.project_title + " - adjudication"):
        found = [p for p in _call(client, "listing projects", lambda t=title: list(client.projects.list(title=t)))
                 if p.title == title]
        if not found:
            continue
        exported = _call(client, "exporting annotations", lambda p=found[0]: client.projects.exports.as_json(p.id))
        for t in exported:
            data = t.get("data") or {}
            anns = [{k: a.get(k) for k in ("id", "completed_by", "result", "was_cancelled", "ground_truth")}
                    for a in t.get("annotations") or []]
            anns.sort(key=lambda a: a.get("id") or 0)
            tasks.append({"id": t.get("id"), "data": {k: data.get(k) for k in ("item_id", "adjudication") if k in data},
                          "annotations": anns})
            counts["tasks"] += 1
            counts["annotations"] += len(anns)
    tasks.sort(key=lambda t: (bool(t["data"].get("adjudication")), str(t["data"].get("item_id")), t.get("id") or 0))
    write_text(out, json.dumps(tasks, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return dict(counts)


def status(params: ReviewParams, client: Any = None) -> dict[str, Any]:
    """Progress: tasks done, annotations per reviewer, completion per task type and dimension."""
    from curation.records import keyed_hash

    client = client or connect(params)
    listed = _call(client, "listing projects", lambda: list(client.projects.list(title=params.project_title)))
    found = [p for p in listed if p.title == params.project_title]
    if not found:
        raise ServiceError(f"no project titled {params.project_title!r} on the server (run curate review push)")
    tasks = _call(client, "listing tasks", lambda: list(client.tasks.list(project=found[0].id, fields="all")))
    per_reviewer: Counter[str] = Counter()
    per_dim_total: Counter[str] = Counter()
    per_dim_done: Counter[str] = Counter()
    done = 0
    for t in tasks:
        data = t.data or {}
        n_ann = int(t.total_annotations or 0)
        dims = [f"task_type:{data.get('tags', '').split(';')[0].removeprefix('task: ')}"]
        dims += [f"visual:{d}" for d in data.get("visual_dims") or []]
        dims += [f"reasoning:{d}" for d in data.get("reasoning_dims") or []]
        for d in dims:
            per_dim_total[d] += 1
            if n_ann:
                per_dim_done[d] += 1
        done += bool(n_ann)
        for a in t.annotations or []:
            who = a.get("completed_by") if isinstance(a, dict) else getattr(a, "completed_by", None)
            per_reviewer["rev-" + keyed_hash("reviewer", str(who), length=8)] += 1
    return {
        "project": found[0].title, "tasks": len(tasks), "reviewed": done,
        "per_reviewer": dict(sorted(per_reviewer.items())),
        "per_dimension": {d: {"reviewed": per_dim_done[d], "total": n} for d, n in sorted(per_dim_total.items())},
    }


def load_items(path: Path) -> list[Item]:
    if not path.exists():
        raise InputError("no items.jsonl", path)
    return list(read_jsonl(path, Item))
