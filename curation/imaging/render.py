"""Deterministic 8-bit renders: fixed windowing, orientation and resampling, byte-identical on rerun.

Convention (documented in the release card): axial and coronal slices in radiological orientation
(patient right on image left), anterior / superior at the top; sagittal with anterior on the left.
Intensities are windowed to [low, high] and mapped linearly to 0..255.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from curation.params import NormalizeParams
from curation.records import relpath, write_bytes
from curation.schema import Placement, Render

PLANE_AXIS = {"sagittal": 0, "coronal": 1, "axial": 2}
WINDOW_PERCENTILES = (1.0, 99.5)  # a volume's window: these percentiles of its foreground (the render step's record)


def slice_2d(vol: np.ndarray, plane: str, index: int) -> np.ndarray:
    if plane == "axial":
        sl = vol[:, :, index]  # (x, y)
        return np.flipud(sl.T)[:, ::-1]
    if plane == "coronal":
        sl = vol[:, index, :]  # (x, z)
        return np.flipud(sl.T)[:, ::-1]
    sl = vol[index, :, :]  # (y, z)
    return np.flipud(sl.T)[:, ::-1]


def window(arr: np.ndarray, low: float, high: float) -> np.ndarray:
    scaled = (arr.astype(np.float64) - low) / max(high - low, 1e-6)
    return np.clip(np.round(scaled * 255.0), 0, 255).astype(np.uint8)


def to_png(img8: np.ndarray, size: int, spacing: tuple[float, float] = (1.0, 1.0)) -> Image.Image:
    h, w = img8.shape
    ph, pw = h * spacing[0], w * spacing[1]
    scale = size / max(ph, pw)
    out = Image.fromarray(img8, mode="L").resize((max(1, round(pw * scale)), max(1, round(ph * scale))),
                                                  Image.Resampling.BILINEAR)
    return out


def save_png(img: Image.Image, path: Path) -> None:
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=6)
    write_bytes(path, buf.getvalue())


def montage(slices: list[Image.Image], cols: int, labels: tuple[str, str, str, str]) -> Image.Image:
    """Grid of slices with orientation letters (left, right, top, bottom of each tile)."""
    w = max(s.width for s in slices)
    h = max(s.height for s in slices)
    rows = (len(slices) + cols - 1) // cols
    sheet = Image.new("L", (cols * w, rows * h), 0)
    draw = ImageDraw.Draw(sheet)
    for i, s in enumerate(slices):
        x, y = (i % cols) * w, (i // cols) * h
        sheet.paste(s, (x, y))
        left, right, top, bottom = labels
        draw.text((x + 3, y + h // 2 - 5), left, fill=255)
        draw.text((x + w - 10, y + h // 2 - 5), right, fill=255)
        draw.text((x + w // 2 - 3, y + 2), top, fill=255)
        draw.text((x + w // 2 - 3, y + h - 12), bottom, fill=255)
    return sheet


def render_volume(data: np.ndarray, fg: np.ndarray, spacing: tuple[float, ...], p: NormalizeParams, out_dir: Path,
                  final_dir: Path, *, targets: list[Placement] | None = None,
                  refused: dict[str, str] | None = None, window_override: tuple[float, float] | None = None,
                  role: str = "target",
                  prefix: str = "", only_targets: bool = False) -> list[Render]:
    """The PNG renders of a normalized volume (mid planes, target slices, montages); deterministic byte for byte.
    Planes in ``refused`` (acquisition QC) are not rendered. With ``prefix`` or ``only_targets`` only the targets are
    rendered (the follow-up of a longitudinal pair, at the baseline's slices and window; targets carried from the
    visit's T1w)."""
    refused = refused or {}
    if window_override is not None:
        wlo, whi = window_override
    else:  # windowing on the normalized volume: fixed percentiles of the foreground
        wlo, whi = (float(v) for v in np.percentile(data[fg] if fg.any() else data, list(WINDOW_PERCENTILES)))
    win = [round(wlo, 6), round(whi, 6)]
    renders: list[Render] = []
    if not (prefix or only_targets):
        for plane in p.planes:
            if plane in refused:
                continue
            n = data.shape[PLANE_AXIS[plane]]
            for f in p.slice_fractions:
                idx = min(n - 1, int(round(f * (n - 1))))
                renders.append(_render_slice(data, plane, idx, wlo, whi, spacing, p, out_dir, final_dir,
                                             {"role": "mid"}, f"{plane}_{idx:03d}.png"))
        if p.montage and "axial" not in refused:
            n = data.shape[2]
            idxs = [int(round(f * (n - 1))) for f in np.linspace(0.25, 0.8, 9)]
            renders.append(_render_montage(data, idxs, wlo, whi, spacing, out_dir, final_dir, "montage_axial.png",
                                           {"role": "montage", "window": win}))
    for t in targets or []:
        plane = "axial" if t.plane == "montage" else t.plane
        if plane in refused:
            continue
        meta: dict[str, Any] = {"role": role, "target": t.target, "located_by": t.located_by}
        if t.plane == "montage":
            assert t.slices is not None and t.positions_mm is not None  # a montage is placed by its slices
            meta["position_mm"] = t.positions_mm[len(t.positions_mm) // 2]
            renders.append(_render_montage(data, t.slices, wlo, whi, spacing, out_dir, final_dir,
                                           f"{prefix}{t.target}_montage.png", {**meta, "window": win}))
            continue
        assert t.slice_index is not None  # any other target by its one slice
        meta["position_mm"] = t.position_mm
        renders.append(_render_slice(data, plane, t.slice_index, wlo, whi, spacing, p, out_dir, final_dir, meta,
                                     f"{prefix}{t.target}_{plane}_{t.slice_index:03d}.png"))
    return renders


def _render_slice(data: np.ndarray, plane: str, idx: int, wlo: float, whi: float, spacing: tuple[float, ...],
                  p: NormalizeParams, out_dir: Path, final_dir: Path, meta: dict[str, Any],
                  name: str) -> Render:
    axis = PLANE_AXIS[plane]
    sp = [s for i, s in enumerate(spacing) if i != axis][::-1]
    save_png(to_png(window(slice_2d(data, plane, idx), wlo, whi), p.render_size, (sp[0], sp[1])), out_dir / name)
    return Render(plane=plane, slice_index=idx, window=(round(wlo, 6), round(whi, 6)), path=relpath(final_dir / name),
                  **meta)


def _render_montage(data: np.ndarray, idxs: list[int], wlo: float, whi: float, spacing: tuple[float, ...],
                    out_dir: Path, final_dir: Path, name: str, meta: dict[str, Any]) -> Render:
    tiles = [to_png(window(slice_2d(data, "axial", i), wlo, whi), 128, (spacing[1], spacing[0])) for i in idxs]
    save_png(montage(tiles, 3, ("R", "L", "A", "P")), out_dir / name)
    return Render(plane="montage", slice_index=None, path=relpath(final_dir / name), **meta)
