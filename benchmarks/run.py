"""``python -m benchmarks.run [NAME ...]``: run the benchmarks, write results.json and results.md beside them."""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, Figure, table_rows, write_results

ALL = ["generate", "llm", "imaging", "anatomy", "ingest", "dvc", "text"]


def main(argv: list[str]) -> int:
    names = argv or ALL
    figures = []
    with tempfile.TemporaryDirectory(prefix="curation-bench-") as tmp:
        for name in names:
            mod = importlib.import_module(f"benchmarks.bench_{name}")
            print(f"== {name}", flush=True)
            try:
                made = mod.run(Path(tmp) / name, ROOT)
            except Exception as exc:  # one broken bench is a failed figure; the others' figures are still written
                error = f"{type(exc).__name__}: {str(exc).strip()[-2000:]}"
                print(f"{name}: failed: {error}", file=sys.stderr, flush=True)
                made = [Figure(name, "the benchmark ran", 0.0, "", "", 0.0, 0.0, "runs to the end", False,
                               {"error": error})]
            print("\n".join(table_rows(made)), flush=True)  # a long run shows each bench as it ends
            figures += made
    write_results(figures)
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
