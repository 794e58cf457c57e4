"""Deterministic 8-bit renders: fixed windowing, orientation and resampling, byte-identical on rerun.

Convention (documented in the release card): axial and coronal slices in radiological orientation
(patient right on image left), anterior / superior at the top; sagittal with anterior on the left.
Intensities are windowed to [low, high] and mapped linearly to 0..255.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from curation.records import write_bytes

PLANE_AXIS = {"sagittal": 0, "coronal": 1, "axial": 2}


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
