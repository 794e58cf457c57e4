"""The release's MLCommons Croissant description (``croissant.json``), built and checked with ``mlcroissant``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from curation.params import ReleaseParams

TEXT_FIELDS = {
    "item_id": "Stable item identifier (content hash).",
    "case_id": "Pseudonymous case identifier; all items of a case are in one split.",
    "task_type": "Task family (direct_diagnosis, differential_diagnosis, lesion_recognition, ...).",
    "format": "mcq, open or multi_turn.",
    "question": "The question shown with the images.",
    "context": "Clinical context (EHR fields, presentation) given with the question.",
    "answer": "The correct answer (for an MCQ, the text of the correct option).",
    "reference_answer": "Reference answer for open questions.",
    "rationale": "Why the answer is correct.",
    "turns": "Multi-turn dialogue as JSON [{role, text}].",
    "source": "Source collection (adni, oasis1, oasis3, radiopaedia, case-reports).",
    "license": "Licence of the item's source material.",
    "attribution": "Attribution the licence requires.",
    "review_status": "reviewed or unreviewed (expert review).",
}
LIST_FIELDS = {
    "options": "Options of a multiple-choice item, in order (A, B, ...).",
    "visual_dims": "Visual dimensions: small_object, fine_detail, spatial.",
    "reasoning_dims": "Reasoning dimensions: temporal, causal, long_tail, multi_source.",
    "image_refs": "For sources released as references: per image a JSON object (source, render name, SHA-256 of the "
                  "PNG) that `curate release rebuild` matches against renders of your own copy.",
}


def build(root: Path, params: ReleaseParams, name: str, description: str, licenses: list[str]) -> dict[str, Any]:
    import mlcroissant as mlc

    parquet = mlc.FileSet(id="parquet-files", name="parquet-files", description="Items, one Parquet file per split.",
                          encoding_formats=["application/x-parquet"], includes=["data/*.parquet"])
    images = mlc.FileSet(id="image-files", name="image-files", description="The item images as PNG files.",
                         encoding_formats=["image/png"], includes=["images/*.png"])

    def field(col: str, desc: str, dtype: Any, repeated: bool = False) -> Any:
        return mlc.Field(id=f"items/{col}", name=col, description=desc, data_types=[dtype], repeated=repeated,
                         source=mlc.Source(file_set="parquet-files", extract=mlc.Extract(column=col)))

    fields = [field(c, d, mlc.DataType.TEXT) for c, d in TEXT_FIELDS.items()]
    fields.append(field("answer_index", "Index of the correct option (MCQ).", mlc.DataType.INTEGER))
    fields += [field(c, d, mlc.DataType.TEXT, repeated=True) for c, d in LIST_FIELDS.items()]
    items = mlc.RecordSet(id="items", name="items", description="Benchmark items.", fields=fields)
    key = f"{params.name.replace('-', '_')}_{params.version.replace('.', '_')}"
    cite = params.citation or (f"@misc{{{key},\n"
                                f"  title = {{{params.name} {params.version}: "
                                f"a multimodal neurology reasoning benchmark}},\n"
                                f"  note = {{version {params.version}}}\n}}")
    extra: dict[str, Any] = {"url": params.homepage} if params.homepage else {}
    meta = mlc.Metadata(
        name=name, description=description, version=params.version, license=licenses or ["other"],
        cite_as=cite, distribution=[parquet, images], record_sets=[items],
        keywords=["medical", "neurology", "MRI", "multimodal", "benchmark", "visual question answering"], **extra,
    )
    return meta.to_json()


def write(root: Path, params: ReleaseParams, name: str, description: str, licenses: list[str]) -> Path:
    from curation.records import write_text

    path = root / "croissant.json"
    write_text(path, json.dumps(build(root, params, name, description, licenses), indent=2, sort_keys=True,
                                default=str) + "\n")
    return path
