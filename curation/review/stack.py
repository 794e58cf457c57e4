"""Slice stacks for review: each series an item shows, cut from its normalized NIfTI with one window for the whole
stack, so a reviewer pages through the volume instead of judging one thumbnail.

A stack holds every ``stride``-th slice through the brain in the evidence's plane plus every slice within
``target_margin`` of the evidence slice; the evidence slice comes first and is marked (a yellow frame). Every slice
carries its plane, index and world position in a corner, as a PACS viewer shows them. Files are content-addressed
(series volume, window, plane, size, layout version), so items that show the same series share the files and a
re-normalized series gets new ones.

``geometry`` and ``to_volume`` map a point of a slice PNG (fractions of its width and height, as Label Studio
records regions) back to voxel indices and to world (RAS, mm) coordinates through the volume's affine.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curation.jsonio import read_jsonl, sha256_file
from curation.params import StackParams
from curation.schema import Case, Item, Series

VERSION = "1"
PLANES = ("axial", "coronal", "sagittal")
PLANE_AXIS = {"sagittal": 0, "coronal": 1, "axial": 2}
AXIS_LETTER = {0: "x", 1: "y", 2: "z"}


@dataclass
class SeriesRef:
    series: Series
    visit_id: str | None


@dataclass
class Stack:
    """One series' stack as the task carries it: the page images and what each page is."""

    series_id: str
    visit_id: str | None
    sequence: str | None
    plane: str
    shape: list[int]
    affine: list[list[float]]
    evidence_slice: int
    target: str | None
    paths: list[str] = field(default_factory=list)
    slices: list[int] = field(default_factory=list)
    positions_mm: list[float] = field(default_factory=list)
    png_size: list[int] = field(default_factory=list)  # width, height

    def describe(self) -> dict[str, Any]:
        return {"series_id": self.series_id, "visit_id": self.visit_id, "sequence": self.sequence,
                "plane": self.plane, "shape": self.shape, "affine": self.affine,
                "evidence_slice": self.evidence_slice, "target": self.target, "png_size": self.png_size}


def series_index(cases_path: Path) -> dict[str, SeriesRef]:
    """Series by id (and by each render path) from a cases.jsonl of the normalize or a later stage."""
    out: dict[str, SeriesRef] = {}
    if not cases_path.exists():
        return out
    for case in read_jsonl(cases_path, Case):
        for visit in case.visits:
            for s in visit.series:
                ref = SeriesRef(s, visit.visit_id)
                out.setdefault(f"{case.case_id}/{s.series_id}", ref)
                for r in s.renders:
                    out.setdefault("render:" + str(Path(r.path)), ref)
    return out


def claimed_views(item: Item, index: dict[str, SeriesRef]) -> list[tuple[SeriesRef, str, int | None, str | None]]:
    """(series, plane, evidence slice, target) for each series the item refers to, in the order it shows them.

    From ``item.evidence`` when it is filled; else from the item's images that are renders of a series (an axial
    render keeps its slice, another view falls back to the series' mid axial)."""
    seen: set[str] = set()
    out: list[tuple[SeriesRef, str, int | None, str | None]] = []
    for ev in item.evidence:
        key = f"{item.case_id}/{ev.series_id}" if ev.series_id else "render:" + str(Path(ev.image))
        ref = index.get(key)
        if ref is None or ref.series.nifti is None or ref.series.series_id in seen:
            continue
        seen.add(ref.series.series_id)
        plane = ev.plane if ev.plane in PLANES else "axial"
        out.append((ref, plane, ev.slice_index if plane == ev.plane else None, ev.target))
    if out:
        return out
    for img in item.images:
        ref = index.get("render:" + str(Path(img)))
        if ref is None or ref.series.nifti is None or ref.series.series_id in seen:
            continue
        seen.add(ref.series.series_id)
        render = next((r for r in ref.series.renders if Path(r.path) == Path(img)), None)
        if render is not None and render.plane == "axial":
            out.append((ref, "axial", render.slice_index, render.target))
        else:
            out.append((ref, "axial", None, None))
    return out


def stack_indices(extent: tuple[int, int], n: int, evidence: int, p: StackParams) -> list[int]:
    """Evidence slice first, then the rest in order: every stride-th slice through the brain plus the slices near
    the evidence; the stride grows until the stack fits ``max_slices``."""
    lo, hi = extent
    near = [i for i in range(evidence - p.target_margin, evidence + p.target_margin + 1) if 0 <= i < n]
    near = sorted(set(near), key=lambda i: (abs(i - evidence), i))[: p.max_slices]
    stride = p.stride
    while True:
        rest = sorted(set(range(lo, hi + 1, stride)) | set(near))
        if len(rest) <= p.max_slices or stride > n:
            break
        stride += 1
    rest = [i for i in rest if i != evidence][: p.max_slices - 1]
    return [evidence, *rest]


def position_mm(affine: np.ndarray, shape: tuple[int, ...], axis: int, index: int) -> float:
    centre = [(s - 1) / 2 for s in shape[:3]]
    centre[axis] = index
    return round(float((affine @ np.array([*centre, 1.0]))[axis]), 3)


def _window(series: Series, data: np.ndarray) -> tuple[float, float]:
    for r in series.renders:  # the window the item's own renders used, so the stack matches them
        if r.window is not None:
            return float(r.window[0]), float(r.window[1])
    fg = data > data.mean()
    lo, hi = np.percentile(data[fg] if fg.any() else data, [1.0, 99.5])
    return float(lo), float(hi)


