"""Journal case reports as PMC Open Access JATS XML (one article a file, or an ``<articles>`` set)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from curation.errors import validation_message
from curation.figure_kinds import caption_kind
from curation.ingest.base import IngestContext, path_digest
from curation.ingest.panels import Panel, cut_figure, panel_captions
from curation.paths import safe_name, unique_name
from curation.schema import Case, Figure, FigureQC, PanelOf, Provenance, Publication, SourceName, attribution_of

XLINK = "{http://www.w3.org/1999/xlink}href"
CC = re.compile(r"\bCC[- ]BY(?:[- ](?:NC|SA|ND))*(?:[- ]\d\.\d)?\b", re.IGNORECASE)
CC_URL = re.compile(r"creativecommons\.org/licenses/([a-z-]+)/(\d\.\d)", re.IGNORECASE)


def _text(el: ET.Element | None) -> str:
    if el is None:
        return ""
    return " ".join("".join(el.itertext()).split())


def ingest(ctx: IngestContext) -> list[Case]:
    cases = []
    exts = set(ctx.spec["graphic_extensions"])
    for path in ctx.files():
        rel = ctx.rel_raw(path)
        if path.suffix.lower() in exts:
            continue  # figures are read through their articles
        if path.suffix.lower() not in (".xml", ".nxml"):
            ctx.report.skip(rel, "not_jats", "not an .xml/.nxml file")
            continue
        root = ctx.read_xml(path)
        if root is None:
            continue
        articles = [root] if root.tag == "article" else root.findall("article")
        if not articles:
            ctx.report.fail(rel, "xml_not_jats", f"root element <{root.tag}> holds no <article>")
            continue
        for n, article in enumerate(articles):
            where = rel if len(articles) == 1 else f"{rel}#article{n + 1}"
            kind = article.get("article-type", "")
            if kind not in ctx.spec["keep_article_types"]:
                ctx.report.skip(where, "not_case_report", f"article-type={kind or 'missing'}")
                continue
            try:
                case = _case(ctx, path, where, article)
            except FieldTooLong as exc:
                ctx.report.fail(where, "field_too_long", str(exc))
                continue
            except ValidationError as exc:
                ctx.report.fail(where, "article_malformed", validation_message(exc))
                continue
            except (ValueError, TypeError) as exc:
                ctx.report.fail(where, "article_malformed", f"{type(exc).__name__}: {exc}")
                continue
            if case is not None:
                cases.append(case)
    return cases


class FieldTooLong(ValueError):
    """A text field over ``bounds.max_field_chars``: the article is quarantined, never truncated silently."""


def _bounded(ctx: IngestContext, name: str, text: str) -> str:
    if len(text) > ctx.bounds.max_field_chars:
        raise FieldTooLong(f"{name} has {len(text)} characters (bounds.max_field_chars {ctx.bounds.max_field_chars})")
    return text


def _license(article: ET.Element, default: str) -> str:
    lic = article.find(".//permissions/license")
    if lic is None:
        return default
    href = lic.get(XLINK) or ""
    for ref in lic.iter():
        if ref.tag.endswith("license_ref"):
            href = href or _text(ref)
    text = _text(lic)
    m = CC_URL.search(href) or CC_URL.search(text)
    if m:
        return f"CC {m.group(1).upper()} {m.group(2)}"
    if "creative commons attribution" in text.lower():
        low = text.lower()
        parts = ["BY"] + [code for word, code in (("noncommercial", "NC"), ("noderiv", "ND"), ("sharealike", "SA"))
                          if word in low.replace("-", "")]
        ver = re.search(r"\b(\d\.\d)\b", text)
        return "CC " + "-".join(parts) + (f" {ver.group(1)}" if ver else "")
    m2 = CC.search(text)
    if m2:
        return m2.group(0).upper().replace(" ", "-").replace("CC-", "CC ")
    return _text(lic)[:200] or default


def _case_section(article: ET.Element, spec: dict[str, Any]) -> list[ET.Element]:
    title_re = re.compile(spec["case_title_pattern"], re.IGNORECASE)
    wanted = {s.lower() for s in spec["case_sec_types"]}
    body = article.find("body")
    if body is None:
        return []
    found = []
    for sec in body.iter("sec"):
        if (sec.get("sec-type") or "").lower() in wanted or title_re.match(_text(sec.find("title"))):
            found.append(sec)
    return found


def _case(ctx: IngestContext, path: Path, where: str, article: ET.Element) -> Case | None:
    spec = ctx.spec
    meta = article.find("front/article-meta")
    ids = {i.get("pub-id-type"): _text(i) for i in (meta.findall("article-id") if meta is not None else [])}
    pmcid = ids.get("pmcid") or ids.get("pmc")
    if pmcid and not pmcid.upper().startswith("PMC"):
        pmcid = f"PMC{pmcid}"
    doi = ids.get("doi")
    key = pmcid or doi or where
    case_id = ctx.case_id(key)
    title = _text(article.find("front/article-meta/title-group/article-title"))
    journal = _text(article.find("front/journal-meta/journal-title-group/journal-title")) or _text(
        article.find("front/journal-meta/journal-id"))
    authors = []
    for c in article.findall("front/article-meta/contrib-group/contrib"):
        if c.get("contrib-type") == "author":
            name = c.find("name")
            if name is not None:
                authors.append(f"{_text(name.find('given-names'))} {_text(name.find('surname'))}".strip())
    secs = _case_section(article, spec)
    if not secs:
        ctx.report.counts["case_section_not_found"] += 1
    # caption text is kept with its figure, not in the presentation
    presentation = "\n\n".join(
        "\n\n".join(_text(p) for p in sec.findall("p")) for sec in secs
    )
    discussion = "\n\n".join(
        "\n\n".join(_text(p) for p in sec.findall("p"))
        for sec in (article.find("body").iter("sec") if article.find("body") is not None else [])
        if re.match(r"\s*discussion", _text(sec.find("title")), re.IGNORECASE) or sec.get("sec-type") == "discussion"
    )
    abstract = _text(article.find("front/article-meta/abstract"))
    presentation = _bounded(ctx, "case section", presentation)
    discussion = _bounded(ctx, "discussion", discussion)
    abstract = _bounded(ctx, "abstract", abstract)
    title = _bounded(ctx, "article-title", title)
    journal = _bounded(ctx, "journal-title", journal)
    _bounded(ctx, "author list", " ".join(authors))
    figures = _figures(ctx, path, where, article, case_id)
    return Case(
        case_id=case_id, source=SourceName("case-reports"), license=_license(article, spec["default_license"]),
        attribution=attribution_of(authors, journal, doi),
        origin=f"https://doi.org/{doi}" if doi else f"https://pmc.ncbi.nlm.nih.gov/articles/{pmcid}/" if pmcid
        else None,
        publication=Publication(title=title or None, journal=journal or None, doi=doi, pmcid=pmcid, authors=authors,
                                url=f"https://doi.org/{doi}" if doi else None),
        title=title or None, history=abstract, presentation=presentation, notes=discussion, figures=figures,
        provenance=Provenance(source_paths=[path_digest(where)]),
    )


def _figures(ctx: IngestContext, path: Path, where: str, article: ET.Element, case_id: str) -> list[Figure]:
    """The article's figures with their labels and captions, each graphic stored beside the case; one whose
    graphic is missing, too long a name or outside the raw folder is kept as missing, with its reason counted."""
    spec = ctx.spec
    figures = []
    seen_ids: set[str] = set()
    for n, fig in enumerate(article.iter("fig")):
        # a fig id is a name, never a path: it becomes one safe file name (too long: the figure's number)
        raw_id = fig.get("id") or f"fig{n + 1}"
        graphic = fig.find(".//graphic")
        href = graphic.get(XLINK) if graphic is not None else None
        label = _bounded(ctx, f"label of figure {n + 1}", _text(fig.find("label"))) or None
        caption = _bounded(ctx, f"caption of figure {n + 1}", _text(fig.find("caption")))
        fig_id = safe_name(raw_id) if len(raw_id) <= ctx.bounds.max_id_chars else f"fig{n + 1}"
        fig_id = unique_name(fig_id, seen_ids)
        fig_where = f"{where}#{fig_id}"
        if len(raw_id) > ctx.bounds.max_id_chars:
            ctx.report.incomplete(fig_where, "figure_id_too_long",
                                  f"fig id of {len(raw_id)} characters (bounds.max_id_chars "
                                  f"{ctx.bounds.max_id_chars}); the figure is kept as {fig_id}")
        if href is not None and len(href) > ctx.bounds.max_id_chars * 4:
            ctx.report.incomplete(fig_where, "figure_href_too_long", f"href of {len(href)} characters")
            figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True))
            continue
        fig_path = _resolve(path.parent, href, spec["graphic_extensions"]) if href else None
        if fig_path is not None and not ctx.inside_raw(fig_path):
            ctx.report.inputs += 1  # the file it names is an input that cannot be used
            ctx.report.fail(fig_where, "outside_raw", f"graphic {href[:200]!r} resolves outside the raw folder; "
                                                      "not read")
            figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True))
            continue
        if fig_path is None:
            ctx.report.incomplete(fig_where, "figure_missing",
                                  f"{fig_id} in {where}: graphic {href[:200] if href else 'not given'} "
                                  "not found next to the XML")
            figures.append(Figure(figure_id=fig_id, label=label, caption=caption, missing=True))
            continue
        title, said = panel_captions(caption)
        panels = cut_figure(fig_path, said, ctx.bounds.max_image_pixels)
        if panels:  # a figure of lettered panels: each panel a figure, with what the caption says of it
            figures += _panel_figures(ctx, case_id, fig_id, label, title, panels, seen_ids)
            continue
        if said:
            ctx.report.counts["figures_of_panels_not_cut"] += 1
        stored = ctx.store(fig_path, case_id, f"{fig_id}{fig_path.suffix.lower()}")
        # what the image is, where its caption describes one image of one kind (a figure of panels names none)
        kind = caption_kind(caption)
        ctx.report.counts["figures_kind_from_caption" if kind.kind else "figures_without_kind"] += 1
        figures.append(Figure(figure_id=fig_id, label=label, caption=caption, path=stored, **kind.model_dump()))
    return figures


def _panel_figures(ctx: IngestContext, case_id: str, fig_id: str, label: str | None, title: str,
                   panels: list[tuple[Panel, bytes]], seen_ids: set[str]) -> list[Figure]:
    """One figure per panel ("F2a", labelled "Figure 2 A"), its kind read from what the caption says of it and the
    title it gives all panels; where it lies in the figure it was cut from is kept in its qc."""
    ctx.report.counts["figures_cut_into_panels"] += 1
    shared = Counter(panel.caption for panel, _ in panels)
    out = []
    for panel, data in panels:
        pid = unique_name(f"{fig_id}{panel.letter.lower()}", seen_ids)
        kind = caption_kind(panel.caption, panels=shared[panel.caption], title=title)
        ctx.report.counts["panels_kind_from_caption" if kind.kind else "panels_without_kind"] += 1
        out.append(Figure(figure_id=pid, label=f"{label or 'Figure'} {panel.letter}", caption=panel.caption,
                          path=ctx.write(data, case_id, f"{pid}.png"), **kind.model_dump(),
                          qc=FigureQC(panel_of=PanelOf(figure_id=fig_id, letter=panel.letter, box=list(panel.box)))))
    return out


def _resolve(folder: Path, href: str, exts: list[str]) -> Path | None:
    """The file an href names beside the XML (the caller checks it lies inside the raw folder)."""
    try:
        candidate = folder / href
        if candidate.suffix and candidate.is_file():
            return candidate
        for ext in exts:
            for variant in (ext, ext.upper()):
                p = folder / f"{href}{variant}"
                if p.is_file():
                    return p
    except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
        return None
    return None
