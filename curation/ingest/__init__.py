"""Ingest: one module per source, with its spec under specs/ (curation.schema.SourceName lists the specs)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from curation.errors import InputError
from curation.ingest.base import IngestContext
from curation.ingest.screen import screen
from curation.jsonio import write_jsonl
from curation.params import IngestParams, load_spec
from curation.paths import inside
from curation.report import Report
from curation.schema import Case, SourceName


def _ingestor(name: SourceName) -> Callable[[IngestContext], Iterable[Case]]:
    """The source's ``ingest``: that of the module of this package named as the source (- as _), beside its spec
    ``specs/<source>.yaml``. Adding a source is adding those two files (the smallest: ``medpix.py``)."""
    module = name.value.replace("-", "_")
    if module not in {m.name for m in pkgutil.iter_modules(__path__)}:
        raise InputError(f"source {name.value!r} has a spec but no module curation/ingest/{module}.py")
    return importlib.import_module(f"{__name__}.{module}").ingest  # type: ignore[no-any-return]


def raw_state(ctx: IngestContext) -> Iterator[dict[str, object]]:
    """Size and modification time of every file of the raw folder, when records point into it (``copy_files:
    false``): the records alone do not change when a file's content does, this list does, so the stage after
    ingest (a DVC dependency on ingest's output) reruns. What DVC's own state keeps for a file, read by one stat."""
    for path in ctx.files():
        st = path.stat()
        yield {"path": ctx.rel_raw(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def run(params: IngestParams, source: str, src: Path, dst: Path, *, workers: int = 1,
        scheduler: str | None = None, report_path: Path | None = None, secret: bytes | None = None) -> Report:
    """``secret``: the project's key (the CLI passes it; None reads ``CURATION_SECRET``)."""
    from curation.pseudonyms import project_secret
    from curation.records import staged_dir

    try:
        name = SourceName(source)
    except ValueError:
        raise InputError(f"unknown source {source!r}; choose from {', '.join(s.value for s in SourceName)}") from None
    src = Path(src)
    if not src.is_dir():
        raise InputError("raw folder does not exist or is not a folder", src)
    if not params.copy_files and not inside(src, Path.cwd()):
        raise InputError("ingest.copy_files is false, so records point into the raw folder, and this one is outside "
                         "the project folder (the working folder) that later stages read; run from the project root "
                         "or set copy_files: true", src)
    report = Report(stage=f"ingest@{name.value}")
    with staged_dir(dst) as staging:
        ctx = IngestContext(source=name.value, raw=src, staging=staging, final=Path(dst), report=report,
                            spec=load_spec(name.value), secret=project_secret() if secret is None else secret,
                            workers=workers, scheduler=scheduler,
                            copy_files=params.copy_files, bounds=params.bounds)
        made = _ingestor(name)(ctx)
        # small sources return lists (sorted by case id); large ones yield cases as they are built (streaming)
        cases: Iterable[Case] = sorted(made, key=lambda c: c.case_id) if isinstance(made, list) else made

        def counted(it: Iterable[Case]) -> Iterator[Case]:
            for c in it:
                screen(c, report)  # source text is data: hidden characters and planted instructions out, flagged
                report.counts["series"] += len(c.all_series())
                report.counts["figures"] += len(c.figures)
                yield c

        report.counts["series"] += 0
        report.counts["figures"] += 0
        report.outputs = write_jsonl(staging / "cases.jsonl", counted(cases))
        report.counts["cases"] = report.outputs
        report.write_quarantine(staging / "quarantine.jsonl")
        # participant identifiers stay here, outside anything a release reads
        write_jsonl(staging / "private" / "id_map.jsonl", sorted(ctx.id_map, key=lambda r: r["case_id"]))
        if not params.copy_files:
            write_jsonl(staging / "raw_state.jsonl", raw_state(ctx))
        report.check_failure_rate(params.max_failure_rate, report_path, dst)
    report.write(report_path)
    return report
