"""A journal figure of lettered panels ("(A) Axial FLAIR shows ... (B) Diffusion-weighted image shows ..."), cut into
its panels: the caption into what it says of each letter, the image along its gutters (rows or columns of one colour
across the whole figure or the part being cut: the white or black margins a journal leaves between panels, found by
recursive XY-cut). A figure is cut only where the two agree, as many panels as letters, each a sizeable image;
otherwise it stays one figure, which names no kind (``figure_kinds.caption_kind``). Each panel is written as a figure
of its own (a PNG of the figure's pixels in its box, at their resolution) with what the caption says of it."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from curation.io.images import PILLOW_ERRORS, ImageTooLarge, figure_pixels

# a panel's letter where it begins what the caption says of it: "(A) ...", "(a) ...", "A. ...", "A, ...", "A: ...";
# a letter given after its text or inside a sentence ("in the left (a) and right (b) thalamus") is a reference,
# not the start of a panel's description, and such a caption is not cut
_MARK = re.compile(r"\(\s*([A-La-l](?:\s*(?:[-–,]|and)\s*[A-La-l])*)\s*\)|(?<![A-Za-z0-9])([A-L])[.,:)](?=\s)")
# a letter the marks above do not take ("(M)", a twelfth panel on): the caption is not read panel by panel
_OTHER_MARK = re.compile(r"\(\s*[A-Za-z]\s*\)")
_STARTS = re.compile(r"(?:^|[.;:]\s*)$")
# words that carry a sentence on past a letter: the letter is then inside a sentence
_JOINS = re.compile(r"(?:\b(?:and|or|with|versus|vs|of|on|in|the|at|to|from)|[,(])$", re.I)
# the smallest share of the figure a panel may cover, and the least pixels on its shorter side: a smaller piece is
# a letter, a scale bar or an arrow in a gutter, not an image
MIN_PANEL_SHARE = 0.04
MIN_PANEL_SIDE = 48
# a piece longer than this many times its width (or wider than tall) is a colour bar, a ruler or a head holder's
# arc, not a panel
MAX_PANEL_ASPECT = 4.0
# a line (row or column) is gutter where all but this share of its pixels lie within GUTTER_TOLERANCE grey levels
# of its colour (JPEG leaves a little noise in a white margin)
GUTTER_TOLERANCE = 18
GUTTER_OUTLIERS = 0.003


@dataclass(frozen=True)
class Panel:
    letter: str  # "A"
    caption: str  # what the caption says of this panel
    box: tuple[int, int, int, int]  # left, top, right, bottom, in the figure's pixels


def _letters(group: str) -> list[str]:
    """The letters a marker names: "A", "A-C" (A, B, C), "A and B", "A, B"."""
    parts = [p.upper() for p in re.findall(r"\b[A-La-l]\b", group)]
    if re.search(r"[-–]", group) and len(parts) == 2:
        return [chr(c) for c in range(ord(parts[0]), ord(parts[1]) + 1)]
    return parts


def panel_captions(caption: str) -> tuple[str, list[tuple[str, str]]]:
    """The title the caption gives all its panels (the words before the first letter, "" if none) and what it says
    of each lettered panel, in letter order (A, B, ...), where every letter begins what is said of it and the
    letters run from A without a gap; ("", []) where the caption is not written panel by panel. A description given
    for several letters together ("(A and B) ...") is each one's."""
    text = " ".join(caption.split())
    marks = []
    for m in _MARK.finditer(text):
        group = m.group(1) or m.group(2)
        before, after = text[:m.start()].rstrip(), text[m.end():].lstrip()
        if not _STARTS.search(text[:m.start()]):
            if m.group(2):
                continue  # "A," inside a sentence: a word, not a panel
            # "... in the left frontal lobe (B) Axial DWI shows ...": a description that ends without a stop, the
            # next beginning with its capital; the first letter must begin the caption or a sentence, else the
            # letters follow what they label ("Axial T2 (A) Coronal T2 (B)") and would each take the next panel's
            # words; a letter inside a sentence ("the left (a) and right (b) thalamus") refers to a panel described
            # elsewhere. Either way nothing is cut.
            if not marks or not (after[:1].isupper() and before and not _JOINS.search(before)):
                return "", []
        marks.append((m.start(), m.end(), _letters(group)))
    if sum(len(letters) for _, _, letters in marks) < 2:
        return "", []
    said: dict[str, str] = {}
    for n, (_, end, letters) in enumerate(marks):
        stop = marks[n + 1][0] if n + 1 < len(marks) else len(text)
        words = text[end:stop].strip(" ;,")
        if not words or _OTHER_MARK.search(words):
            return "", []
        for letter in letters:
            if letter in said:
                return "", []
            said[letter] = words
    order = sorted(said)
    if order != [chr(ord("A") + i) for i in range(len(order))]:
        return "", []
    return text[:marks[0][0]].strip(), [(letter, said[letter]) for letter in order]


