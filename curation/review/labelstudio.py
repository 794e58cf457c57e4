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
from pydantic import ValidationError

from curation.errors import InputError, ServiceError
from curation.jsonio import content_hash, read_jsonl
from curation.params import ReviewParams
from curation.records import write_text
from curation.schema import Item
from curation.text import LETTERS


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
        from curation.llm.images import data_uri

        return data_uri(path)
    rel = Path(path).resolve().relative_to(root.resolve())
    return f"/data/local-files/?d={rel.as_posix()}"


def stack_data(item: Item, stacks: list[Any], mode: str, root: Path) -> dict[str, Any]:
    """The pages a reviewer flips through: each series' stack (evidence slice first), or the item's own images when
    it shows no volume. ``stack_pages`` maps a page (a region's ``item_index``) to [stack, slice, mm]."""
    if not stacks:
        return {"stack": [image_url(p, mode, root) for p in item.images], "stack_paths": list(item.images),
                "stack_series": [], "stack_pages": [[-1, n, None] for n in range(len(item.images))],
                "stack_legend": "No volume: the pages are the item's own images."}
    urls: list[str] = []
    paths: list[str] = []
    pages: list[list[Any]] = []
    legend: list[str] = []
    for n, st in enumerate(stacks):
        first = len(pages) + 1
        for path, idx, mm in zip(st.paths, st.slices, st.positions_mm, strict=True):
            urls.append(image_url(path, mode, root))
            paths.append(path)
            pages.append([n, idx, mm])
        legend.append(f"pages {first}-{len(pages)}: {st.sequence or 'series'} {st.series_id}"
                      f"{' (visit ' + st.visit_id + ')' if st.visit_id else ''}, {st.plane}; page {first} "
                      f"(yellow frame) is the claimed evidence, slice {st.evidence_slice}"
                      f"{', target ' + st.target if st.target else ''}")
    return {"stack": urls, "stack_paths": paths, "stack_series": [st.describe() for st in stacks],
            "stack_pages": pages, "stack_legend": "\n".join(legend)}


def task_data(item: Item, mode: str = "local-files", root: Path = Path("."),
              stacks: list[Any] | None = None) -> dict[str, Any]:
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
        "source_flags": "\n".join(item.source_flags) or "(none)",
        # the source's title and credit: for the reviewer, who checks that no item leans on it (never shown to a model)
        "source_attribution": item.attribution or "(none)",
        "reasoning_dims": [d.value for d in item.reasoning_dims],
    }
    body.update(stack_data(item, stacks or [], mode, root))
    body["content_hash"] = content_hash({k: v for k, v in body.items() if k not in ("images", "stack")}
                                        | {"images": item.images})
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
    guidelines = html.escape(path.read_text(encoding="utf-8")) if path.exists() else ""
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


