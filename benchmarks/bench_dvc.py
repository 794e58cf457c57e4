"""``dvc repro`` on the demo project when nothing changed, against the time to check the same outputs' hashes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import Figure


def run(work: Path, root: Path) -> list[Figure]:
    proj = work / "project"
    subprocess.run(["git", "clone", "-q", str(root), str(proj)], check=True)
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "CURATION_SECRET": "benchmark-secret", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    bindir = Path(sys.executable).parent

    def sh(*cmd: str) -> float:
        t = time.perf_counter()
        p = subprocess.run(list(cmd), cwd=proj, env=env, capture_output=True, text=True, check=False)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stdout[-1500:]}\n{p.stderr[-1500:]}")
        return time.perf_counter() - t

    sh(str(bindir / "curate"), "demo-data", "data/raw")
    full = sh(str(bindir / "dvc"), "repro", "-q")
    noop = sh(str(bindir / "dvc"), "repro", "-q")
    status = sh(str(bindir / "dvc"), "status", "-q")
    shutil.rmtree(proj, ignore_errors=True)
    return [
        Figure("dvc", "dvc repro with nothing changed (demo project)", noop, "s", "full dvc repro of the demo", full,
               noop / full, "<< 1", noop < 0.2 * full, {"dvc_status_s": round(status, 2)}),
    ]
