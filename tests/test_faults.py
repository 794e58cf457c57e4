"""Faults a curator meets on a shared server, injected for real: a second run into the same output, a writer killed
while it holds the output, a disk that fills mid-stage (a small tmpfs), a read-only or unwritable output folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.errors import BusyError
from curation.jsonio import read_jsonl
from curation.records import lock_path, output_lock, staged_dir

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "CURATION_SECRET": "fault-test-secret"}
HOLD = ("import sys, time\nfrom curation.records import output_lock\n"
        "with output_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")


def curate(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "curation.cli", *args], cwd=cwd, env=env or ENV, text=True,
                          capture_output=True, timeout=120)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another process holding the writer lock of ``tmp_path/out``."""
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], env=ENV, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc, out
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.mark.integration  # subprocesses
def test_a_second_writer_is_refused_at_once_naming_the_holder(holder: tuple[subprocess.Popen[str], Path]) -> None:
    proc, out = holder
    out.mkdir()
    (out / "previous.txt").write_text("the first run's output\n")
    with pytest.raises(BusyError) as err, staged_dir(out):
        pytest.fail("the body ran while another process held the output")
    msg = str(err.value)
    assert msg.startswith(f"{out}: another run is writing here (pid {proc.pid} on ") and "\n" not in msg
    assert "-c" in msg  # the holder's command line
    assert (out / "previous.txt").read_text() == "the first run's output\n"
    assert not list(out.parent.glob(".out.*.building"))  # nothing was started


@pytest.mark.integration  # subprocesses
def test_a_lock_left_by_a_killed_writer_is_taken_over(holder: tuple[subprocess.Popen[str], Path]) -> None:
    proc, out = holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert lock_path(out).exists()  # the dead writer's lock file is still there
    with staged_dir(out) as staging:
        (staging / "cases.jsonl").write_text("{}\n")
    assert (out / "cases.jsonl").exists()
    assert not lock_path(out).exists()  # removed by the run that finished


def test_the_lock_is_reentrant_in_one_process_and_released(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with output_lock(out), staged_dir(out) as staging:  # the CLI and the stage it calls both lock one output
        (staging / "x").write_text("x")
    with output_lock(out):
        pass
    assert not lock_path(out).exists()


OASIS_HEADER = "ID,M/F,Hand,Age,Educ,SES,MMSE,CDR,eTIV,nWBV,ASF,Delay\n"


def oasis1_raw(raw: Path, n: int) -> Path:
    """A tiny OASIS-1 download: ``n`` sessions of one small Analyze scan each, and their table."""
    import nibabel as nib
    import numpy as np

    rows = []
    for i in range(1, n + 1):
        session = f"OAS1_{i:04d}_MR1"
        path = raw / session / "RAW" / f"{session}_mpr-1_anon.hdr"
        path.parent.mkdir(parents=True, exist_ok=True)
        nib.save(nib.AnalyzeImage(np.full((16, 16, 16), i, dtype=np.int16), np.eye(4)), str(path))
        rows.append(f"{session},F,R,{60 + i % 30},2,3,29,0,1344,0.743,1.306,N/A\n")
    (raw / "oasis_cross-sectional.csv").write_text(OASIS_HEADER + "".join(rows))
    return raw


def consistent(out: Path, cwd: Path) -> int:
    """Every file the output's cases name exists (the issue's race left 549 of 1,199 missing); returns how many."""
    files = [f for case in read_jsonl(out / "cases.jsonl") for v in case["visits"] for s in v["series"]
             for f in s["files"]]
    assert files and all((cwd / f).is_file() for f in files)
    return len(files)


@pytest.mark.integration  # subprocesses
def test_curate_ingest_into_a_folder_another_run_holds_exits_8(holder: tuple[subprocess.Popen[str], Path],
                                                                 tmp_path: Path) -> None:
    proc, out = holder
    oasis1_raw(tmp_path / "raw", 2)
    res = curate("ingest", "oasis1", "raw", "out", "--params", str(ROOT / "params.yaml"), cwd=tmp_path)
    assert res.returncode == 8, res.stderr
    assert res.stderr.startswith(f"error: out: another run is writing here (pid {proc.pid} on ")
    assert res.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.integration  # subprocesses
def test_a_run_started_while_another_builds_the_same_output_is_refused(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: a second run deleted the first's staging folder as a "stale leftover" and both exited 0 with
    an output naming files that do not exist. Here the second starts while the first's staging folder exists."""
    import time

    from curation.ingest import run as ingest

    from .factories import project_params

    oasis1_raw(tmp_path / "raw", 80)
    monkeypatch.chdir(tmp_path)
    first = subprocess.Popen([sys.executable, "-m", "curation.cli", "ingest", "oasis1", "raw", "out", "--params",
                              str(ROOT / "params.yaml")], cwd=tmp_path, env=ENV, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.*.building")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert first.poll() is None, "the first run ended before the test could start the second"
    with pytest.raises(BusyError, match=rf"^out: another run is writing here \(pid {first.pid} on .*`curate ingest "):
        ingest(project_params().ingest, "oasis1", tmp_path / "raw", Path("out"), secret=b"second")
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and "80 out" in out, err
    assert consistent(tmp_path / "out", tmp_path) == 160  # a .hdr and an .img a scan
    assert not list(tmp_path.glob(".out.*"))  # no staging folder or lock left behind


# ------------------------------------------------------------------ a disk that fills: a small tmpfs, really full
def _unshare() -> list[str] | None:
    """A command prefix that runs in a private mount namespace where a tmpfs can be mounted (None: not here)."""
    import shutil

    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "-rm"], ["unshare", "-m"]):
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                                "mount -t tmpfs -o size=64k tmpfs \"$TMPDIR\""], capture_output=True,
                               env={**ENV, "TMPDIR": "/tmp"})
        if probe.returncode == 0:
            return prefix
    return None


