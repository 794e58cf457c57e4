"""What every demo source writer uses: the demo's UID root, CSV tables, the grid, a participant's own anatomy
and the pose of the head at each visit."""

from __future__ import annotations

import csv
import functools
import io
import zlib
from pathlib import Path

import numpy as np
from pydicom.uid import generate_uid

from curation.demo.phantom import AFFINE, IDENTITY, Pose, Subject, ground_truth
from curation.records import write_text

UID_ROOT = "1.2.826.0.1.3680043.10.1447."  # demo-only root; every UID below derives from it


def demo_uid(*parts: object) -> str:
    return str(generate_uid(prefix=UID_ROOT, entropy_srcs=[str(p) for p in parts]))


def write_csv(path: Path, header: list[str], rows: list[dict[str, object]]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_text(path, buf.getvalue())


def demo_affine() -> np.ndarray:
    """The demo grid: MNI-aligned, 1.5 mm (an unmoved head's world coordinates are MNI coordinates)."""
    return AFFINE.copy()


def visit_pose(seed: int, visit: int) -> Pose:
    """How the head lies at a visit: as the template at baseline, turned and shifted (seeded) at later visits."""
    return IDENTITY if visit == 0 else Pose.seeded(seed + visit)


# the demo's typical participant: the middle of Subject.seeded's shape range, at the template's size
TYPICAL = Subject(shape=0.8)


@functools.lru_cache(maxsize=1)
def typical_volumes() -> dict[str, float]:
    """Target volumes (mm3) of the typical participant's brain without atrophy: what a normal demo head reads."""
    return ground_truth(subject=TYPICAL)["volumes_mm3"]  # type: ignore[return-value]


@functools.lru_cache(maxsize=16)
def head_size(subject: Subject) -> float:
    """A participant's brain volume over the typical participant's (no atrophy): how a head-size correction scales
    volumes."""
    own: dict[str, float] = ground_truth(subject=subject)["volumes_mm3"]  # type: ignore[assignment]
    return own["brain"] / typical_volumes()["brain"]


def participant_anatomy(subject_id: str) -> Subject:
    """A participant's own brain (shape and size, seeded by the participant's id: the same at every visit)."""
    return Subject.seeded(zlib.crc32(subject_id.encode()))
