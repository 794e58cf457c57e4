"""The ``generate`` stage: every case through every template, then (with an endpoint) LLM augmentation.

Template skips are counted by reason. LLM steps run in batches so memory stays bounded; without an endpoint
they are reported as skipped, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.generate.augment import Augmenter, chosen
from curation.generate.engine import Engine
from curation.jsonio import batched, read_jsonl, read_jsonl_ordered, write_jsonl
from curation.llm import LLMClient, not_configured
from curation.params import GenerateParams, LlmParams
from curation.records import staged_dir
from curation.report import Report
from curation.schema import Case, Item


def source_order(case: Any) -> tuple[str, bool, str, str]:
    """Cases by source, then by the source's own id (a MedPix case number, a DOI), not by case id, a keyed hash:
    generation spreads each template's keys over the cases in the order it meets them (``Engine.generate``), so in
    this order the items made do not change with the project's secret. Cases whose source id names a participant
    (ADNI, OASIS: no ``origin``) come after their source's others, by case id."""
    if not isinstance(case, dict):
        return "", True, "", ""  # (not a case: reading it as one says so, naming its line)
    origin = case.get("origin")
    return str(case.get("source")), origin is None, str(origin or ""), str(case.get("case_id"))


def run(params: GenerateParams, src: Path, dst: Path, report_path: Path | None = None,
        llm: LlmParams | None = None) -> Report:
    src, dst = Path(src), Path(dst)
    if not (src / "cases.jsonl").exists():
        raise InputError("no cases.jsonl (run the extract stage first)", src)
    engine = Engine(params)
    report = Report(stage="generate")
    llm = llm or LlmParams()
    why_not = not_configured(llm) if chosen(params.llm_steps) else "no LLM steps listed in generate.llm_steps"
    client = None if why_not else LLMClient(llm)

    flagged: dict[str, list[str]] = {}  # case id -> its flags (instruction-like text removed at ingest)

    def count(item: Item) -> Item:
        item.source_flags = flagged.get(item.case_id, [])
        if item.source_flags:
            report.counts["items_of_flagged_cases"] += 1
        report.counts[f"task_type:{item.task_type.value}"] += 1
        report.counts[f"generator:{item.generator.kind}"] += 1
        for d in item.visual_dims + item.reasoning_dims:
            report.counts[f"dim:{d.value}"] += 1
        return item

    def drafts() -> Iterator[Item]:
        for case in read_jsonl_ordered(src / "cases.jsonl", source_order, Case):
            report.inputs += 1
            if case.flags:
                flagged[case.case_id] = case.flag_notes()
                report.counts["cases_flagged_instruction_like"] += 1
            items, skipped = engine.generate(case)
            for skip, v in skipped.items():
                report.counts[f"template_skipped:{skip.reason}"] += v
                report.counts[f"template_skipped_by:{skip}"] += v
            yield from items

    def template_items() -> Iterator[Item]:
        # answer letters are balanced per template over the whole set, so items are placed once all are made;
        # the drafts wait in a spill file beside the output, not in memory (peak memory flat in the number of cases)
        yield from engine.finalize_stream(drafts(), staging / ".drafts.pickle")

    with staged_dir(dst) as staging:
        if client is None:
            report.outputs = write_jsonl(staging / "items.jsonl", (count(i) for i in template_items()))
        else:
            failures: list[dict] = []  # raw text of every unusable answer, for whoever tunes the prompts
            aug = Augmenter(params, client, report, failures.append, params.prompts_dir)

            def all_items() -> Iterator[Item]:
                for batch in batched(template_items(), params.llm_batch):
                    yield from (count(i) for i in aug.augment(batch))
                cases = (c for c in read_jsonl(src / "cases.jsonl", Case) if c.figures)
                for group in batched(cases, params.llm_batch):
                    yield from (count(i) for i in aug.caption_items(group))

            report.outputs = write_jsonl(staging / "items.jsonl", all_items())
            write_jsonl(staging / "llm_failures.jsonl", failures)
            report.metrics.update(client.usage.as_metrics())
            report.metrics["llm_model"] = client.model
            report.metrics["llm_cache_corrupt_entries"] = client.cache.corrupt
    report.metrics["templates"] = len(engine.templates)
    # one item per case and answered fact: every template item counts once (LLM-written items are counted apart)
    report.metrics["effective_template_items"] = report.counts.get("generator:template", 0)
    if client is None:
        report.skip_step("llm_augmentation", why_not or "")
    report.write(report_path)
    return report
