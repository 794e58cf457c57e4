"""A journal figure of lettered panels is cut into its panels where its caption and its gutters agree, on real images:
a single real image is never cut, and figures composed of real MedPix images, as journals lay them out, are cut back
into the images they were made of, in the order of their letters."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from curation.ingest import run
from curation.ingest.panels import panel_boxes, panel_captions
from curation.jsonio import read_jsonl
from curation.params import IngestParams
from curation.schema import Case

from .conftest import SHARED

MEDPIX = SHARED / "fixtures" / "medpix-dev"
needs_medpix = pytest.mark.skipif(not MEDPIX.is_dir(), reason="shared fixtures absent")


@pytest.mark.parametrize(("caption", "want"), [
    ("(A) Axial FLAIR shows a mass. (B) Axial T1 after gadolinium shows ring enhancement.",
     [("A", "Axial FLAIR shows a mass."), ("B", "Axial T1 after gadolinium shows ring enhancement.")]),
    ("Brain MRI at presentation. (a) Axial T2-weighted image showing a mass; (b) diffusion-weighted image.",
     [("A", "Axial T2-weighted image showing a mass"), ("B", "diffusion-weighted image.")]),
    ("A, Axial T2 image shows a lesion. B, Diffusion-weighted image. C, ADC map.",
     [("A", "Axial T2 image shows a lesion."), ("B", "Diffusion-weighted image."), ("C", "ADC map.")]),
    ("(A and B) Axial FLAIR images show lesions. (C) Sagittal T1.",
     [("A", "Axial FLAIR images show lesions."), ("B", "Axial FLAIR images show lesions."), ("C", "Sagittal T1.")]),
    ("(A-C) Axial FLAIR at three levels.", [(x, "Axial FLAIR at three levels.") for x in "ABC"]),
    ("(A) Axial CT: a dense left basal ganglia (B) Axial FLAIR: no lesion",
     [("A", "Axial CT: a dense left basal ganglia"), ("B", "Axial FLAIR: no lesion")]),
    # letters that refer to panels from inside a sentence, a gap in the letters, one letter: not panel by panel
    ("Axial T2 shows a lesion in the left (a) and right (b) thalamus.", []),
    ("(A) Axial T2 and (B) DWI of the same lesion.", []),
    ("Axial FLAIR (A) and DWI (B) show a lesion.", []),
    ("(A) Axial FLAIR. (C) DWI.", []),
    ("(A) Axial FLAIR shows a mass.", []),
    ("A 45-year-old man with headache.", []),
    # letters after what they label would each take the next panel's words
    ("Axial T2 (A) Coronal T2 (B) Sagittal T1 (C) Arrows indicate the lesion.", []),
    ("Axial FLAIR image (A) Diffusion-weighted image (B) The lesion is marked by arrows.", []),
    # a letter past L, which the marks do not take, would be read into the last panel's words
    ("(A) Axial CT. (B) CTA. (C) DSA. (D) T2. (E) FLAIR. (F) DWI. (G) ADC. (H) SWI. (I) T1. (J) T1C. (K) MRA. "
     "(L) MRV. (M) Gross.", []),
])
def test_a_caption_is_read_panel_by_panel_only_where_each_letter_begins_its_description(
        caption: str, want: list[tuple[str, str]]) -> None:
    assert panel_captions(caption)[1] == want


def test_the_title_a_caption_gives_all_its_panels_is_kept_for_their_kind() -> None:
    from curation.figure_kinds import caption_kind

    title, said = panel_captions("Post-contrast MRI. (A) Axial T1 shows ring enhancement. (B) Coronal T1 shows it.")
    assert title == "Post-contrast MRI." and [caption_kind(w, title=title).kind for _, w in said] == ["T1C", "T1C"]
    title, said = panel_captions("CT angiography. (A) Axial CT shows occlusion. (B) Coronal MIP.")
    assert caption_kind(said[0][1], title=title).kind is None


def _grey(path: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(path).convert("L"))


def _compose(paths: list[Path], cols: int, gutter: int, colour: int, height: int = 300):
    """A figure of ``paths`` as a journal lays one out: each image scaled to one height, ``cols`` to a row, a margin
    of ``gutter`` pixels of one colour between them, a white letter in each panel's corner. Returns the figure and
    where each image was put."""
    from PIL import Image, ImageDraw

    ims = [Image.open(p).convert("RGB") for p in paths]
    ims = [im.resize((max(1, round(im.width * height / im.height)), height)) for im in ims]
    rows = [ims[i:i + cols] for i in range(0, len(ims), cols)]
    width = max(sum(im.width for im in r) + gutter * (len(r) - 1) for r in rows)
    fig = Image.new("RGB", (width, len(rows) * height + gutter * (len(rows) - 1)), (colour,) * 3)
    boxes: list[tuple[int, int, int, int]] = []
    for r, row in enumerate(rows):
        x, y = 0, r * (height + gutter)
        for im in row:
            fig.paste(im, (x, y))
            ImageDraw.Draw(fig).text((x + 6, y + 6), chr(ord("A") + len(boxes)), fill=(255, 255, 255))
            boxes.append((x, y, x + im.width, y + height))
            x += im.width + gutter
    return fig, boxes


@needs_medpix
def test_real_images_are_never_cut_and_figures_made_of_them_are_cut_back() -> None:
    images = sorted((MEDPIX / "images").iterdir())
    # one real image (a CT with its head holder's arcs, a scan with text in its corners) is one panel
    assert all(panel_boxes(_grey(p), 2) is None for p in images)
    rng = random.Random(7)
    cut = 0
    trials = 48
    for t in range(trials):
        k = rng.choice([2, 3, 4])
        gutter, colour = ((8, 255), (3, 255), (4, 0))[t % 3]
        fig, truth = _compose(rng.sample(images, k), 2 if k == 4 else k, gutter, colour)
        boxes = panel_boxes(np.asarray(fig.convert("L")), k)
        if boxes is None:
            continue
        cut += 1
        for box, want in zip(boxes, truth, strict=True):  # in letter order, each within its own image
            assert want[0] <= box[0] < box[2] <= want[2] and want[1] <= box[1] < box[3] <= want[3], (box, want)
            assert (box[2] - box[0]) * (box[3] - box[1]) >= 0.25 * (want[2] - want[0]) * (want[3] - want[1])
    assert cut >= 0.9 * trials, cut


@needs_medpix
def test_a_case_report_figure_of_panels_becomes_one_teaching_figure_a_panel(tmp_path: Path) -> None:
    from curation.generate.engine import Engine
    from curation.params import GenerateParams
    from curation.schema import Diagnosis, Render

    from .conftest import ROOT

    raw = tmp_path / "raw"
    raw.mkdir()
    # a real case's FLAIR and post-contrast T1 (MedPix MPX1014, Wernicke encephalopathy), as a journal would show them
    flair, t1c = MEDPIX / "images" / "MPX1014_synpic41745.png", MEDPIX / "images" / "MPX1014_synpic41746.png"
    fig, truth = _compose([flair, t1c], 2, 10, 255)
    fig.save(raw / "g1.jpg", quality=92)
    caption = ("Brain MRI at admission. (A) Axial FLAIR MRI shows hyperintensity in both thalami and the "
               "periaqueductal grey matter. (B) Axial T1-weighted MRI after gadolinium shows enhancement of the "
               "mamillary bodies and the periaqueductal grey matter.")
    (raw / "a.nxml").write_text(
        '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="case-report"><front><article-meta>'
        '<article-id pub-id-type="doi">10.1/x</article-id><title-group><article-title>Stupor after chemotherapy'
        '</article-title></title-group></article-meta></front><body><sec><title>Case report</title>'
        '<p>A 52-year-old woman on chemotherapy with poor oral intake became stuporous.</p></sec>'
        '<fig id="F1"><label>Figure 1</label><caption>'
        f'<p>{caption}</p></caption><graphic xlink:href="g1"/></fig></body></article>', encoding="utf-8")
    report = run(IngestParams(max_failure_rate=0.5), "case-reports", raw, tmp_path / "out")
    (case,) = read_jsonl(tmp_path / "out" / "cases.jsonl", Case)
    assert report.counts["figures_cut_into_panels"] == 1
    assert [(f.figure_id, f.label, f.kind, f.plane) for f in case.figures] == [
        ("F1a", "Figure 1 A", "FLAIR", "axial"), ("F1b", "Figure 1 B", "T1C", "axial")]
    assert case.figures[1].caption.startswith("Axial T1-weighted MRI after gadolinium")
    for f, want in zip(case.figures, truth, strict=True):
        assert f.qc.panel_of is not None and f.qc.panel_of.figure_id == "F1"
        left, top, right, bottom = f.qc.panel_of.box
        assert want[0] <= left and right <= want[2] and want[1] <= top and bottom <= want[3]
        from PIL import Image

        with Image.open(tmp_path / "out" / "files" / case.case_id / f"{f.figure_id}.png") as im:
            assert im.size == (right - left, bottom - top)  # the figure's pixels, at their resolution
    # the panels go through the teaching engine as MedPix figures do
    case.diagnosis = Diagnosis(primary="Wernicke encephalopathy")
    for f in case.figures:
        f.path = str(tmp_path / "out" / "files" / case.case_id / f"{f.figure_id}.png")
        f.renders = [Render(plane="figure", role="figure", path=f.path, target="figure")]
    engine = Engine(GenerateParams(templates_dir=str(ROOT / "templates" / "questions"),
                                   knowledge=str(ROOT / "templates" / "knowledge" / "neurology.yaml"),
                                   diagnoses=str(ROOT / "templates" / "knowledge" / "diagnoses.yaml")))
    items, _ = engine.generate(case)
    made = {i.template_id for i in items}
    # (no diagnosis: one panel describes the finding, and neither a choice among Wernicke's mimics nor the reasoning
    # to it is asked of one image)
    assert {"teaching_sequence", "teaching_compartment"} <= made, made
    assert not {"teaching_rationale", "teaching_diagnosis"} & made, made
    assert all(set(i.images) <= {f.path for f in case.figures} for i in items)


def _medpix_as_case_reports(raw: Path) -> int:
    """The MedPix dev cases laid out as journal case reports: one JATS article a case (history, examination and
    findings as the case presentation; differential, diagnosis and discussion as the discussion), its images two to
    a figure with white gutters and lettered panels, each panel's caption naming its kind and plane as a journal's does
    ("Axial FLAIR MRI: <the MedPix caption>"). Returns the number of figures of two panels."""
    import html
    import json

    from curation.figure_kinds import caption_kind, figure_kind, kind_name

    topics = json.loads((MEDPIX / "Case_topic.json").read_text(encoding="utf-8"))
    by_case: dict[str, list[dict]] = {}
    for d in json.loads((MEDPIX / "Descriptions.json").read_text(encoding="utf-8")):
        by_case.setdefault(d["U_id"], []).append(d)

    def said(d: dict) -> str:
        desc = d.get("Description") or {}
        cap = " ".join((desc.get("Caption") or "").split())
        k = figure_kind(desc.get("Modality") or "", desc.get("Plane"))
        if caption_kind(cap).kind or not k.kind:
            return cap
        return f"{(k.plane or '').capitalize()} {kind_name(k.kind).replace(' without contrast', '')}: {cap}".strip()

    def esc(s: object) -> str:
        return html.escape(" ".join(str(s or "").split()))

    pairs = 0
    for t in topics:
        c, uid = t["Case"], t["U_id"]
        figs = []
        images = by_case.get(uid, [])
        for g in range(0, len(images), 2):
            group, name = images[g:g + 2], f"{uid}-g{g // 2 + 1}"
            paths = [MEDPIX / "images" / f"{d['image']}.png" for d in group]
            if len(group) == 1:
                from PIL import Image

                Image.open(paths[0]).convert("RGB").save(raw / f"{name}.jpg", quality=92)
                caption = said(group[0])
            else:
                pairs += 1
                height = max(_grey(p).shape[0] for p in paths)
                _compose(paths, 2, 10, 255, height=height)[0].save(raw / f"{name}.jpg", quality=92)
                a, b = (said(d) for d in group)
                caption = f"(A and B) {a}" if a == b else f"(A) {a} (B) {b}"
            figs.append(f'<fig id="F{g // 2 + 1}"><label>Figure {g // 2 + 1}</label><caption><p>{esc(caption)}</p>'
                        f'</caption><graphic xlink:href="{name}"/></fig>')
        (raw / f"{uid}.nxml").write_text(
            '<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="case-report"><front><article-meta>'
            f'<article-id pub-id-type="doi">10.0000/{uid}</article-id><title-group><article-title>'
            f'{esc(c.get("Title"))}: a case report</article-title></title-group><abstract><p>{esc(c.get("History"))}'
            f'</p></abstract></article-meta></front><body><sec sec-type="cases"><title>Case presentation</title><p>'
            f'{esc(c.get("History"))} {esc(c.get("Exam"))}</p><p>Imaging: {esc(c.get("Findings"))}</p></sec><sec>'
            f'<title>Discussion</title><p>The differential diagnosis included {esc(c.get("Differential Diagnosis"))}. '
            f'The final diagnosis was {esc(c.get("Case Diagnosis"))}.</p><p>{esc(c.get("Discussion"))}</p></sec>'
            f'{"".join(figs)}</body></article>', encoding="utf-8")
    return pairs


@needs_medpix
@pytest.mark.integration
def test_real_teaching_cases_laid_out_as_journal_case_reports_make_teaching_items(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """The real MedPix dev cases, laid out as journal case reports with figures of two panels, go through the same
    understanding as through the MedPix source: every figure of two panels is cut into its images, each panel's kind
    is the one MedPix states, and the teaching templates make about as many items a case (235 kept from the MedPix
    source)."""
    import json

    from curation.generate.stage import run as generate
    from curation.nlp.extract import run as extract
    from curation.params import load_params
    from curation.schema import Item, Render

    from .conftest import ROOT

    raw = tmp_path / "raw"
    raw.mkdir()
    pairs = _medpix_as_case_reports(raw)
    monkeypatch.chdir(tmp_path)
    report = run(IngestParams(max_failure_rate=0.5), "case-reports", raw, tmp_path / "ingest")
    assert report.counts["figures_cut_into_panels"] >= 0.95 * pairs > 90, (report.counts, pairs)
    cases = list(read_jsonl(tmp_path / "ingest" / "cases.jsonl", Case))
    assert len(cases) == 77
    truth = {}
    for d in json.loads((MEDPIX / "Descriptions.json").read_text(encoding="utf-8")):
        from curation.figure_kinds import figure_kind

        desc = d.get("Description") or {}
        truth[d["image"]] = figure_kind(desc.get("Modality") or "", desc.get("Plane")).kind
    (tmp_path / "normalize").mkdir()
    with (tmp_path / "normalize" / "cases.jsonl").open("w", encoding="utf-8") as fh:
        for c in cases:
            for f in c.figures:
                f.renders = [Render(plane="figure", role="figure", path=f.path, target="figure")] if f.path else []
            fh.write(c.model_dump_json() + "\n")
    p = load_params(ROOT / "params.yaml")
    p.extract.lexicon = str(ROOT / p.extract.lexicon)
    for k in ("templates_dir", "knowledge", "diagnoses"):
        setattr(p.generate, k, str(ROOT / getattr(p.generate, k)))
    extract(p.extract, tmp_path / "normalize", tmp_path / "extract")
    generate(p.generate, tmp_path / "extract", tmp_path / "generate")
    items = list(read_jsonl(tmp_path / "generate" / "items.jsonl", Item))
    teaching = [i for i in items if i.template_id.startswith("teaching_")]
    assert len(teaching) >= 2.5 * 77, len(teaching)
    # a sequence item's key is the kind MedPix states for the image its panel was cut from
    by_path = {}
    for c in cases:
        uid = c.publication.doi.rsplit("/", 1)[-1]
        images = [d["image"] for d in json.loads((MEDPIX / "Descriptions.json").read_text()) if d["U_id"] == uid]
        for f in c.figures:
            n = int(f.figure_id[1:].rstrip("ab")) - 1
            by_path[f.path] = images[2 * n + (f.figure_id.endswith("b"))]
    asked = [i for i in teaching if i.template_id == "teaching_sequence"]
    assert len(asked) >= 20
    from curation.figure_kinds import kind_name

    stated = [(i.answer, kind_name(k)) for i in asked if (k := truth[by_path[i.images[0]]])]
    agree = sum(a == b for a, b in stated)
    assert agree >= 0.9 * len(stated) and len(stated) >= 0.8 * len(asked), stated
