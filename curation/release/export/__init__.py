"""``curate release export``: a release in the layout another benchmark or an evaluation harness loads, one module
per format, chosen from ``FORMATS`` by name."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from curation.errors import ParamsError
from curation.release.export.harness import ExportOptions


class ExportFormat(StrEnum):
    neural_medbench = "neural-medbench"
    inspect = "inspect"
    lmms_eval = "lmms-eval"
    vlmevalkit = "vlmevalkit"


Writer = Callable[[Path, Path, ExportOptions], str]


def _neural_medbench(release: Path, out: Path, opts: ExportOptions) -> str:
    from curation.release.diff import export_neural_medbench

    return f"{export_neural_medbench(release, out)} cases"


def _inspect(release: Path, out: Path, opts: ExportOptions) -> str:
    from curation.release.export.inspect_task import write

    return write(release, out, opts)


def _lmms_eval(release: Path, out: Path, opts: ExportOptions) -> str:
    from curation.release.export.lmms_eval import write

    return write(release, out, opts)


def _vlmevalkit(release: Path, out: Path, opts: ExportOptions) -> str:
    from curation.release.export.vlmevalkit import write

    return write(release, out, opts)


FORMATS: dict[ExportFormat, Writer] = {
    ExportFormat.neural_medbench: _neural_medbench,
    ExportFormat.inspect: _inspect,
    ExportFormat.lmms_eval: _lmms_eval,
    ExportFormat.vlmevalkit: _vlmevalkit,
}


def export(release: Path, out: Path, fmt: str, opts: ExportOptions) -> str:
    """Write ``release`` to ``out`` in ``fmt`` (``opts.images``: the images folder of ``curate release rebuild``, so
    that reference-only items go out with the pixels you hold). Returns a one-line summary."""
    return FORMATS[export_format(fmt)](Path(release), Path(out), opts)


def export_format(fmt: str) -> ExportFormat:
    try:
        return ExportFormat(fmt)
    except ValueError:
        known = ", ".join(f.value for f in ExportFormat)
        raise ParamsError(f"unknown export format {fmt!r} (known: {known})") from None
