"""Images in a chat request, in the OpenAI vision message format (data URIs in the last user message).

Two attachments, kept apart because each one's exact message is part of the cache key of the requests already
made: image files (generation and the verifier: the MIME type from the file name, nothing attached when no file
exists) and image bytes (answering: the MIME type from the bytes, the text always wrapped in a part list).
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any


def data_uri(path: str | Path) -> str:
    mime = mimetypes.guess_type(str(path))[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(Path(path).read_bytes()).decode()}"


def with_images(messages: list[dict[str, Any]], images: list[str]) -> list[dict[str, Any]]:
    """Attach the image files that exist to the last user message; the messages unchanged when none does."""
    paths = [p for p in images if Path(p).is_file()]
    if not paths:
        return messages
    out = [dict(m) for m in messages]
    last = out[-1]
    last["content"] = [{"type": "text", "text": last["content"]}] + [
        {"type": "image_url", "image_url": {"url": data_uri(p)}} for p in paths]
    return out


def image_parts(images: list[bytes]) -> list[dict[str, Any]]:
    """Image bytes as message parts (PNG or else JPEG, read from the bytes)."""
    out = []
    for data in images:
        mime = "image/png" if data[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg"
        out.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{base64.b64encode(data).decode()}"}})
    return out
