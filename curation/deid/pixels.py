"""Burned-in text: read a figure's pixels by OCR at their original resolution, mask the identifying words, keep the
clinical labels; text that cannot be read with confidence sends the figure to review.

Tesseract (Debian's ``tesseract-ocr``, through ``pytesseract``) reads the words, as Presidio's image redactor does;
which words identify is decided as for prose: each OCR'd line goes through text de-identification
(``TextDeidentifier.find``: names, places, institutions, dates, record numbers) and the overlay patterns of
``pixel_text.yaml`` (bare ids, clock times, field labels such as ``Uploader :``). Presidio's image redactor itself is
not used: it pins Pillow >= 13 and opencv-python (beside the opencv-python-headless the project has) and would
analyse with bare Presidio rather than the project's text de-identification.

What is recorded is boxes and tags, never the text read.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from curation import records
from curation.params import PixelDeidParams, TextDeidParams
from curation.report import Outcome

TOOL = "tesseract"
CACHE_VERSION = "4"  # the reading code's version: bump it when read_image reads differently
OCR_WAIT_S = 600  # past this another run's claim on an image is taken as stale and the image is read anyway


@lru_cache(maxsize=1)
def pixel_policy() -> dict[str, Any]:
    pol = yaml.safe_load(resources.files("curation.deid").joinpath("pixel_text.yaml").read_text(encoding="utf-8"))
    for key in ("patterns", "display_number_before", "clinical_labels", "ocr"):
        if key not in pol:
            raise ValueError(f"pixel_text.yaml: '{key}' missing")
    unknown = set(pol["patterns"]) - {"DATE", "TIME", "ID", "LABEL"}
    if unknown:
        raise ValueError(f"pixel_text.yaml: patterns: unknown tag(s) {sorted(unknown)}")
    return pol


@lru_cache(maxsize=1)
def _compiled() -> tuple[list[tuple[str, re.Pattern[str]]], re.Pattern[str], frozenset[str]]:
    pol = pixel_policy()
    pats = [(tag, re.compile(rx)) for tag, rxs in pol["patterns"].items() for rx in rxs]
    return pats, re.compile(pol["display_number_before"]), frozenset(str(w) for w in pol["clinical_labels"])


@dataclass(frozen=True)
class Word:
    text: str
    conf: float
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in the original pixels

    @property
    def height(self) -> int:
        return self.box[3] - self.box[1]


@dataclass
class Line:
    words: list[Word] = field(default_factory=list)

    @property
    def box(self) -> tuple[int, int, int, int]:
        return (min(w.box[0] for w in self.words), min(w.box[1] for w in self.words),
                max(w.box[2] for w in self.words), max(w.box[3] for w in self.words))

    def text_and_offsets(self) -> tuple[str, list[tuple[int, int]]]:
        parts, offs, pos = [], [], 0
        for w in self.words:
            parts.append(w.text)
            offs.append((pos, pos + len(w.text)))
            pos += len(w.text) + 1
        return " ".join(parts), offs


@dataclass(frozen=True)
class PixelResult:
    """What masking one image did: boxes (x0, y0, x1, y1) with their tags, the fraction of pixels masked, and why the
    image needs a reviewer's eye (empty when it does not)."""

    masked: list[dict[str, Any]]
    masked_fraction: float
    review: list[str]
    words_read: int
    size: tuple[int, int]

    def qc(self) -> dict[str, Any]:
        return {"tool": f"{TOOL} {tesseract_version()}", "psm": pixel_policy()["ocr"]["psm"],
                "read_at": "original resolution", "size": list(self.size), "words_read": self.words_read,
                "masked": self.masked, "masked_fraction": round(self.masked_fraction, 5), "review": self.review}


@lru_cache(maxsize=1)
def tesseract_version() -> str:
    import pytesseract

    return str(pytesseract.get_tesseract_version())