def _draw(png: Any, label: str, evidence: bool) -> Any:
    from PIL import ImageDraw

    img = png.convert("RGB")
    draw = ImageDraw.Draw(img)
    if evidence:  # a frame inside the edges: the slice keeps its size, so coordinates agree across pages
        w, h = img.size
        for k in range(3):
            draw.rectangle([k, k, w - 1 - k, h - 1 - k], outline=(255, 210, 0))
        label = "EVIDENCE  " + label
    draw.rectangle([4, 4, 8 + 6 * len(label), 17], fill=(0, 0, 0))
    draw.text((6, 5), label, fill=(255, 210, 0) if evidence else (255, 255, 255))
    return img


class StackBuilder:
    """Builds (and caches within one push) the stacks of the series items refer to."""

    def __init__(self, params: StackParams, index: dict[str, SeriesRef], out_dir: Path) -> None:
        self.p = params
        self.index = index
        self.out_dir = out_dir
        self._volumes: dict[str, tuple[np.ndarray, np.ndarray, str]] = {}

    def _volume(self, nifti: str) -> tuple[np.ndarray, np.ndarray, str]:
        if nifti not in self._volumes:
            import nibabel as nib

            img: Any = nib.load(nifti)
            while len(self._volumes) >= 2:  # bounded memory: the last two volumes
                self._volumes.pop(next(iter(self._volumes)))
            self._volumes[nifti] = (np.asarray(img.dataobj, dtype=np.float32), np.asarray(img.affine),
                                    sha256_file(Path(nifti)))
        return self._volumes[nifti]

    def for_item(self, item: Item) -> list[Stack]:
        return [self.build(ref, plane, ev, target) for ref, plane, ev, target in claimed_views(item, self.index)]

    def build(self, ref: SeriesRef, plane: str, evidence: int | None, target: str | None) -> Stack:
        from curation.imaging.render import save_png, slice_2d, to_png, window

        s = ref.series
        data, affine, digest = self._volume(str(s.nifti))
        axis = PLANE_AXIS[plane]
        n = data.shape[axis]
        fg = data > data.mean()
        others = tuple(a for a in range(3) if a != axis)
        area = fg.sum(axis=others)
        # through the brain: where the head's cross-section is half its largest (not the neck, face or vertex)
        present = np.flatnonzero(area >= area.max() / 2) if area.max() > 0 else np.arange(0)
        extent = (int(present[0]), int(present[-1])) if present.size else (0, n - 1)
        ev = int(evidence) if evidence is not None and 0 <= evidence < n else (n - 1) // 2
        wlo, whi = _window(s, data)
        zooms = [float(np.linalg.norm(affine[:3, a])) for a in range(3)]
        sp = [zooms[a] for a in others][::-1]
        key = hashlib.sha256(f"{VERSION}|{digest}|{plane}|{wlo:.6f}|{whi:.6f}|{self.p.size}".encode()).hexdigest()[:16]
        folder = self.out_dir / f"{s.series_id}-{key}"
        stack = Stack(series_id=s.series_id, visit_id=ref.visit_id, sequence=s.sequence, plane=plane,
                      shape=[int(v) for v in data.shape[:3]],
                      affine=[[round(float(v), 6) for v in row] for row in affine], evidence_slice=ev, target=target)
        for n_page, idx in enumerate(stack_indices(extent, n, ev, self.p)):
            mm = position_mm(affine, data.shape, axis, idx)
            is_ev = n_page == 0
            path = folder / f"{plane}_{idx:03d}{'_evidence' if is_ev else ''}.png"
            if not path.exists():
                png = to_png(window(slice_2d(data, plane, idx), wlo, whi), self.p.size, (sp[0], sp[1]))
                save_png(_draw(png, f"{plane} {idx}  {AXIS_LETTER[axis]} {mm:+.1f} mm", is_ev), path)
            if not stack.png_size:
                from PIL import Image

                with Image.open(path) as im:
                    stack.png_size = [im.width, im.height]
            stack.paths.append(str(path))
            stack.slices.append(idx)
            stack.positions_mm.append(mm)
        return stack


def to_volume(stack: dict[str, Any], slice_index: int, fx: float, fy: float) -> tuple[list[float], list[float]]:
    """A point of a stack page (fractions of its width and height from the top left) -> voxel indices (continuous,
    voxel centres at integers) and world RAS mm. Inverts ``render.slice_2d`` and the resize of ``to_png``."""
    shape = stack["shape"]
    plane = stack["plane"]
    axis = PLANE_AXIS[plane]
    rows_axis, cols_axis = (2, 0) if plane == "coronal" else (1, 0) if plane == "axial" else (2, 1)
    # slice_2d shows column c of the image at index (N - 1 - c) of cols_axis and row r at (N - 1 - r) of rows_axis
    u = fx * shape[cols_axis]  # continuous, edges at 0 and N
    v = fy * shape[rows_axis]
    vox = [0.0, 0.0, 0.0]
    vox[axis] = float(slice_index)
    vox[cols_axis] = shape[cols_axis] - 0.5 - u
    vox[rows_axis] = shape[rows_axis] - 0.5 - v
    affine = np.asarray(stack["affine"], dtype=float)
    mm = affine @ np.array([*vox, 1.0])
    return [round(c, 2) for c in vox], [round(float(c), 2) for c in mm[:3]]


def load_index(cases: str | Path) -> dict[str, SeriesRef]:
    return series_index(Path(cases))
