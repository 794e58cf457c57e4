"""``curate release verify``: checksums, manifest/card consistency, canary, schema."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from curation.records import read_json, sha256_file
from curation.schema import ReleaseManifest

REQUIRED_COLUMNS = {"item_id", "case_id", "question", "options", "answer", "images", "task_type", "visual_dims",
                    "reasoning_dims", "license"}


def verify_release(root: Path) -> list[str]:
    root = Path(root)
    problems: list[str] = []
    mpath = root / "manifest.json"
    if not mpath.exists():
        return [f"{mpath}: manifest.json missing"]
    try:
        manifest = ReleaseManifest.model_validate(read_json(mpath))
    except (ValidationError, Exception) as exc:
        return [f"{mpath}: invalid manifest ({type(exc).__name__})"]
    present = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"}
    for rel, digest in sorted(manifest.files.items()):
        p = root / rel
        if not p.exists():
            problems.append(f"{rel}: listed in manifest but missing")
        elif sha256_file(p) != digest:
            problems.append(f"{rel}: checksum mismatch")
    for rel in sorted(present - set(manifest.files)):
        problems.append(f"{rel}: not listed in manifest")
    cro = root / "croissant.json"
    if not cro.exists():
        problems.append("croissant.json: missing")
    else:
        try:
            meta = read_json(cro)
            if meta.get("name") != f"{manifest.name}-{manifest.version}":
                problems.append(f"croissant.json: name {meta.get('name')!r} does not match the manifest")
        except Exception as exc:
            problems.append(f"croissant.json: not valid JSON ({type(exc).__name__})")
    card = root / "README.md"
    if card.exists() and manifest.canary not in card.read_text(encoding="utf-8", errors="replace"):
        problems.append("README.md: canary string missing")
    try:
        import pyarrow.parquet as pq

        total = 0
        for rel in sorted(r for r in manifest.files if r.endswith(".parquet")):
            if not (root / rel).exists():
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
