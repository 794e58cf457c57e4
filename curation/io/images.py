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