# ------------------------------------------------------------------ reading
def ocr_words(img: Any, scale: int = 1, offset: tuple[int, int] = (0, 0), psm: int | None = None) -> list[Word]:
    """Tesseract's words of a PIL image, their boxes mapped back to the original pixels (``scale``, ``offset``)."""
    import pytesseract
    from PIL import Image

    # one thread a call: Tesseract's OpenMP threads cost more than they give on images this small (0.85 -> 0.56 s
    # a demo figure on two cores), and the stage's workers already use the cores
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    pol = pixel_policy()["ocr"]
    gray = img.convert("L")
    if scale > 1:
        gray = gray.resize((gray.width * scale, gray.height * scale), Image.Resampling.LANCZOS)
    data = pytesseract.image_to_data(gray, config=f"--psm {psm or pol['psm']}", output_type=pytesseract.Output.DICT)
    out = []
    ox, oy = offset
    for i, text in enumerate(data["text"]):
        text = (text or "").strip()
        conf = float(data["conf"][i])
        if not text or conf < 0:
            continue
        x, y, w, h = (int(data[k][i]) for k in ("left", "top", "width", "height"))
        out.append(Word(text, conf, (ox + x // scale, oy + y // scale, ox + -(-(x + w) // scale),
                                     oy + -(-(y + h) // scale))))
    return out


def read_image(img: Any) -> tuple[list[Word], list[Word]]:
    """The words of the whole image at 1x, and those of its text rows (runs of rows on a flat background, where
    overlays and footers lie) read again upscaled: a 6 px footer is noise to Tesseract at 1x. Read once per pixels,
    policy and Tesseract version (``ocr_cache``): a rerun of the stage, or verify after it, reads them back; a run
    that needs an image another run is reading waits for its words."""
    key = _cache_key(img)
    cached = _cache_get(key)
    if cached is not None:
        return cached
    root = ocr_cache()
    with records.claimed(records.claim_lock(root, key), OCR_WAIT_S):
        cached = _cache_get(key)
        if cached is not None:
            return cached
        words = _read_image(img)
        _cache_put(key, words)
    return words


def ocr_cache() -> Path | None:
    """The OCR store: ``CURATION_OCR_CACHE`` (a folder; ``off`` turns it off), else
    ``$XDG_CACHE_HOME/medbench-curation/ocr``. Entries are the words read (text, confidence, box) of one image, a few
    kB each; nothing in them leaves the machine."""
    where = os.environ.get("CURATION_OCR_CACHE", "").strip()
    if where.lower() == "off":
        return None
    if where:
        return Path(where).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medbench-curation" / "ocr"


def _cache_key(img: Any) -> str:
    h = hashlib.sha256()
    h.update(f"{img.mode}:{img.width}x{img.height}:{tesseract_version()}:".encode())
    h.update(json.dumps(pixel_policy(), sort_keys=True).encode())  # the policy, not its comments
    h.update(CACHE_VERSION.encode())
    h.update(img.tobytes())
    return h.hexdigest()


def _cache_get(key: str) -> tuple[list[Word], list[Word]] | None:
    root = ocr_cache()
    path = root / key[:2] / f"{key}.json" if root else None
    if path is None or not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        first, second = ([Word(t, c, (b[0], b[1], b[2], b[3])) for t, c, b in part] for part in doc)
        return first, second
    except (OSError, ValueError, TypeError, IndexError):
        return None  # a damaged entry is read again


def _cache_put(key: str, words: tuple[list[Word], list[Word]]) -> None:
    root = ocr_cache()
    if root is None:
        return
    try:
        from curation.records import atomic_open

        path = root / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "w", durable=False) as fh:
            fh.write(json.dumps([[[w.text, w.conf, list(w.box)] for w in part] for part in words]))
    except OSError:
        pass  # a store that cannot be written costs time, never the result


def _read_image(img: Any) -> tuple[list[Word], list[Word]]:
    pol = pixel_policy()["ocr"]
    first = ocr_words(img)
    second: list[Word] = []
    for x0, y0, x1, y1 in text_rows(img):
        for w in ocr_words(img.crop((x0, y0, x1, y1)), pol["upscale"], (x0, y0), psm=6):
            if not any(o.text == w.text and _overlap(o.box, w.box) > 0.5 for o in second):
                second.append(w)  # a row read in the whole width and again in its third: once
    return first, second


def _overlap(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> float:
    """Intersection over the smaller box."""
    ix = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    small = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1])) or 1
    return ix * iy / small


def text_rows(img: Any) -> list[tuple[int, int, int, int]]:
    """Boxes of short runs of rows that hold marks on an otherwise flat background, in the whole width and in each
    third (a corner overlay shares its rows with the anatomy in the middle; a footer's middle, with the anatomy at
    its ends). The middle third is read only along the top and bottom edges, where headers and footers lie: inside
    the head its rows are brain, whose sulci on a flat grey read as lines of text nobody can read (a third of the
    demo's figures, and 3 of 278 MedPix images, were held for review by them)."""
    import numpy as np

    pol = pixel_policy()["ocr"]
    a = np.asarray(img.convert("L"), dtype=np.int16)
    h, w = a.shape
    edge = pol["edge_fraction"] * h
    out: list[tuple[int, int, int, int]] = []
    for x0, x1 in ((0, w), (0, w // 3), (w // 3, w - w // 3), (w - w // 3, w)):
        middle = x0 == w // 3
        part = a[:, x0:x1]
        if part.size == 0:
            continue
        bg = np.median(part, axis=1, keepdims=True)
        ink = (np.abs(part - bg) > pol["ink_level"]).sum(axis=1) >= 2
        y = 0
        while y < h:
            if not ink[y]:
                y += 1
                continue
            start = y
            while y < h and ink[y]:
                y += 1
            box = (x0, max(0, start - 3), x1, min(h, y + 3))
            if middle and box[3] > edge and box[1] < h - edge:
                continue  # not wholly along an edge
            if 4 <= y - start <= pol["max_row_px"]:
                if box not in out:
                    out.append(box)
    return out


def lines_of(words: Iterable[Word]) -> list[Line]:
    """Words grouped into lines: overlapping vertically by half the smaller height, no wider apart than three
    heights."""
    lines: list[Line] = []
    for w in sorted(words, key=lambda w: (w.box[0], w.box[1])):
        for line in lines:
            lx0, ly0, lx1, ly1 = line.box
            overlap = min(ly1, w.box[3]) - max(ly0, w.box[1])
            h = max(1, min(ly1 - ly0, w.height))
            gap = w.box[0] - lx1  # from the line's right end (a row read twice holds words that overlap)
            if overlap >= 0.5 * h and gap <= 3 * max(ly1 - ly0, w.height, 4):
                line.words.append(w)
                break
        else:
            lines.append(Line([w]))
    return lines


# ------------------------------------------------------------------ deciding
def identifying(lines: Sequence[Line], text: Any | None, known: Sequence[str] = (),
                height: int | None = None) -> list[tuple[Word, str]]:
    """(word, tag) of every word that identifies: a pattern of pixel_text.yaml touches it, a field label precedes it
    on its line, or text de-identification finds it in its line. Clinical labels stay unless a pattern (a date, an
    id) takes them in. Given the image's ``height``, a word read alone with confidence on its line, inside the image
    (not in its top or bottom band) and more than twice the height of small text, is the anatomy read as a word, and
    text de-identification's finding it a name does not mask it ("Fe" over a caudate head, "Wey" over an occipital
    lobe: black boxes over the finding, in clinical reads); a pattern (a date, an id) still does."""
    pats, display, labels = _compiled()
    ocr = pixel_policy()["ocr"]
    min_word, min_conf, small = ocr["word_min_confidence"], ocr["min_confidence"], ocr["small_text_px"]
    found: dict[int, tuple[Word, str]] = {}
    texts: list[tuple[str, list[tuple[int, int]], list[Word]]] = []
    for line in lines:
        # small text (a footer, an overlay) is matched however badly it was read: an id read as "T90b0dec-bst3-..."
        # at confidence 0 is still an id; larger "words" read with low confidence are texture
        words = [w for w in line.words if w.conf >= min_word or w.height <= small]
        if not words:
            texts.append(("", [], []))
            continue
        s, offs = Line(words).text_and_offsets()
        texts.append((s, offs, words))
        for tag, rx in pats:
            for m in rx.finditer(s):
                if tag == "ID" and display.search(s[:m.start()]):
                    continue  # W 40000 : L 35000
                lo, hi = (m.start(), len(s)) if tag == "LABEL" else (m.start(), m.end())
                for w, (a, b) in zip(words, offs, strict=True):
                    if a < hi and b > lo:
                        found.setdefault(id(w), (w, tag))
    edge = ocr["edge_fraction"] * height if height else None

    def anatomy(w: Word, words: list[Word]) -> bool:
        return (edge is not None and height is not None and w.height > 2 * small
                and sum(x.conf >= min_conf for x in words) == 1 and w.box[1] > edge and w.box[3] < height - edge)

    if text is not None:
        live = [(s, offs, words) for s, offs, words in texts if s.strip()]
        spans = text.find_all([s for s, _, _ in live], known) if live else []
        for (_, offs, words), sp in zip(live, spans, strict=True):
            for span in sp:
                for w, (a, b) in zip(words, offs, strict=True):
                    # a name finder over texture OCR'd as words: only words read with confidence (a footer's
                    # other words go with its line, mask_image)
                    if (a < span.end and b > span.start and w.text.strip(".,:;") not in labels
                            and w.conf >= min_conf and not anatomy(w, words)):
                        found.setdefault(id(w), (w, span.tag))
    return list(found.values())


def unread_lines(lines: Sequence[Line], masked: Iterable[Word]) -> list[Line]:
    """Small lines of several words that OCR could not read with confidence and that nothing masked."""
    ocr = pixel_policy()["ocr"]
    gone = {id(w) for w in masked}
    out = []
    for line in lines:
        left = [w for w in line.words if id(w) not in gone and w.conf >= ocr["word_min_confidence"] / 2]
        if len(left) < ocr["review_min_words"] or max(w.height for w in left) > ocr["small_text_px"]:
            continue
        if sum(w.conf for w in left) / len(left) < ocr["min_confidence"]:
            out.append(line)
    return out


def ink_contrast(box: Any) -> float:
    """How far a box's marks stand out from its background (its median), in grey levels: the 95th or 5th
    percentile's distance from the median, whichever is further. Burned-in text is drawn to be read (a white overlay on
    a black margin: 100 and more; a 6 px grey footer: 65); texture that OCR reads as words stays within 30."""
    import numpy as np

    if box.size == 0:
        return 0.0
    lo, mid, hi = np.percentile(box, (5, 50, 95))
    return float(max(hi - mid, mid - lo))


def clinical_line(line: Line) -> bool:
    """A line made only of clinical labels and the numbers a display label gives (``W 1438 : L 719``, ``AX T2
    FLAIR``): it never goes with an overlay block."""
    _, display, labels = _compiled()
    s, offs = line.text_and_offsets()
    window = re.match(r"\s*(?:W|WW|WL|C)\b|\s*W\d", s) is not None
    for w, (a, _) in zip(line.words, offs, strict=True):
        t = w.text.strip(".,:;=")
        if not t or t in labels or (re.fullmatch(r"[\d.]+", t) and display.search(s[:a])):
            continue
        if window and re.fullmatch(r"[WLC\d:.]*\d[WLC\d:.]*", t):  # "1438:L719", a window read without spaces
            continue
        return False
    return True


def overlay_blocks(lines: Sequence[Line], hits: list[tuple[Word, str]]) -> list[tuple[Word, str]]:
    """Words that go with an identifying word: its whole line, and the lines of its block (lines one above the
    other, aligned at the left or the right, a line's height apart: a PACS corner, a footer). A patient's name in
    such a block reads as no name to a name finder (``DOE^JANE``); the block's date or id gives it away. Clinical
    labels stay, and a line of them only (window/level, a sequence) stays whole."""
    _, _, labels = _compiled()
    hit_ids = {id(w): t for w, t in hits}
    tagged = [next((hit_ids[id(w)] for w in ln.words if id(w) in hit_ids), None) for ln in lines]
    todo = [i for i, t in enumerate(tagged) if t]
    while todo:
        i = todo.pop()
        bx = lines[i].box
        h = max(4, bx[3] - bx[1])
        for j, other in enumerate(lines):
            if tagged[j] or clinical_line(other):
                continue
            ox = other.box
            gap = max(ox[1] - bx[3], bx[1] - ox[3])
            aligned = abs(ox[0] - bx[0]) <= 2 * h or abs(ox[2] - bx[2]) <= 2 * h
            if gap <= 1.5 * h and aligned and abs((ox[3] - ox[1]) - h) <= h:
                tagged[j] = tagged[i]
                todo.append(j)
    out = []
    for line, tag in zip(lines, tagged, strict=True):
        if not tag:
            continue
        for w in line.words:
            if id(w) not in hit_ids and w.text.strip(".,:;") not in labels:
                out.append((w, "OVERLAY"))  # masked for the company it keeps
                hit_ids[id(w)] = tag
    return out


# ------------------------------------------------------------------ masking
def mask_image(img: Any, text: Any | None, known: Sequence[str] = (),
               params: PixelDeidParams | None = None) -> tuple[Any, PixelResult]:
    """``img`` with its identifying words painted black, and what was done."""
    import numpy as np
    from PIL import ImageDraw

    params = params or PixelDeidParams()
    pad = pixel_policy()["ocr"]["pad_px"]
    first, second = read_image(img)
    lines1, lines2 = lines_of(first), lines_of(second)
    hits = identifying(lines1, text, known, img.height) + identifying(lines2, text, known, img.height)
    hits += overlay_blocks(lines2, hits)
    # small text nobody could read: along the top or bottom edge it is a header or footer (a caption, a contributor,
    # a date), masked as unread; inside the image it may be a label on the anatomy, and a reviewer decides
    ocr = pixel_policy()["ocr"]
    _, _, labels = _compiled()
    edge = ocr["edge_fraction"] * img.height
    interior_unread = False
    gray = np.asarray(img.convert("L"), dtype=np.int16)
    for line in unread_lines(lines2, [w for w, _ in hits]):
        x0, y0, x1, y1 = line.box
        if y1 <= edge or y0 >= img.height - edge:
            hits += [(w, "UNREAD") for w in line.words
                     if not (w.text.strip(".,:;") in labels and w.conf >= ocr["min_confidence"])]
        elif ink_contrast(gray[y0:y1, x0:x1]) >= ocr["min_text_contrast"]:
            # inside the image, only marks that stand out from what they lie on are text (a label on the anatomy);
            # skin, bone and sulci read as words do not (an edge line is masked either way: a footer costs nothing)
            interior_unread = True
    # a line of clinical labels read with confidence (W/L, a sequence) keeps its pixels: a footer's mask just below
    # it stops at its edge instead of clipping it
    hit_ids = {id(w) for w, _ in hits}
    kept = [ln.box for ln in lines1 + lines2 if clinical_line(ln) and not any(id(w) in hit_ids for w in ln.words)
            and max(w.conf for w in ln.words) >= ocr["min_confidence"]]
    out = img.copy()
    draw = ImageDraw.Draw(out)
    boxes: list[dict[str, Any]] = []
    for w, tag in sorted(hits, key=lambda h: h[0].box):
        x0, y0, x1, y1 = (max(0, w.box[0] - pad), max(0, w.box[1] - pad), min(img.width, w.box[2] + pad),
                          min(img.height, w.box[3] + pad))
        for kx0, ky0, kx1, ky1 in kept:
            if x0 < kx1 and kx0 < x1 and y0 < ky1 and ky0 < y1:
                if (y0 + y1) / 2 >= ky1 - 1:
                    y0 = max(y0, ky1)
                elif (y0 + y1) / 2 <= ky0 + 1:
                    y1 = min(y1, ky0)
        if x1 > x0 and y1 > y0:
            boxes.append({"box": [x0, y0, x1, y1], "tag": tag})
    boxes += _gaps_along_edges(boxes, edge, img.height)
    for b in boxes:
        x0, y0, x1, y1 = b["box"]
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=0)
    fraction = _area(boxes) / float(img.width * img.height)
    review = []
    if interior_unread:
        review.append("text_not_read_with_confidence")
    if fraction > params.max_masked_fraction:
        review.append("masked_fraction_over_limit")
    return out, PixelResult(boxes, fraction, review, len(first) + len(second), (img.width, img.height))


def _gaps_along_edges(boxes: Sequence[dict[str, Any]], edge: float, height: int) -> list[dict[str, Any]]:
    """Masks for the gaps between two masked words of one header or footer row a few letters apart: a fragment
    OCR did not read as part of its line ("Upl" of "Uploader :" between an image UUID and a name) goes with it."""
    out = []
    along = sorted((b["box"] for b in boxes if b["box"][3] <= edge or b["box"][1] >= height - edge),
                   key=lambda b: b[0])
    for a in along:
        h = a[3] - a[1]
        right = [b for b in along if b[0] > a[2] and min(a[3], b[3]) - max(a[1], b[1]) >= 0.5 * min(h, b[3] - b[1])]
        if right:
            b = min(right, key=lambda b: b[0])
            if b[0] - a[2] <= 4 * max(h, b[3] - b[1]):
                out.append({"box": [a[2], max(a[1], b[1]), b[0], min(a[3], b[3])], "tag": "GAP"})
    return out


def _area(boxes: Sequence[dict[str, Any]]) -> int:
    """Pixels under the union of the boxes."""
    import numpy as np

    if not boxes:
        return 0
    w = max(b["box"][2] for b in boxes)
    h = max(b["box"][3] for b in boxes)
    grid = np.zeros((h, w), dtype=bool)
    for b in boxes:
        x0, y0, x1, y1 = b["box"]
        grid[y0:y1, x0:x1] = True
    return int(grid.sum())


# ------------------------------------------------------------------ one figure, in a worker
_TEXT: dict[tuple[str, bytes], Any] = {}


def text_tool(params: TextDeidParams, secret: bytes) -> Any:
    """One TextDeidentifier per process and settings (spaCy loads once)."""
    from curation.deid.text import TextDeidentifier

    key = (params.model_dump_json(), secret)
    if key not in _TEXT:
        _TEXT.clear()
        _TEXT[key] = TextDeidentifier(params, secret)
    return _TEXT[key]


@dataclass(frozen=True)
class FigureTask:
    src: str
    dst: str
    max_pixels: int | None
    pixels: PixelDeidParams
    text: TextDeidParams
    secret: bytes
    known: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanFigure:
    removed: list[str]
    pixels: PixelResult | None


def deid_figure(task: FigureTask) -> Outcome[CleanFigure]:
    """A figure decoded, its burned-in identifying text masked at its original resolution, re-encoded as PNG without
    its metadata. Never raises on a bad input."""
    from curation.io.images import PILLOW_ERRORS, ImageTooLarge, figure_pixels
    from curation.records import write_bytes

    try:
        pixels = figure_pixels(task.src, task.max_pixels)
    except ImageTooLarge as exc:
        return Outcome.failure("image_too_large", str(exc), task.src)
    except PILLOW_ERRORS as exc:
        return Outcome.failure("image_unreadable", f"{type(exc).__name__}: {exc}", task.src)
    result = None
    if task.pixels.ocr:
        try:
            pixels, result = mask_image(pixels, text_tool(task.text, task.secret), task.known, task.pixels)
        except Exception as exc:  # OCR missing or failing: the figure is not released unread
            return Outcome.failure("pixel_ocr_failed", f"{type(exc).__name__}: {exc}"[:300], task.src)
    buf = io.BytesIO()
    pixels.save(buf, format="PNG", optimize=False)
    write_bytes(task.dst, buf.getvalue())
    return Outcome.success(CleanFigure(["metadata"], result))


# ------------------------------------------------------------------ verifying outputs
def residual_text(img: Any, text: Any | None) -> list[str]:
    """Tags of identifying text OCR still reads in an output image, read as the release's check reads it (Tesseract,
    ``--psm 11``, original resolution), and in its small-text bands upscaled."""
    first, second = read_image(img)
    hits = identifying(lines_of(first), text, (), img.height) + identifying(lines_of(second), text, (), img.height)
    return sorted({tag for _, tag in hits})


# ------------------------------------------------------------------ burned-in text of DICOM images
def frame_image(frame: Any, photometric: str) -> Any:
    """One frame as the 8-bit picture OCR reads, pixel for pixel (its full range stretched; MONOCHROME1 inverted so
    text reads as on a screen)."""
    import numpy as np
    from PIL import Image

    a = np.asarray(frame, dtype=np.float64)
    if a.ndim == 3:
        lo, hi = float(a.min()), float(a.max())
        return Image.fromarray(((a - lo) / max(hi - lo, 1e-9) * 255).astype(np.uint8), "RGB")
    lo, hi = float(a.min()), float(a.max())
    g = (a - lo) / max(hi - lo, 1e-9) * 255
    if photometric == "MONOCHROME1":
        g = 255 - g
    return Image.fromarray(g.astype(np.uint8), "L")


def clean_dicom_pixels(ds: Any, text: Any | None, known: Sequence[str] = (),
                       params: PixelDeidParams | None = None) -> Outcome[PixelResult]:
    """The identifying text burned into a DICOM image's pixels masked in place (every frame read by OCR at its own
    resolution, as a figure is; the masked boxes set to the value that displays black), the pixel data rewritten
    uncompressed and BurnedInAnnotation set to NO. A frame whose text cannot be read with confidence, or that
    would lose too much of itself, fails it (``pixel_text_review``): it goes to review, never out unread."""
    import numpy as np

    try:
        arr = ds.pixel_array
    except Exception as exc:  # no decoder for its transfer syntax, or damaged pixel data
        return Outcome.failure("pixel_data_unreadable", f"{type(exc).__name__}: {exc}"[:300])
    photometric = str(ds.get("PhotometricInterpretation", "MONOCHROME2"))
    colour = int(ds.get("SamplesPerPixel", 1) or 1) == 3  # decoded as RGB, whatever its stored colour space
    frames = int(ds.get("NumberOfFrames", 1) or 1)
    out = np.array(arr if frames > 1 else arr[np.newaxis], copy=True)
    black = out.min() if photometric != "MONOCHROME1" or colour else out.max()
    boxes: list[dict[str, Any]] = []
    review: list[str] = []
    words, masked, size = 0, 0.0, (0, 0)
    for k, frame in enumerate(out):
        img = frame_image(frame, photometric)
        size = img.size
        _, res = mask_image(img, text, known, params)
        review += [r for r in res.review if r not in review]
        words += res.words_read
        masked = max(masked, res.masked_fraction)
        for b in res.masked:
            x0, y0, x1, y1 = b["box"]
            frame[y0:y1, x0:x1] = black
            boxes.append({**b, **({"frame": k} if frames > 1 else {})})
    result = PixelResult(boxes, masked, review, words, size)
    if review:
        return Outcome.failure("pixel_text_review", ", ".join(review))
    if boxes:
        ds.set_pixel_data(out if frames > 1 else out[0], "RGB" if colour else photometric,
                          int(ds.get("BitsStored", 8) or 8))
    ds.BurnedInAnnotation = "NO"
    return Outcome.success(result)
