"""``python -m benchmarks.run [NAME ...]``: run the benchmarks, write results.json and results.md beside them."""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT, write_results

ALL = ["generate", "llm", "imaging", "anatomy", "ingest", "dvc", "text"]


def main(argv: list[str]) -> int:
    names = argv or ALL
    figures = []
    with tempfile.TemporaryDirectory(prefix="curation-bench-") as tmp:
        for name in names:
            mod = importlib.import_module(f"benchmarks.bench_{name}")
            print(f"== {name}", flush=True)
            figures += mod.run(Path(tmp) / name, ROOT)
    write_results(figures)
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
