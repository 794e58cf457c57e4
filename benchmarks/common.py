"""Shared plumbing for benchmarks: a scratch demo project, timing, and the results table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results.json"
TABLE = ROOT / "benchmarks" / "results.md"
# A benchmark child's own peak RSS in MB, as Python source for run_py code. Not ru_maxrss: Linux carries the
# parent's high-water mark across fork and exec into it, so a child started by a large runner reported the
# runner's size (718 MB for an ingest that peaks near 100 MB) and a memory ratio near 1 whatever it measured.
PEAK_RSS_MB = 'int(next(ln for ln in open("/proc/self/status") if ln.startswith("VmHWM")).split()[1]) / 1024'


@dataclass
class Figure:
    bench: str
    measure: str
    value: float
    unit: str
    anchor: str
    anchor_value: float
    ratio: float
    target: str = ""
    ok: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def timed(fn: Any, *args: Any, **kw: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn(*args, **kw)
    return time.perf_counter() - t, out


def run_py(code: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """Run Python code in a fresh interpreter (own memory figures, no warm imports); returns stdout."""
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd or ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed:\n{proc.stderr[-3000:]}")
    return proc.stdout


def demo_extract(work: Path) -> Path:
    """The demo corpus through ingest..extract once, in ``work``; returns the extract folder."""
    out = work / "extract"
    if (out / "cases.jsonl").exists():
        return out
    code = """
import os, sys
from pathlib import Path
os.environ.setdefault("CURATION_SECRET", "benchmark-secret")
from curation.demo.corpus import write_demo_corpus
from curation.deid.stage import run as deid
from curation.imaging.normalize import run as normalize
from curation.ingest import run as ingest
from curation.nlp.extract import run as extract
from curation.params import load_params
root, work = Path(sys.argv[1]), Path(sys.argv[2])
p = load_params(root / "params.yaml")
p.extract.lexicon = str(root / p.extract.lexicon)
os.chdir(work)
write_demo_corpus(work / "raw")
for s in p.sources:
    ingest(p.ingest, s, work / "raw" / s, work / "ingest" / s)
deid(p.deidentify, work / "ingest", work / "deid")
normalize(p.normalize, work / "deid", work / "normalize")
extract(p.extract, work / "normalize", work / "extract")
"""
    work.mkdir(parents=True, exist_ok=True)
    run_py(code, str(ROOT), str(work))
    return out


HEADER = ["| benchmark | measure | value | anchor | anchor value | ratio | target | ok |",
          "|---|---|---|---|---|---|---|---|"]


def table_rows(figures: list[Figure]) -> list[str]:
    rows = []
    for f in figures:
        ok = "" if f.ok is None else ("yes" if f.ok else "**no**")
        rows.append(f"| {f.bench} | {f.measure} | {f.value:.3g} {f.unit} | {f.anchor} | {f.anchor_value:.3g} {f.unit} "
                    f"| {f.ratio:.2f} | {f.target} | {ok} |")
    return rows


def write_results(figures: list[Figure]) -> None:
    RESULTS.write_text(json.dumps([asdict(f) for f in figures], indent=2) + "\n")
    lines = HEADER + table_rows(figures)
    TABLE.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
