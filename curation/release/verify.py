"""``curate release verify``: checksums, manifest/card consistency, canary, schema."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from curation.jsonio import read_json, sha256_file
from curation.paths import inside
from curation.release.card import DIGEST_PLACEHOLDER, stated_digest, with_digest
from curation.schema import ReleaseManifest, ReleaseRow

REQUIRED_COLUMNS = set(ReleaseRow.columns())


def _listed_path_problem(root: Path, rel: str) -> str | None:
    """Why a manifest entry must not be opened: a path out of the release, or a symlink on the way."""
    parts = PurePosixPath(rel).parts
    if not rel or PurePosixPath(rel).is_absolute() or "\\" in rel or any(p in ("..", "") for p in parts) \
            or ":" in (parts[0] if parts else ""):
        return "path outside the release; not read"
    p = root
    for part in parts:
        p = p / part
        if p.is_symlink():
            return "is a symlink; a release holds plain files only" if p == root / rel else \
                f"lies under a symlink ({p.relative_to(root).as_posix()}); not read"
    if not inside(root / rel, root):
        return "path outside the release; not read"
    return None


def _tree(root: Path) -> tuple[set[str], list[str]]:
    """Plain files in the release (symlinks never followed) and every symlink in it."""
    files, links = set(), []
    for folder, dirs, names in os.walk(root, followlinks=False):
        base = Path(folder)
        for d in list(dirs):
            if (base / d).is_symlink():
                links.append((base / d).relative_to(root).as_posix())
                dirs.remove(d)
        for n in names:
            p = base / n
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                links.append(rel)
            elif rel != "manifest.json":
                files.add(rel)
    return files, sorted(links)


def manifest_digest(root: Path) -> str:
    return sha256_file(Path(root) / "manifest.json")


def verify_release(root: Path, digest: str | None = None) -> list[str]:
    """Every problem found, one line each (empty: verified). ``digest``: the manifest's SHA-256 as published with
    the release; without it, a release whose files and manifest were changed together is only caught when the card
    still names the old manifest."""
    root = Path(root)
    problems: list[str] = []
    mpath = root / "manifest.json"
    if mpath.is_symlink():
        return [f"{mpath}: manifest.json is a symlink; not read"]
    if not mpath.exists():
        return [f"{mpath}: manifest.json missing"]
    actual = manifest_digest(root)
    if digest is not None and actual != digest.strip().lower():
        problems.append(f"manifest.json: SHA-256 {actual} is not the pinned digest {digest.strip().lower()}")
    try:
        manifest = ReleaseManifest.model_validate(read_json(mpath))
    except (ValidationError, Exception) as exc:
        return [*problems, f"{mpath}: invalid manifest ({type(exc).__name__})"]
    present, links = _tree(root)
    for rel in links:
        problems.append(f"{rel}: is a symlink; a release holds plain files only")
    for rel, want in sorted(manifest.files.items()):
        why = _listed_path_problem(root, rel)
        if why:
            if not why.startswith("is a symlink"):  # a listed symlink is reported once, above
                problems.append(f"{rel}: {why}")
            continue
        p = root / rel
        if not p.is_file():
            problems.append(f"{rel}: listed in manifest but missing")
            continue
        if rel == "README.md":
            text = p.read_text(encoding="utf-8", errors="replace")
            stated = stated_digest(text)
            if stated is None:
                problems.append("README.md: names no manifest SHA-256")
            elif stated != actual:
                problems.append(f"README.md: names manifest SHA-256 {stated}, but manifest.json has {actual}")
            got = hashlib.sha256(with_digest(text, DIGEST_PLACEHOLDER).encode("utf-8")).hexdigest()
        else:
            got = sha256_file(p)
        if got != want:
            problems.append(f"{rel}: checksum mismatch")
    for rel in sorted(present - set(manifest.files)):
        problems.append(f"{rel}: not listed in manifest")
    cro = root / "croissant.json"
    if cro.is_symlink():
        pass  # reported above, never read
    elif not cro.exists():
        problems.append("croissant.json: missing")
    else:
        try:
            meta = read_json(cro)
            if meta.get("name") != f"{manifest.name}-{manifest.version}":
                problems.append(f"croissant.json: name {meta.get('name')!r} does not match the manifest")
        except Exception as exc:
            problems.append(f"croissant.json: not valid JSON ({type(exc).__name__})")
    card = root / "README.md"
    if card.exists() and not card.is_symlink() and manifest.canary not in card.read_text(encoding="utf-8",
                                                                                          errors="replace"):
        problems.append("README.md: canary string missing")
    try:
        import pyarrow.parquet as pq

        total = 0
        for rel in sorted(r for r in manifest.files if r.endswith(".parquet")):
            if _listed_path_problem(root, rel) or not (root / rel).exists():
                continue
            schema = pq.read_schema(root / rel)
            missing = REQUIRED_COLUMNS - set(schema.names)
            if missing:
                problems.append(f"{rel}: missing columns {', '.join(sorted(missing))}")
            total += pq.read_metadata(root / rel).num_rows
        if total != sum(manifest.counts.get("split", {}).values()):
            problems.append(f"data: {total} rows but manifest counts {sum(manifest.counts.get('split', {}).values())}")
    except Exception as exc:
        problems.append(f"data: unreadable Parquet ({type(exc).__name__}: {exc})")
    return problems
