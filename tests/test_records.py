from __future__ import annotations

import json
from pathlib import Path

import pytest

from curation.errors import RecordError
from curation.jsonio import content_hash, read_jsonl, read_jsonl_ordered, write_jsonl
from curation.pseudonyms import pseudonym
from curation.records import atomic_open, staged_dir, write_text
from curation.schema import Case, SourceName


def test_atomic_write_keeps_old_content_when_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError), atomic_open(target) as fh:
        fh.write("half")
        raise RuntimeError("killed")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_staged_dir_swaps_only_on_success(tmp_path: Path) -> None:
    dst = tmp_path / "stage"
    with staged_dir(dst) as s:
        (s / "a").write_text("1")
    with pytest.raises(ValueError), staged_dir(dst) as s:
        (s / "b").write_text("2")
        raise ValueError
    assert sorted(p.name for p in dst.iterdir()) == ["a"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stage"]


def test_jsonl_round_trip_and_truncated_line(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    case = Case(case_id="adni-000000000001", source=SourceName.adni, license="x")
    assert write_jsonl(path, [case, case]) == 2
    assert [c.case_id for c in read_jsonl(path, Case)] == ["adni-000000000001"] * 2
    path.write_text(path.read_text() + '{"case_id": "trunc')
    with pytest.raises(RecordError, match=r"cases.jsonl: line 3: truncated record"):
        list(read_jsonl(path, Case))
    path.write_text('{"case_id": 1}\n')
    with pytest.raises(RecordError, match="line 1"):
        list(read_jsonl(path, Case))


def test_jsonl_read_in_key_order(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    rows = [{"case_id": "c", "origin": "MedPix MPX20"}, {"case_id": "a", "origin": None},
            {"case_id": "b", "origin": "MedPix MPX10"}, {"case_id": "d", "origin": "MedPix MPX10"}]
    path.write_text("".join(json.dumps(r) + "\n" + ("\n" if n == 1 else "") for n, r in enumerate(rows)))
    by_origin = [r["case_id"] for r in read_jsonl_ordered(path, lambda r: (r["origin"] is None, r["origin"] or ""))]
    assert by_origin == ["b", "d", "c", "a"]  # equal keys in the file's order, a blank line skipped
    path.write_text(path.read_text() + '{"case_id": "trunc')
    with pytest.raises(RecordError, match=r"cases.jsonl: line 6: truncated record"):
        list(read_jsonl_ordered(path, lambda r: r["case_id"]))
    path.write_text('{"case_id": "x", "source": "medpix", "license": "y"}\n{"case_id": 1}\n')
    with pytest.raises(RecordError, match="line 2"):
        list(read_jsonl_ordered(path, lambda r: str(r["case_id"]), Case))


def test_ids_are_stable_and_keyed() -> None:
    a = pseudonym("adni", "027_S_0074", secret=b"one")
    assert a == pseudonym("adni", "027_S_0074", secret=b"one")
    assert a != pseudonym("adni", "027_S_0074", secret=b"two")
    assert a != pseudonym("adni", "033_S_0511", secret=b"one")
    assert "027" not in a
    assert content_hash({"b": 1, "a": [1, 2]}) == content_hash({"a": [1, 2], "b": 1})


def test_secret_file_created_once_and_never_in_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curation import pseudonyms

    monkeypatch.delenv("CURATION_SECRET", raising=False)
    monkeypatch.chdir(tmp_path / "..")
    first = pseudonyms.project_secret(tmp_path)  # under the project root given, not the working directory
    assert pseudonyms.project_secret(tmp_path) == first
    assert (tmp_path / ".curation" / ".gitignore").read_text() == "*\n"
    assert not (tmp_path.parent / ".curation" / "secret").exists()
    out = tmp_path / "x.jsonl"
    write_jsonl(out, [{"id": pseudonyms.pseudonym("adni", "p", secret=first)}])
    assert first.decode() not in out.read_text()
    json.loads(out.read_text())


def test_no_secret_file_made_without_a_project_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from curation import pseudonyms
    from curation.errors import ParamsError

    monkeypatch.delenv("CURATION_SECRET", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ParamsError, match="no project secret"):
        pseudonyms.project_secret()
    with pytest.raises(ParamsError):
        pseudonyms.keyed_hash("reviewer", "x")  # library code reads only the environment
    assert not (tmp_path / ".curation").exists()
    monkeypatch.setenv("CURATION_SECRET", "s")
    assert pseudonyms.project_secret() == b"s" == pseudonyms.project_secret(tmp_path)
    assert not (tmp_path / ".curation").exists()
