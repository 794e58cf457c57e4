"""The dataset card (README.md with YAML metadata), rendered from a Jinja template in templates/."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import jinja2

from curation.params import ReleaseParams
from curation.release.rai import rai_fields
from curation.release.terms import CLASSES, class_description
from curation.schema import ReleaseRow

# The card names the manifest's digest, and the manifest lists the card's checksum: the checksum is taken over
# the card with this placeholder in place of the digest (verify puts it back before comparing).
DIGEST_PLACEHOLDER = "0" * 64
DIGEST_LINE = re.compile(r"(\*\*Manifest SHA-256:\*\* `)([0-9a-f]{64})(`)")
DIGEST_SHORT = re.compile(r"(--digest )([0-9a-f]{12})(…)")


def with_digest(card: str, digest: str) -> str:
    """The card text with ``digest`` (or the placeholder) as the manifest digest it names."""
    card = DIGEST_LINE.sub(lambda m: m.group(1) + digest + m.group(3), card, count=1)
    return DIGEST_SHORT.sub(lambda m: m.group(1) + digest[:12] + m.group(3), card, count=1)


def stated_digest(card: str) -> str | None:
    m = DIGEST_LINE.search(card)
    return m.group(2) if m else None


def render_card(params: ReleaseParams, name: str, rows: list[ReleaseRow], counts: dict[str, dict[str, int]],
                files: list[str], checks: dict[str, int] | None = None, agreement: dict[str, Any] | None = None,
                manifest_sha256: str = DIGEST_PLACEHOLDER, validity: dict[str, Any] | None = None) -> str:
    text = resources.files("curation.release").joinpath("card.md.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["pct"] = pct
    n = len(rows)
    size = "n<1K" if n < 1000 else ("1K<n<10K" if n < 10000 else "10K<n<100K")
    sources: dict[str, dict[str, Any]] = {}
    for r in rows:
        s = sources.setdefault(r.source, {"items": 0, "licenses": set(), "attributions": set(), "spdx": set(),
                                          "classes": set()})
        s["items"] += 1
        s["licenses"].add(r.license)
        s["spdx"].add(r.license_spdx or "none (named terms)")
        s["classes"].add(r.license_class)
        if r.attribution:
            s["attributions"].add(r.attribution)
    return env.from_string(text).render(
        params=params, name=name, n=n, size=size, counts=counts, files=files,
        splits=sorted({f.split("/")[1].split("-")[0] for f in files}), sources=sources,
        redistribution=params.redistribution, checks=checks or {}, agreement=agreement or {},
        manifest_sha256=manifest_sha256, validity=validity or template_validity([], None, []),
        licence_classes={c: (class_description(c), sum(r.license_class == c for r in rows)) for c in CLASSES},
        licence_filter=params.licence_filter, rai=rai_fields(),
    )


def distribution_plot(counts: dict[str, dict[str, int]]) -> bytes:
    """Items per task type and per dimension, as a PNG (deterministic bytes for the same counts)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    tt = counts.get("task_type", {})
    a.barh(list(tt), list(tt.values()), color="#3b6ea8")
    a.set_title("items per task type")
    a.invert_yaxis()
    dims = {f"visual: {k}": v for k, v in counts.get("visual_dim", {}).items()}
    dims |= {f"reasoning: {k}": v for k, v in counts.get("reasoning_dim", {}).items()}
    b.barh(list(dims), list(dims.values()), color=["#3b6ea8" if k.startswith("visual") else "#c0504d" for k in dims])
    b.set_title("items per dimension")
    b.invert_yaxis()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def template_validity(items: list[Any], report: dict[str, Any] | None,
                      allowed: list[str]) -> dict[str, Any]:
    """The card's validity section: per template in the release, its items, what its images show (target and
    view from ``Item.evidence``), its dimension tags and the validity figures the filter stage measured; templates
    the filter blocked; and the templates that would make the release refuse to build (``refused``)."""
    from collections import Counter

    from curation.quality.items import template_key

    measured = (report or {}).get("templates", {})
    out: dict[str, Any] = {"templates": {}, "blocked": {}, "refused": [], "allowed": [], "unmeasured_items": 0,
                           "overall": (report or {}).get("overall"), "report": report is not None,
                           "threshold": (report or {}).get("max_blind_lift"),
                           "confidence": (report or {}).get("confidence", 0.0),
                           "models": ((report or {}).get("model_baselines") or {}).get("status", "not measured"),
                           "difficulty_by_model": (report or {}).get("difficulty_by_model")}
    by_t: dict[str, list[Any]] = {}
    for i in items:
        by_t.setdefault(template_key(i), []).append(i)
    for t, its in sorted(by_t.items()):
        stamp = next((i.quality.template_validity for i in its if i.quality.template_validity), None)
        entry = measured.get(t) or {}
        above = bool((stamp and stamp.above_threshold) or entry.get("above_threshold"))
        if stamp is None and not entry:
            out["unmeasured_items"] += len(its)
        if above:
            (out["allowed"] if t in allowed else out["refused"]).append(t)
        ev = [e for i in its for e in i.evidence]
        out["templates"][t] = {
            "items": len(its),
            "targets": dict(Counter(e.target or "-" for e in ev).most_common()),
            "views": dict(Counter(" ".join(x for x in (e.sequence, e.plane) if x) or "-" for e in ev).most_common()),
            "visual_dims": dict(sorted(Counter(d.value for i in its for d in i.visual_dims).items())),
            "reasoning_dims": dict(sorted(Counter(d.value for i in its for d in i.reasoning_dims).items())),
            "above_threshold": above, "measured": entry or None,
            "reasons": entry.get("reasons") or (stamp.reasons if stamp else []),
        }
    for t, entry in sorted(measured.items()):
        if entry.get("blocked"):
            out["blocked"][t] = {"items": entry["items"], "reasons": entry["reasons"], "detail": entry.get("detail")}
    return out


def pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}"
