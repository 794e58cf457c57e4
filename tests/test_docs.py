"""The documentation site (``mkdocs.yml``, ``docs/``) builds with ``--strict``: a broken link or anchor, or a page
left out of the nav, fails the tests, not a reader. Built in process (MkDocs' own API, as ``mkdocs build --strict``
does), so it stays in the unit layer and takes a second or two."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def build_site(config_file: Path, site_dir: Path) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    build(load_config(str(config_file), strict=True, site_dir=str(site_dir)))


def test_docs_site_builds_strict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")  # Material's notice about its successor, not a docs problem
    build_site(ROOT / "mkdocs.yml", tmp_path / "site")
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    built = [(tmp_path / "site" / p.removesuffix(".md").removesuffix("index")).joinpath("index.html") for p in pages]
    assert pages and all(b.is_file() for b in built), [p for p, b in zip(pages, built, strict=True) if not b.is_file()]


def test_a_broken_link_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The strict build above is a check: the same site with one link to a page that does not exist is refused."""
    from mkdocs.exceptions import Abort

    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    page = tmp_path / "docs" / "getting-started.md"
    page.write_text(page.read_text() + "\nSee [the missing page](no-such-page.md).\n")
    with pytest.raises(Abort, match="strict mode"):
        build_site(tmp_path / "mkdocs.yml", tmp_path / "site")
