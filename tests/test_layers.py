"""The layering contract (.importlinter): stages in pipeline order, the CLI on top, io and the shared modules at
the bottom. A new back-edge fails here with the import that makes it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.integration  # lint-imports in a subprocess


def test_import_layers_hold() -> None:
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    res = subprocess.run([*cmd, "--no-cache", str(ROOT / ".importlinter")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "0 broken" in res.stdout
