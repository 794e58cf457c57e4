"""Figure images (PNG, JPEG...): opened through Pillow within a pixel bound read from the header."""

from __future__ import annotations

from typing import Any


def open_bounded(src: str, max_pixels: int | None) -> Any:
    """``Image.open`` that refuses, from the header alone, an image over ``max_pixels`` (a decompression bomb):
    raises ``ImageTooLarge``. Pillow's own bomb check is replaced by this one, so the bound is the parameter."""
    import warnings

    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        old = Image.MAX_IMAGE_PIXELS
        Image.MAX_IMAGE_PIXELS = None  # our bound, below, from the header; Pillow's would raise on open
        try:
            im = Image.open(src)
        finally:
            Image.MAX_IMAGE_PIXELS = old
    n = im.width * im.height
    if max_pixels is not None and n > max_pixels:
        im.close()
        raise ImageTooLarge(f"{im.width}x{im.height} = {n} pixels, over bounds.max_image_pixels {max_pixels}")
    return im


class ImageTooLarge(ValueError):
    pass


def _pillow_errors() -> tuple[type[BaseException], ...]:
    from PIL import UnidentifiedImageError

    return (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError)  # what Pillow's decoders raise


PILLOW_ERRORS = _pillow_errors()


def figure_pixels(src: str, max_pixels: int | None = None) -> Any:
    """A figure's pixels at their original resolution, grey or RGB (alpha and palettes flattened; a 16- or 32-bit
    grey image scaled to 8 bits over its own range, which Pillow's conversion would clip to white); raises
    ``ImageTooLarge`` or one of ``PILLOW_ERRORS``."""
    import numpy as np
    from PIL import Image

    with open_bounded(src, max_pixels) as im:
        im.load()
        if im.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
            a = np.asarray(im, dtype=np.float64)
            lo, hi = float(a.min()), float(a.max())
            return Image.fromarray(((a - lo) * (255.0 / (hi - lo) if hi > lo else 0.0)).astype(np.uint8), "L")
        return im.convert("L" if im.mode in ("L", "1") else "RGB")
