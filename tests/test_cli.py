from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from curation.cli import app

runner = CliRunner()


def _commands(group: Any, prefix: list[str]) -> list[list[str]]:
    out = []
    for name, cmd in group.commands.items():
        out.append(prefix + [name])
        if hasattr(cmd, "commands"):
            out += _commands(cmd, prefix + [name])
    return out


def test_every_command_has_help() -> None:
    root = typer.main.get_command(app)
    commands = _commands(root, [])
    assert len(commands) >= 18
    for cmd in commands:
        result = runner.invoke(app, [*cmd, "--help"])
        assert result.exit_code == 0, (cmd, result.output)
        assert "Usage" in result.output
        assert (root.get_command(None, cmd[0]).help or "").strip(), cmd  # type: ignore[union-attr]


def test_missing_input_is_one_line_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", "adni", str(tmp_path / "nope"), str(tmp_path / "out")])
    assert result.exit_code == 3
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == [f"error: {tmp_path / 'nope'}: raw folder does not exist or is not a folder"]
    result = runner.invoke(app, ["ingest", "mimic", str(tmp_path), str(tmp_path / "out")])
    assert result.exit_code == 3
    assert "unknown source 'mimic'" in result.output


def test_bad_params_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("ingest:\n  max_failure_rate: 7\n")
    result = runner.invoke(app, ["ingest", "adni", str(tmp_path), str(tmp_path / "o"), "--params", str(bad)])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {bad}: ingest.max_failure_rate")


def test_stage_secret_lives_in_the_project_of_params(tmp_path: Path, monkeypatch: Any) -> None:
    """Without CURATION_SECRET a stage command keeps the secret under the folder of --params, never the cwd."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "params.yaml").write_text((Path(__file__).resolve().parents[1] / "params.yaml").read_text())
    monkeypatch.delenv("CURATION_SECRET", raising=False)
    monkeypatch.chdir(elsewhere)
    (elsewhere / "items").mkdir()
    (elsewhere / "items" / "items.jsonl").write_text("")
    result = runner.invoke(app, ["review", "merge", "items", "none.json", "out", "--params",
                                 str(project / "params.yaml")])
    assert result.exit_code == 0, result.output
    assert (project / ".curation" / "secret").is_file()
    assert not (elsewhere / ".curation").exists()


def test_stage_commands_share_their_options() -> None:
    """stage_command adds --params and --report to every stage (and --workers/--scheduler to the parallel ones)."""
    root = typer.main.get_command(app)
    for path, extra in ((["ingest"], {"--workers", "--scheduler"}), (["deid", "run"], {"--workers", "--scheduler"}),
                        (["normalize"], {"--workers", "--scheduler"}), (["extract"], set()), (["generate"], set()),
                        (["filter"], {"--validity", "--validity-plot"}), (["review", "merge"], set()),
                        (["release", "build"], {"--validity", "--licence-filter"}),
                        (["release", "rebuild"], {"--workers", "--raw"})):
        cmd: Any = root
        for name in path:
            cmd = cmd.get_command(None, name)
        opts = {o for p in cmd.params for o in p.opts if o.startswith("--")}
        assert opts == {"--params", "--report", *extra}, (path, opts)


def test_render_reads_the_contrast_from_a_bids_like_file_name() -> None:
    """`curate imaging render` without --sequence: the file name's suffix picks the registration template."""
    from curation.ingest.sequences import sequence_from_name

    named = {"sub-01_ses-1_T1w.nii.gz": "T1w", "sub-01_PDw.nii.gz": "PD", "head_PD.nii.gz": "PD",
             "subject_t2w.nii": "T2w", "sub-01_FLAIR.nii.gz": "FLAIR", "sub-01_dwi.nii.gz": "DWI",
             "seg3d_mr.nii.gz": None, "T1.nii.gz": None, "scan.hdr": None}
    assert {n: sequence_from_name(Path(n)) for n in named} == named
