"""The ``generate`` stage: every case through every template; skips are counted by reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from curation.errors import InputError
from curation.generate.engine import Engine
from curation.params import GenerateParams
from curation.records import read_jsonl, staged_dir, write_jsonl
from curation.report import Report
from curation.schema import Case, Item


def run(params: GenerateParams, src: Path, dst: Path, report_path: Path | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    if not (src / "cases.jsonl").exists():
        raise InputError("no cases.jsonl (run the extract stage first)", src)
    engine = Engine(params)
    report = Report(stage="generate")

    def items() -> Iterator[Item]:
        for case in read_jsonl(src / "cases.jsonl", Case):
            report.inputs += 1
            made, skipped = engine.generate(case)
            for k, v in skipped.items():
                report.counts[f"template_skipped:{k.split(':', 1)[1]}"] += v
            for item in made:
                report.counts[f"task_type:{item.task_type.value}"] += 1
                for d in item.visual_dims + item.reasoning_dims:
                    report.counts[f"dim:{d.value}"] += 1
                yield item

    with staged_dir(dst) as staging:
        report.outputs = write_jsonl(staging / "items.jsonl", items())
    report.metrics["templates"] = len(engine.templates)
    report.skip_step("llm_augmentation", "not available in this version; items are template-only")
    report.write(report_path)
    return report