UNSHARE = _unshare()
needs_tmpfs = pytest.mark.skipif(UNSHARE is None, reason="no private mount namespace to mount a small tmpfs in")

# Runs inside the namespace: mounts a tmpfs of SIZE at DISK, then runs the scenario's curate commands there. The
# test reads back what happened (exit codes, stderr, the output's files before and after) as JSON.
SCENARIO = r'''
import hashlib, json, os, subprocess, sys
disk, size, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", disk], check=True)
os.chdir(disk)

def tree(folder):
    out = {}
    for base, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(base, f)
            out[os.path.relpath(p, disk)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out

results = []
for step in steps:
    if step[0] == "fill":  # leave about step[1] bytes free
        st = os.statvfs(disk)
        with open("ballast", "wb") as fh:
            fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - step[1]))
        continue
    if step[0] == "readonly":
        subprocess.run(["mount", "-o", "remount,ro", disk], check=True)
        continue
    if step[0] == "tree":
        results.append({"tree": tree(step[1]), "hidden": sorted(n for n in os.listdir(disk) if n.startswith("."))})
        continue
    res = subprocess.run([sys.executable, "-m", "curation.cli", *step], capture_output=True, text=True)
    results.append({"rc": res.returncode, "stderr": res.stderr, "stdout": res.stdout})
print(json.dumps(results))
'''


