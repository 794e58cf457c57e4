"""The ``release`` stage: build ``NAME-VERSION/`` once; an existing different version is never overwritten."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from curation.errors import InputError, VerificationError
from curation.jsonio import read_jsonl, sha256_file, write_json
from curation.params import ReleaseParams
from curation.paths import inside
from curation.records import output_lock, staged_dir, write_bytes, write_text
from curation.release import croissant
from curation.release.card import DIGEST_PLACEHOLDER, distribution_plot, render_card, template_validity, with_digest
from curation.release.read import features as release_features
from curation.release.rebuild import reference
from curation.release.terms import licence_class, spdx_of
from curation.report import Report
from curation.review.evidence import release_evidence
from curation.schema import Item, ReleaseManifest, ReleaseRow

MANIFEST = "manifest.json"


def _git(*args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _git_revision() -> str | None:
    out = _git("rev-parse", "HEAD")
    return out.decode().strip() or None if out else None


def _git_tree_state() -> dict[str, str | None]:
    """Whether the working tree differs from HEAD in tracked files (params.yaml, dvc.lock, templates, code), and a
    SHA-256 of exactly those uncommitted changes (``git diff HEAD --binary``), so a release built from a dirty tree
    says so and names what it was built from. Untracked files are not inputs of a stage and are left out."""
    diff = _git("diff", "HEAD", "--binary", "--no-ext-diff", "--no-color")
    if diff is None:
        return {"git_tree": None, "uncommitted_sha256": None}
    if not diff:
        return {"git_tree": "clean", "uncommitted_sha256": None}
    return {"git_tree": "dirty", "uncommitted_sha256": hashlib.sha256(diff).hexdigest()}


def _hash_file(path: Path) -> str | None:
    return sha256_file(path) if path.exists() else None


def _rows(items: list[Item], params: ReleaseParams, images_dir: Path, report: Report) -> list[ReleaseRow]:
    rows = []
    for item in items:
        mode = params.redistribution.get(item.source.value, "pixels")
        spdx = spdx_of(item.license)
        if mode == "pixels" and item.pixels_altered and spdx and "-ND-" in f"{spdx}-":
            # masked pixels are a derivative, which a no-derivatives licence does not let anyone share
            report.counts[f"no_derivatives:{params.no_derivatives}"] += 1
            mode = "exclude" if params.no_derivatives == "exclude" else "reference"
        if mode == "exclude":
            report.counts[f"excluded_by_licence:{item.source.value}"] += 1
            continue
        cls = licence_class(spdx, mode)
        if params.licence_filter and cls not in params.licence_filter:
            report.counts[f"licence_filtered_out:{cls}"] += 1
            continue
        image_files, refs = [], []
        bad = next((img for img in item.images if Path(img).is_symlink() or not inside(img, Path.cwd())), None)
        if bad is not None:  # an item's images come from the pipeline's own folders, never from elsewhere
            report.fail(item.item_id, "image_outside_project", f"{bad[:200]} is a symlink or lies outside the project "
                                                                "folder; not read")
            continue
        for n, img in enumerate(item.images):
            name = f"{item.item_id}_{n}.png"
            if mode == "pixels":
                shutil.copyfile(img, images_dir / name)
                image_files.append(name)
            else:  # the hash of the exact render: only a holder of the source can match it
                refs.append(reference(item.source.value, Path(img)))
        report.counts[f"redistribution:{mode}"] += 1
        rows.append(ReleaseRow.from_item(item, image_files=image_files, image_refs=refs,
                                         evidence=release_evidence(item, mode, image_files), license_spdx=spdx or "",
                                         license_class=licence_class(spdx, mode)))
    return rows


def _write_parquet(rows: list[ReleaseRow], root: Path, arrow_copy: bool = False) -> list[str]:
    """One Parquet file per split, written with `datasets` (features from ``ReleaseRow``), images embedded as bytes;
    with ``arrow_copy`` also the same splits saved with ``save_to_disk`` under ``hf/`` for
    ``datasets.load_from_disk``."""
    from datasets import Dataset

    features = release_features()
    written = []
    splits = {}
    for split in sorted({r.split for r in rows}):
        cols: dict[str, list[Any]] = {k: [] for k in features}
        for r in (r for r in rows if r.split == split):
            for k in features:
                if k == "images":
                    cols[k].append([{"bytes": (root / "images" / i.path).read_bytes(), "path": i.path}
                                    for i in r.images])
                else:
                    cols[k].append(getattr(r, k))
        ds = Dataset.from_dict(cols, features=features)
        rel = f"data/{split}-00000-of-00001.parquet"
        (root / "data").mkdir(parents=True, exist_ok=True)
        ds.to_parquet(str(root / rel))
        written.append(rel)
        splits[split] = ds
    if arrow_copy and splits:
        from datasets import DatasetDict
        from datasets.utils.logging import disable_progress_bar

        disable_progress_bar()
        DatasetDict(splits).save_to_disk(str(root / "hf"))
    return written


def _tree_digest(root: Path) -> str:
    """The release's content without its manifest (and with the card's manifest digest blanked): equal for a rebuild
    of the same items from another commit."""
    h = hashlib.sha256()
    for p in sorted(x for x in root.rglob("*") if x.is_file() and x.name != MANIFEST):
        h.update(p.relative_to(root).as_posix().encode())
        if p.relative_to(root).as_posix() == "README.md":
            h.update(hashlib.sha256(with_digest(p.read_text(encoding="utf-8"), DIGEST_PLACEHOLDER).encode()).digest())
        else:
            h.update(sha256_file(p).encode())
    return h.hexdigest()


def _validity_report(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("validity report not found (run the filter stage first)", path) from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("validity report is not valid JSON", path) from None
    if not isinstance(report, dict) or not isinstance(report.get("templates"), dict):
        raise InputError("not a validity report (no templates)", path)
    return report


def run(params: ReleaseParams, src: Path, releases: Path, report_path: Path | None = None,
        params_file: Path = Path("params.yaml"), lock_file: Path = Path("dvc.lock"),
        validity: Path | None = None) -> Report:
    src, releases = Path(src), Path(releases)
    if not (src / "items.jsonl").exists():
        raise InputError("no items.jsonl (run the review stage first)", src)
    name = release_name(params)
    dst = releases / name
    report = Report(stage="release")
    items = sorted(read_jsonl(src / "items.jsonl", Item), key=lambda i: i.item_id)
    report.inputs = len(items)
    gate = _admit(items, params, validity)
    with output_lock(dst):  # one writer per release: the staging folder below is removed only under the lock
        staging_parent = releases / f".{name}.building"
        shutil.rmtree(staging_parent, ignore_errors=True)
        with staged_dir(staging_parent) as staging:
            (staging / "images").mkdir(parents=True)
            rows = _rows(items, params, staging / "images", report)
            files = _write_parquet(rows, staging, params.arrow_copy)
            counts = _counts(rows)
            write_text(staging / "canary.txt", params.canary + "\n")
            write_bytes(staging / "assets" / "distribution.png", distribution_plot(counts))
            croissant.write(staging, params, name,
                            f"{name}: multimodal neurology reasoning benchmark, {len(rows)} items.",
                            sorted({f"https://spdx.org/licenses/{r.license_spdx}.html" if r.license_spdx else r.license
                                    for r in rows}))
            write_text(staging / "README.md", render_card(params, name, rows, counts, files, _checks(items),
                                                          _agreement(items), validity=gate))
            _verify_deid(staging, report, report_path)
            write_json(staging / MANIFEST, _manifest(params, staging, counts, rows, lock_file, params_file))
            # the card names the manifest's digest; the manifest holds the card's checksum with the placeholder
            card = (staging / "README.md").read_text(encoding="utf-8")
            write_text(staging / "README.md", with_digest(card, sha256_file(staging / MANIFEST)))
            if dst.exists():
                if not (dst / MANIFEST).exists() or _tree_digest(dst) != _tree_digest(staging):
                    raise VerificationError(
                        f"release {name} already exists with different content; bump release.version", dst)
                report.counts["unchanged_existing_release"] = 1
            report.outputs = len(rows)
        if dst.exists() and report.counts.get("unchanged_existing_release"):
            shutil.rmtree(staging_parent, ignore_errors=True)
        else:
            os.replace(staging_parent, dst)
    report.metrics["manifest_sha256"] = sha256_file(dst / MANIFEST)  # the release as it stands at dst
    report.metrics["release"] = name
    report.metrics["counts"] = counts
    report.write(report_path)
    return report


def release_name(params: ReleaseParams) -> str:
    """NAME-VERSION; a licence-filtered subset is its own release, NAME-CLASS[+CLASS]-VERSION."""
    subset = "+".join(sorted(params.licence_filter))
    return f"{params.name}-{subset}-{params.version}" if subset else f"{params.name}-{params.version}"


def _admit(items: list[Item], params: ReleaseParams, validity: Path | None) -> dict[str, Any]:
    """Refuse a release with unreviewed items (when review is required) or with a shipped template that beat chance
    without its image and was not blocked; returns the validity gate the card reports."""
    unreviewed = [i for i in items if i.status != "reviewed"]
    if params.require_review and unreviewed:
        raise VerificationError(f"{len(unreviewed)} items lack expert review and release.require_review is true")
    shipped = [i for i in items if params.redistribution.get(i.source.value, "pixels") != "exclude"]
    gate = template_validity(shipped, _validity_report(validity), params.allow_shortcut_templates)
    if gate["refused"]:
        raise VerificationError(f"template(s) {', '.join(gate['refused'])} beat chance blind or without the image by "
                                "more than filter.validity.max_blind_lift and were not blocked; block them or name "
                                "them in release.allow_shortcut_templates")
    return gate


def _counts(rows: list[ReleaseRow]) -> dict[str, dict[str, int]]:
    def count(values: Any) -> dict[str, int]:
        return dict(sorted(Counter(values).items()))

    return {
        "split": count(r.split for r in rows),
        "task_type": count(r.task_type for r in rows),
        "format": count(r.format for r in rows),
        "visual_dim": count(d for r in rows for d in r.visual_dims),
        "reasoning_dim": count(d for r in rows for d in r.reasoning_dims),
        "difficulty": count(r.difficulty or "unrated" for r in rows),
        "source": count(r.source for r in rows),
        "review_status": count(r.review_status for r in rows),
    }


def _checks(items: list[Item]) -> dict[str, int]:
    """How many items each model-based quality check ran on (the card says which ran)."""
    return dict(Counter(c for i in items for c in i.quality.ran()))


def _agreement(items: list[Item]) -> dict[str, Any]:
    from curation.review.merge import agreement

    ag = agreement({i.item_id: i.review.decisions for i in items if i.review and i.review.decisions})
    return {"doubly_reviewed": ag["doubly_reviewed"], "kappa": ag["cohen_kappa_verdict"],
            "alpha": ag["krippendorff_alpha_verdict"]}


def _verify_deid(staging: Path, report: Report, report_path: Path | None) -> None:
    """The de-identification verifier over everything the release would ship; a finding refuses the release."""
    from curation.deid.verify import verify_dir

    findings = verify_dir(staging)
    if findings:
        report.metrics["deid_findings"] = [f.line() for f in findings[:50]]
        report.write(report_path)
        raise VerificationError(f"de-identification verifier found {len(findings)} residual identifier(s); "
                                f"first: {findings[0].line()}")


def _manifest(params: ReleaseParams, staging: Path, counts: dict[str, dict[str, int]], rows: list[ReleaseRow],
              lock_file: Path, params_file: Path) -> ReleaseManifest:
    """Checksums of every file in the release, the counts, and what it was built from."""
    sums = {p.relative_to(staging).as_posix(): sha256_file(p)
            for p in sorted(x for x in staging.rglob("*") if x.is_file())}
    return ReleaseManifest(
        name=release_name(params).removesuffix(f"-{params.version}"), version=params.version,
        created_from={"git_revision": _git_revision(), **_git_tree_state(),
                      "dvc_lock_sha256": _hash_file(lock_file), "params_sha256": _hash_file(params_file)},
        counts=counts, files=sums, canary=params.canary,
        licenses=dict(sorted(Counter(r.license for r in rows).items())),
        reviewed_items=sum(r.review_status == "reviewed" for r in rows),
        unreviewed_items=sum(r.review_status != "reviewed" for r in rows),
    )