def _gutters(grey: np.ndarray, axis: int) -> np.ndarray:
    """Per line along ``axis`` (0: rows, 1: columns), whether it is one colour end to end."""
    lines = grey if axis == 0 else grey.T
    # (the mean stands in for the line's colour: the few outliers a gutter may hold move it by less than a grey level)
    colour = lines.mean(axis=1, keepdims=True, dtype=np.float32)
    return (np.abs(lines - colour) > GUTTER_TOLERANCE).mean(axis=1) <= GUTTER_OUTLIERS


def _runs(flags: np.ndarray) -> list[tuple[int, int]]:
    """The [start, end) runs of True in ``flags``."""
    padded = np.concatenate([[False], flags, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)]


def _trim(grey: np.ndarray) -> tuple[int, int, int, int] | None:
    """The box (left, top, right, bottom) of ``grey`` inside its margins of one colour; None where all is margin."""
    if not grey.size:
        return None
    keep_r, keep_c = np.flatnonzero(~_gutters(grey, 0)), np.flatnonzero(~_gutters(grey, 1))
    if not len(keep_r) or not len(keep_c):
        return None
    return int(keep_c[0]), int(keep_r[0]), int(keep_c[-1]) + 1, int(keep_r[-1]) + 1


def _sizeable(box: tuple[int, int, int, int], area: int) -> bool:
    w, h = box[2] - box[0], box[3] - box[1]
    return (w * h >= MIN_PANEL_SHARE * area and min(w, h) >= MIN_PANEL_SIDE
            and max(w, h) <= MAX_PANEL_ASPECT * min(w, h))


def _cut(grey: np.ndarray, x0: int, y0: int, area: int) -> list[tuple[int, int, int, int]]:
    """The panels of ``grey`` (its top left corner at x0, y0 of a figure of ``area`` pixels): it is cut along the
    gutters of one axis (rows first) where that leaves two or more sizeable pieces, each cut again; a piece that is
    not sizeable (a letter, an arrow, a scale in a gutter) is left out. A region no gutter cuts into two sizeable
    pieces is one panel, whole within its margins (its corner labels kept)."""
    trimmed = _trim(grey)
    if trimmed is None:
        return []
    left, top, right, bottom = trimmed
    grey, x0, y0 = grey[top:bottom, left:right], x0 + left, y0 + top
    for axis in (0, 1):
        flags = _gutters(grey, axis)
        bounds, start = [], 0
        for a, b in _runs(flags):
            if b - a >= 2:
                bounds.append((start, a))
                start = b
        bounds.append((start, len(flags)))
        pieces = []
        for a, b in bounds:
            part = grey[a:b] if axis == 0 else grey[:, a:b]
            box = _trim(part)
            if box is not None and _sizeable(box, area):
                pieces.append((part, x0 + (a if axis else 0), y0 + (0 if axis else a)))
        if len(pieces) >= 2:
            return [b for part, px, py in pieces for b in _cut(part, px, py, area)]
    return [(x0, y0, x0 + grey.shape[1], y0 + grey.shape[0])]


def panel_boxes(grey: np.ndarray, n: int) -> list[tuple[int, int, int, int]] | None:
    """The ``n`` panels of a figure (its grey pixels), in reading order (top to bottom, then left to right within a
    row), where its gutters cut it into exactly ``n`` sizeable pieces; None otherwise."""
    area = grey.shape[0] * grey.shape[1]
    boxes = _cut(grey.astype(np.int16), 0, 0, area)
    return _reading_order(boxes) if len(boxes) == n else None


def _reading_order(boxes: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Boxes in the order panels are lettered: by rows (boxes that share at least half their height with a row
    belong to it), each row left to right (a panel as tall as two beside it comes before them). The cut alone does
    not give it: where no gutter crosses the whole figure, its columns are cut first."""
    rows: list[list[tuple[int, int, int, int]]] = []
    for box in sorted(boxes, key=lambda b: (b[1], b[0])):
        for row in rows:
            top, bottom = min(b[1] for b in row), max(b[3] for b in row)
            if min(bottom, box[3]) - max(top, box[1]) >= 0.5 * (box[3] - box[1]):
                row.append(box)
                break
        else:
            rows.append([box])
    return [b for row in rows for b in sorted(row, key=lambda b: (b[0], b[1]))]


def cut_figure(path: Path, said: list[tuple[str, str]], max_pixels: int) -> list[tuple[Panel, bytes]]:
    """The panels of the figure at ``path`` that its caption describes letter by letter (``said``, from
    ``panel_captions``), each with its pixels as PNG bytes; [] where the gutters do not cut the image into as many
    panels as the caption letters, or the image cannot be read within ``max_pixels`` (it stays one figure, and
    de-identification reports why it cannot be read)."""
    if not said:
        return []
    try:
        pixels = figure_pixels(str(path), max_pixels)
    except (ImageTooLarge, *PILLOW_ERRORS):
        return []
    boxes = panel_boxes(np.asarray(pixels.convert("L")), len(said))
    if boxes is None:
        return []
    out = []
    for (letter, words), box in zip(said, boxes, strict=True):
        buf = io.BytesIO()
        pixels.crop(box).save(buf, format="PNG", compress_level=1)  # an interim file: de-identification re-encodes it
        out.append((Panel(letter, words, box), buf.getvalue()))
    return out