def in_tmpfs(tmp_path: Path, size: str, steps: list[list[object]]) -> list[dict[str, object]]:
    import json

    assert UNSHARE is not None
    disk = tmp_path / "disk"
    disk.mkdir(exist_ok=True)
    res = subprocess.run([*UNSHARE, sys.executable, "-c", SCENARIO, str(disk), size, json.dumps(steps)],
                         env=ENV, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def dicom_inputs(folder: Path, n: int) -> Path:
    """``n`` real MR slices (pydicom's MR_small), each in its own file."""
    import pydicom
    from pydicom.data import get_testdata_file

    folder.mkdir(parents=True, exist_ok=True)
    ds = pydicom.dcmread(get_testdata_file("MR_small.dcm"))
    for i in range(n):
        ds.SOPInstanceUID = f"1.2.826.0.1.3680043.8.498.{i + 1}"
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.save_as(folder / f"slice{i:03d}.dcm")
    return folder


def one_line_error(res: dict[str, object], code: int, *parts: str) -> str:
    err = str(res["stderr"])
    assert res["rc"] == code, res
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for part in parts:
        assert part in err, err
    return err


@pytest.mark.integration  # subprocesses
@needs_tmpfs
def test_deid_dicom_on_a_disk_that_fills_fails_and_keeps_the_previous_output(tmp_path: Path) -> None:
    """The issue's case: `curate deid dicom` exited 0 with "16 in, 9 out" and mixed new files with the old."""
    dicom_inputs(tmp_path / "in", 16)
    params = str(ROOT / "params.yaml")
    first = ["deid", "dicom", str(tmp_path / "in"), "out", "--params", params]
    steps: list[list[object]] = [first, ["tree", "out"], ["fill", 48 * 1024], first, ["tree", "out"],
                                 ["deid", "dicom", str(tmp_path / "in"), "out", "--params", params, "--workers", "2"],
                                 ["tree", "out"]]
    ok, before, failed, after, failed_pool, after_pool = in_tmpfs(tmp_path, "4m", steps)
    assert ok["rc"] == 0 and "16 in, 16 out" in str(ok["stdout"]), ok
    assert len(before["tree"]) == 18  # 16 files, audit.jsonl, quarantine.jsonl
    for res in (failed, failed_pool):
        one_line_error(res, 9, "error: out: cannot write (no space left on the device at ",
                       "the previous output is as it was")
    assert after == before and after_pool == before  # the same files, byte for byte; no staging folder, no lock


# ------------------------------------------------------------------ a disk that fills, in this process (CI)
def fill_disk(monkeypatch: pytest.MonkeyPatch, root: Path, free: int) -> None:
    """The folder ``root`` as on a disk with ``free`` bytes left, in this process: a write to a file under it, through
    ``os.fdopen`` or ``os.pwrite`` (the writers ``curation.records`` uses: atomic files, the lock's holder line),
    fails past them with ENOSPC, as a full disk fails it. For CI, where the tmpfs tests above skip (no private mount
    namespace); what the code does with the error is the code's own, from ``writing`` up to the CLI."""
    import errno
    import io

    left = [free]
    prefix = f"{root.resolve()}{os.sep}"
    real_fdopen, real_pwrite = os.fdopen, os.pwrite

    def under(fd: int) -> bool:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(prefix)

    def spend(n: int) -> None:
        if n > left[0]:
            left[0] = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        left[0] -= n

    class Filling(io.FileIO):
        def write(self, b: object) -> int:
            spend(memoryview(b).nbytes)  # type: ignore[arg-type]
            return super().write(b)  # type: ignore[arg-type]

    def fdopen(fd: int, mode: str = "r", buffering: int = -1, encoding: str | None = None, *args: object,
               **kwargs: object) -> object:
        if not set(mode) & set("wa+") or not under(fd):
            return real_fdopen(fd, mode, buffering, encoding, *args, **kwargs)  # type: ignore[call-overload]
        buffered = io.BufferedWriter(Filling(fd, "w"))
        return buffered if "b" in mode else io.TextIOWrapper(buffered, encoding=encoding or "utf-8")

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        if under(fd):
            spend(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "fdopen", fdopen)
    monkeypatch.setattr(os, "pwrite", pwrite)


def files_under(folder: Path) -> dict[str, str]:
    """Every file under ``folder``, hidden ones (a staging folder, a lock) included, with its content hash."""
    import hashlib

    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("free", "where"), [(0, ""), (30_000, " at slice00")])
def test_deid_dicom_on_a_disk_that_fills_fails_in_one_line_and_keeps_the_previous_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free: int, where: str) -> None:
    """Issue 51, where CI runs it: `curate deid dicom` on a disk that filled exited 0 ("16 in, 9 out; failed 7") and
    left OUT mixing the previous run's files with new ones. A disk full before the lock is written (0 bytes free), and
    one that fills after a few slices (each about 10 kB): exit 9, one line naming OUT, the file and the fault, and
    OUT as the first run left it, with no staging folder or lock beside it."""
    from typer.testing import CliRunner

    from curation.cli import app

    dicom_inputs(tmp_path / "in", 16)
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.chdir(disk)
    cmd = ["deid", "dicom", str(tmp_path / "in"), "out", "--params", str(ROOT / "params.yaml")]
    ok = CliRunner().invoke(app, cmd)
    assert ok.exit_code == 0 and "16 in, 16 out" in ok.output, ok.output
    before = files_under(disk)
    assert len(before) == 18  # 16 files, audit.jsonl, quarantine.jsonl
    (tmp_path / "in" / "slice000.dcm").write_bytes((tmp_path / "in" / "slice001.dcm").read_bytes())  # a rerun differs
    fill_disk(monkeypatch, disk, free)
    failed = CliRunner().invoke(app, cmd)
    lines = failed.output.strip().splitlines()
    assert failed.exit_code == 9 and len(lines) == 1 and "Traceback" not in failed.output, failed.output
    assert lines[0].startswith(f"error: out: cannot write (no space left on the device{where}"), lines[0]
    assert lines[0].endswith("as it was")
    assert files_under(disk) == before


