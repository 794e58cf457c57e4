"""The dataset card (README.md with YAML metadata), rendered from a Jinja template in templates/."""

from __future__ import annotations

from importlib import resources
from typing import Any

import jinja2

from curation.params import ReleaseParams


def render_card(params: ReleaseParams, name: str, rows: list[dict[str, Any]], counts: dict[str, dict[str, int]],
                files: list[str]) -> str:
    text = resources.files("curation.release").joinpath("card.md.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    n = len(rows)
    size = "n<1K" if n < 1000 else ("1K<n<10K" if n < 10000 else "10K<n<100K")
    sources: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = sources.setdefault(r["source"], {"items": 0, "licenses": set(), "attributions": set()})
        s["items"] += 1
        s["licenses"].add(r["license"])
        if r["attribution"]:
            s["attributions"].add(r["attribution"])
    return env.from_string(text).render(
        params=params, name=name, n=n, size=size, counts=counts, files=files,
        splits=sorted({f.split("/")[1].split("-")[0] for f in files}), sources=sources,
        redistribution=params.redistribution,
    )
