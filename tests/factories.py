"""Builders of small, valid ``curation.schema`` records and of the input folders the stages read, for the fast unit
layer (no demo corpus, no pipeline). Paths in records are relative: tests run with the working directory in their
``tmp_path``, the project root of the records they build, as ``dvc repro`` runs in the real one."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from curation.jsonio import write_jsonl
from curation.params import Params, load_params
from curation.schema import Case, Diagnosis, Evidence, Figure, Generator, Item, Patient, Render, SourceName

ROOT = Path(__file__).resolve().parents[1]

# five options of one length, no article cue, none named in the question: an MCQ no blind baseline can read
GRADES = ["grade 1", "grade 2", "grade 3", "grade 4", "grade 5"]
QUESTION = "How would you grade the abnormality on this image?"
LICENSE = {"radiopaedia": "CC BY-NC-SA 3.0", "case-reports": "CC BY 4.0", "adni": "ADNI DUA", "oasis1": "OASIS DUA",
           "oasis3": "OASIS DUA",
           "medpix": "MedPix terms: free for education and research, no licence stated (U.S. National Library of "
                     "Medicine)"}


def project_params() -> Params:
    """The project's params.yaml, with the paths it names made absolute (tests run in their own folder)."""
    p = load_params(ROOT / "params.yaml")
    p.generate.templates_dir = str(ROOT / p.generate.templates_dir)
    p.generate.knowledge = str(ROOT / p.generate.knowledge)
    p.generate.diagnoses = str(ROOT / p.generate.diagnoses)
    p.generate.prompts_dir = str(ROOT / p.generate.prompts_dir)
    p.extract.lexicon = str(ROOT / p.extract.lexicon)
    p.filter.prompts_dir = str(ROOT / p.filter.prompts_dir)
    if p.filter.lexicon:
        p.filter.lexicon = str(ROOT / p.filter.lexicon)
    return p


def png(path: str | Path, shade: int = 128, size: int = 32) -> str:
    """A small grey PNG with a bright square (its shade makes the bytes differ); returns the path as given."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("L", (size, size), 0)
    im.paste(shade % 256, (size // 4, size // 4, 3 * size // 4, 3 * size // 4))
    im.save(path)
    return path.as_posix()


def item(n: int, *, template: str = "tpl", case_id: str | None = None, source: str = "radiopaedia",
         question: str = QUESTION, options: list[str] | None = None, key: int | None = None,
         images: list[str] | None = None, write_image: bool = True, status: str = "kept", **kw: Any) -> Item:
    """MCQ number ``n`` of ``template``: the answer at ``key`` (default: letters in turn), one image of its own
    (written under img/ unless ``write_image`` is false), its own case unless ``case_id`` says otherwise."""
    options = list(GRADES if options is None else options)
    key = n % len(options) if key is None else key
    if images is None:
        rel = f"img/{template}-{n:02d}.png"
        images = [png(rel, 40 + 17 * n) if write_image else rel]
    fields: dict[str, Any] = dict(
        item_id=f"itm-{template}-{n:02d}", case_id=case_id or f"case-{n:02d}", source=source,
        task_type="lesion_recognition", format="mcq", question=question, options=options,
        answer=options[key] if options else "", answer_index=key if options else None,
        images=images, evidence=[Evidence(image=i, sequence="FLAIR", plane="axial", target="lesion") for i in images],
        template_id=template, generator=Generator(kind="template", template_id=template, template_version="1"),
        license=LICENSE[source], status=status, split="test")
    fields.update(kw)
    return Item(**fields)


def figure_case(n: int, *, dx: str | None, source: str = "radiopaedia", age: int = 60,
                differential: list[str] | None = None) -> Case:
    """A report case with one figure (its render at r/case-NN.png, not written) and a primary diagnosis."""
    fig = Figure(figure_id=f"fig-{n}", caption="Axial FLAIR MRI",
                 renders=[Render(plane="figure", path=f"r/case-{n:02d}.png", role="figure")])
    return Case(case_id=f"case-{n:02d}", source=SourceName(source), license=LICENSE[source],
                patient=Patient(age=age, sex="F" if n % 2 else "M"), figures=[fig],
                diagnosis=Diagnosis(primary=dx, differential=differential or []))


@contextmanager
def without_git() -> Iterator[None]:
    """The release stage asks git for the project's revision and tree state; a unit test's folder is no checkout, so
    git would answer nothing, as this does without starting it (tests/test_hostile.py builds in a real git project)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("curation.release.build._git", lambda *args: None)
        yield


def write_items(folder: str | Path, items: Iterable[Item]) -> Path:
    """``folder/items.jsonl``, the input of filter, review and release; returns the folder."""
    folder = Path(folder)
    write_jsonl(folder / "items.jsonl", items)
    return folder


def write_cases(folder: str | Path, cases: Iterable[Case]) -> Path:
    """``folder/cases.jsonl``, the input of generate; returns the folder."""
    folder = Path(folder)
    write_jsonl(folder / "cases.jsonl", cases)
    return folder


def through_generate(p: Params, source: str, raw: Path, work: Path, *, workers: int = 2) -> dict[str, Any]:
    """A raw download of ``source`` through ingest, deidentify, normalize, extract and generate in ``work`` (its
    current folder while they run, as under ``dvc repro``): the stage reports, the normalized cases, the items, and
    whether each item's images were written (``images``: item id -> one bool per image)."""
    import os

    from curation.deid.stage import run as deid
    from curation.generate.stage import run as generate
    from curation.imaging.normalize import run as normalize
    from curation.ingest import run as ingest
    from curation.jsonio import read_jsonl
    from curation.nlp.extract import run as extract

    old = Path.cwd()
    os.chdir(work)
    try:
        reports = {"ingest": ingest(p.ingest, source, raw, work / "ingest" / source).as_dict()}
        reports["deid"] = deid(p.deidentify, work / "ingest", work / "deid").as_dict()
        reports["normalize"] = normalize(p.normalize, work / "deid", work / "normalize", workers=workers).as_dict()
        extract(p.extract, work / "normalize", work / "extract")
        reports["generate"] = generate(p.generate, work / "extract", work / "generate").as_dict()
        ingested = list(read_jsonl(work / "ingest" / source / "cases.jsonl", Case))
        cases = list(read_jsonl(work / "normalize" / "cases.jsonl", Case))
        items = list(read_jsonl(work / "generate" / "items.jsonl", Item))
        images = {i.item_id: [(work / x).is_file() for x in i.images] for i in items}
    finally:
        os.chdir(old)
    return {"reports": reports, "ingested": ingested, "cases": cases, "items": items, "images": images}