def copying_params(tmp_path: Path) -> str:
    """The project's params with ``ingest.copy_files: true``: these faults strike while ingest copies (the project
    points into data/raw instead, #33), and the raw folder may lie outside the folder the stages write to."""
    path = tmp_path / "params.yaml"
    path.write_text((ROOT / "params.yaml").read_text().replace("copy_files: false", "copy_files: true", 1))
    return str(path)


@pytest.mark.integration  # subprocesses
@needs_tmpfs
def test_ingest_and_deidentify_stage_on_a_full_disk_blame_the_disk_not_the_inputs(tmp_path: Path) -> None:
    """The deidentify stage failed but said "7 of 16 inputs failed"; ingest copying files into a full disk."""
    oasis1_raw(tmp_path / "raw", 6)
    params = copying_params(tmp_path)  # the copy into the output is what fills the disk
    ingest = ["ingest", "oasis1", str(tmp_path / "raw"), "ingest/oasis1", "--params", params]
    deid = ["deid", "run", "ingest", "deid", "--params", params]
    steps: list[list[object]] = [ingest, deid, ["tree", "ingest"], ["tree", "deid"], ["fill", 40 * 1024], ingest, deid,
                                 ["tree", "ingest"], ["tree", "deid"]]
    ok_i, ok_d, ing, dei, bad_i, bad_d, ing2, dei2 = in_tmpfs(tmp_path, "8m", steps)
    assert ok_i["rc"] == 0 and ok_d["rc"] == 0, (ok_i, ok_d)
    one_line_error(bad_i, 9, "error: ingest/oasis1: cannot write (no space left on the device at ")
    one_line_error(bad_d, 9, "error: deid: cannot write (no space left on the device at ")
    assert "inputs failed" not in str(bad_d["stderr"])
    assert ing2 == ing and dei2 == dei


@pytest.mark.integration  # subprocesses
@needs_tmpfs
def test_a_read_only_output_fails_in_one_line(tmp_path: Path) -> None:
    oasis1_raw(tmp_path / "raw", 2)
    ingest = ["ingest", "oasis1", str(tmp_path / "raw"), "out", "--params", copying_params(tmp_path)]
    ok, before, failed, after = in_tmpfs(tmp_path, "4m", [ingest, ["tree", "out"], ["readonly"], ingest,
                                                              ["tree", "out"]])
    assert ok["rc"] == 0
    one_line_error(failed, 9, "read-only filesystem")
    assert after == before


@pytest.mark.integration  # subprocesses
def test_a_writer_killed_mid_stage_leaves_the_previous_output_and_its_lock_is_taken_over(tmp_path: Path) -> None:
    import time

    oasis1_raw(tmp_path / "raw", 80)
    cmd = ["ingest", "oasis1", "raw", "out", "--params", copying_params(tmp_path)]  # killed while it copies
    assert curate(*cmd, cwd=tmp_path).returncode == 0
    before = (tmp_path / "out" / "cases.jsonl").read_bytes()
    (tmp_path / "raw" / "OAS1_0001_MR1" / "RAW" / "OAS1_0001_MR1_mpr-1_anon.img").unlink()  # the rerun differs
    proc = subprocess.Popen([sys.executable, "-m", "curation.cli", *cmd], cwd=tmp_path, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".out.*.building/files")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (tmp_path / "out" / "cases.jsonl").read_bytes() == before and lock_path(tmp_path / "out").exists()
    res = curate(*cmd, cwd=tmp_path)  # the dead writer's lock and staging folder are taken over and cleaned
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "cases.jsonl").read_bytes() != before and consistent(tmp_path / "out", tmp_path)
    assert not list(tmp_path.glob(".out.*"))
