"""Rebuild the images of reference-only items from a user's own copy of the source.

Sources whose data-use agreements forbid redistribution (ADNI, OASIS) ship in a release as references: for each image
the SHA-256 of the exact PNG the pipeline rendered, with its render name. A reference names no participant, image or
session: it can only be matched by someone who holds the data. ``curate release rebuild`` runs ingest, de-identification
and normalization on the user's download (same code and params as the release), hashes every render it makes, and
copies the ones whose hash a reference names to ``OUT/images/<item_id>_<n>.png``, the name a pixel release uses.
References that find no render are listed with their item, never guessed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from curation.errors import InputError
from curation.jsonio import sha256_file, write_json
from curation.params import Params
from curation.report import Report
from curation.schema import ReleaseRow


def reference(source: str, render: Path) -> str:
    """The ``image_refs`` entry for one rendered PNG (a JSON object as a string)."""
    return json.dumps({"source": source, "render": render.name, "sha256": sha256_file(render)}, sort_keys=True)


def rebuilt_images(row: ReleaseRow, rebuilt: Path | None) -> tuple[list[bytes], str | None]:
    """A reference-only row's pixels from ``rebuilt`` (the images folder of ``curate release rebuild``): every image
    must be there with the SHA-256 its reference names; else no pixels and the reason (evaluation and harness exports
    both count it)."""
    if rebuilt is None:
        return [], "no_pixels:reference_only_source"
    images = []
    for n, ref in enumerate(row.image_refs):
        path = Path(rebuilt) / f"{row.item_id}_{n}.png"
        if not path.exists():
            return [], "no_pixels:reference_only_source"
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != json.loads(ref).get("sha256"):
            return [], "rebuilt_image_mismatch"
        images.append(data)
    return images, None


def wanted(release: Path) -> dict[str, list[tuple[str, str, str]]]:
    """sha256 -> [(item_id, file name to write, source)] for every reference in the release's Parquet files."""
    from curation.release.read import row_columns

    out: dict[str, list[tuple[str, str, str]]] = {}
    for f, row in row_columns(release, ["item_id", "image_refs"]):  # no image bytes read
        for n, ref in enumerate(row["image_refs"] or []):
            try:
                r = json.loads(ref)
                out.setdefault(r["sha256"], []).append((row["item_id"], f"{row['item_id']}_{n}.png", r["source"]))
            except (ValueError, KeyError, TypeError):
                raise InputError(f"item {row['item_id']}: unreadable image reference {ref!r}", f) from None
    return out


def run(params: Params, release: Path, raw: dict[str, Path], out: Path, *, workers: int = 1,
        report_path: Path | None = None, secret: bytes | None = None) -> Report:
    """``secret``: the project key the release was built with (ids, date shifts and UIDs, so the renders match);
    the CLI passes the project's, None reads ``CURATION_SECRET``."""
    from curation.deid.stage import run as deidentify
    from curation.imaging.normalize import run as normalize
    from curation.ingest import run as ingest

    release, out = Path(release), Path(out)
    refs = wanted(release)
    sources_needed = sorted({s for entries in refs.values() for _, _, s in entries})
    report = Report(stage="release-rebuild")
    report.inputs = sum(len(v) for v in refs.values())
    missing_sources = [s for s in sources_needed if s not in raw]
    if not refs:
        report.metrics["note"] = "this release has no reference-only images"
    manifest_path = release / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.exists() else {}
    found: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="curate-rebuild-") as tmp:
        work = Path(tmp)
        for source in [s for s in sources_needed if s in raw]:
            if not Path(raw[source]).is_dir():
                raise InputError(f"raw folder for {source} does not exist", raw[source])
            # the raw folders are the user's own downloads, wherever they are: copied, never pointed into
            ingest(params.ingest.model_copy(update={"copy_files": True}), source, Path(raw[source]),
                   work / "ingest" / source, workers=workers, secret=secret)
        if (work / "ingest").exists():
            deidentify(params.deidentify, work / "ingest", work / "deid", workers=workers, secret=secret)
            normalize(params.normalize, work / "deid", work / "normalize", workers=workers)
            for png in sorted((work / "normalize" / "files").rglob("*.png")):
                digest = sha256_file(png)
                if digest in refs:
                    found.setdefault(digest, png)
        (out / "images").mkdir(parents=True, exist_ok=True)
        unmatched: list[dict[str, Any]] = []
        for digest, entries in sorted(refs.items()):
            for item_id, name, source in entries:
                if digest in found:
                    tmp_name = out / "images" / f".{name}.tmp"
                    shutil.copyfile(found[digest], tmp_name)
                    tmp_name.replace(out / "images" / name)
                    report.outputs += 1
                    report.counts[f"rebuilt:{source}"] += 1
                else:
                    reason = "source_not_given" if source in missing_sources else "no_matching_render"
                    report.counts[f"{reason}:{source}"] += 1
                    unmatched.append({"item_id": item_id, "file": name, "source": source, "reason": reason})
    summary = {"release": f"{manifest.get('name', release.name)}-{manifest.get('version', '')}".rstrip("-"),
               "release_git_revision": (manifest.get("created_from") or {}).get("git_revision"),
               "references": report.inputs, "rebuilt": report.outputs, "unmatched": unmatched}
    write_json(out / "rebuild.json", summary)
    report.metrics.update({k: v for k, v in summary.items() if k != "unmatched"})
    report.metrics["unmatched"] = len(unmatched)
    if missing_sources:
        report.metrics["sources_not_given"] = missing_sources
    report.write(report_path)
    return report