def storage_folders(paths: Iterable[str], root: Path) -> list[Path]:
    """The folders to attach as local-files storage: per top-level folder under the document root, the common folder
    of its files (Label Studio refuses the document root itself)."""
    root = root.resolve()
    groups: dict[str, list[str]] = {}
    for p in paths:
        full = Path(p).resolve()
        try:
            rel = full.relative_to(root)
        except ValueError:
            raise InputError(f"image lies outside review.local_files_root ({root})", Path(p)) from None
        if len(rel.parts) < 2:
            raise InputError("image lies directly in review.local_files_root; Label Studio serves only subfolders",
                             Path(p))
        groups.setdefault(rel.parts[0], []).append(str(full.parent))
    return [Path(os.path.commonpath(g)) for _, g in sorted(groups.items())]


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
        label_config = config_path.read_text(encoding="utf-8")
    except OSError:
        raise InputError("labeling config not found", config_path) from None
    title = params.project_title + (" - adjudication" if adjudication else "")
    project = ensure_project(client, title, label_config, params, adjudication)
    from curation.review.stack import StackBuilder, load_index

    root = Path(params.local_files_root)
    items = list(items)
    builder = StackBuilder(params.stack, load_index(params.cases), Path(params.stack.dir))
    # case by case, so each volume is read once while its items' stacks are cut
    stacks = {i.item_id: builder.for_item(i) for i in sorted(items, key=lambda i: (i.case_id, i.item_id))}
    if params.image_mode == "local-files":
        paths = [p for i in items for p in i.images] + [p for s in stacks.values() for st in s for p in st.paths]
        for folder in storage_folders(paths, root):
            ensure_local_storage(client, project.id, folder)
    have = existing_tasks(client, project.id)
    counts: Counter[str] = Counter()
    new: list[dict[str, Any]] = []
    for item in items:
        data = task_data(item, params.image_mode, root, stacks[item.item_id])
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
            if int(getattr(task, "total_annotations", 0) or 0) and (task.data or {}).get("stack_pages") != data[
                    "stack_pages"]:
                # marks already made name pages of the old stack; merge reads them through the new one
                counts["restacked_with_annotations"] += 1
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
            keep = ("item_id", "adjudication", "stack_series", "stack_pages")  # the pages' geometry, for merge
            tasks.append({"id": t.get("id"), "data": {k: data.get(k) for k in keep if k in data},
                          "annotations": anns})
            counts["tasks"] += 1
            counts["annotations"] += len(anns)
    tasks.sort(key=lambda t: (bool(t["data"].get("adjudication")), str(t["data"].get("item_id")), t.get("id") or 0))
    write_text(out, json.dumps(tasks, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return dict(counts)


def status(params: ReviewParams, client: Any = None, secret: bytes | None = None) -> dict[str, Any]:
    """Progress: tasks done, annotations per reviewer, completion per task type and dimension."""
    from curation.pseudonyms import keyed_hash, project_secret

    client = client or connect(params)
    listed = _call(client, "listing projects", lambda: list(client.projects.list(title=params.project_title)))
    found = [p for p in listed if p.title == params.project_title]
    if not found:
        raise ServiceError(f"no project titled {params.project_title!r} on the server (run curate review push)")
    tasks = _call(client, "listing tasks", lambda: list(client.tasks.list(project=found[0].id, fields="all")))
    from curation.review.merge import agreement, parse_annotation

    secret = project_secret() if secret is None else secret

    per_reviewer: Counter[str] = Counter()
    per_dim_total: Counter[str] = Counter()
    per_dim_done: Counter[str] = Counter()
    decisions: dict[str, list[Any]] = {}
    malformed = 0
    done = 0
    for t in tasks:
        data = t.data or {}
        for a in t.annotations or []:
            ann = a if isinstance(a, dict) else a.model_dump()
            if ann.get("was_cancelled"):
                continue
            try:
                decisions.setdefault(str(data.get("item_id")), []).append(parse_annotation(ann, data, secret=secret))
            except (ValueError, TypeError, KeyError, ValidationError):
                malformed += 1
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
            per_reviewer["rev-" + keyed_hash("reviewer", str(who), secret=secret, length=8)] += 1
    ag = agreement(decisions)
    return {
        "project": found[0].title, "tasks": len(tasks), "reviewed": done, "malformed_annotations": malformed,
        "agreement": {k: v for k, v in ag.items() if not k.startswith("evidence_")},
        "evidence_agreement": {k.removeprefix("evidence_"): v for k, v in ag.items() if k.startswith("evidence_")},
        "per_reviewer": dict(sorted(per_reviewer.items())),
        "per_dimension": {d: {"reviewed": per_dim_done[d], "total": n} for d, n in sorted(per_dim_total.items())},
    }


def status_lines(st: dict[str, Any]) -> list[str]:
    """``curate review status``'s table of a ``status()`` result: progress, verdict and evidence agreement, then
    annotations per reviewer and completion per task type and dimension."""
    ag, ev = st["agreement"], st["evidence_agreement"]
    return [
        f"{st['project']}: {st['reviewed']}/{st['tasks']} tasks reviewed",
        f"  verdict agreement: {ag['doubly_reviewed']} doubly reviewed, kappa {ag['cohen_kappa_verdict']}, "
        f"alpha {ag['krippendorff_alpha_verdict']}; evidence visible: kappa {ag['cohen_kappa_evidence_visible']}",
        f"  evidence agreement: {ev['pairs']} pairs of marks, same slice {ev['same_slice_rate']}, "
        f"rectangle IoU {ev['rectangle_iou']} over {ev['rectangle_pairs']} same-slice rectangle pairs",
        *(f"  {who}: {n} annotations" for who, n in st["per_reviewer"].items()),
        *(f"  {dim:<40} {c['reviewed']:>5}/{c['total']}" for dim, c in st["per_dimension"].items()),
    ]


def load_items(path: Path) -> list[Item]:
    if not path.exists():
        raise InputError("no items.jsonl", path)
    return list(read_jsonl(path, Item))
