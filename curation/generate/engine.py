"""Templates (YAML + Jinja2) -> items, with seeded, balanced options from the knowledge table."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from curation.errors import ParamsError
from curation.generate.facts import case_facts, lookup
from curation.params import GenerateParams
from curation.records import content_hash
from curation.schema import Case, Generator, Item, ItemFormat, ReasoningDim, TaskType, Turn, VisualDim

LETTERS = "ABCDEFGH"


class Distractors(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: str
    key: str | None = None


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    version: int
    task_type: TaskType
    format: ItemFormat
    visual_dims: list[VisualDim] = Field(default_factory=list)
    reasoning_dims: list[ReasoningDim] = Field(default_factory=list)
    sources: list[str] | None = None
    requires: list[str]
    images: list[str] = Field(default_factory=list)
    context: str = ""
    question: str
    answer: str
    reference_answer: str | None = None
    rationale: str | None = None
    turns: list[dict[str, str]] = Field(default_factory=list)
    distractors: Distractors | None = None


def load_templates(folder: str | Path) -> list[Template]:
    folder = Path(folder)
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ParamsError("no template files (*.yaml)", folder)
    out: list[Template] = []
    ids: set[str] = set()
    for path in files:
        try:
            docs = yaml.safe_load(path.read_text()) or []
        except yaml.YAMLError as exc:
            raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", path) from None
        for n, doc in enumerate(docs):
            try:
                t = Template.model_validate(doc)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(map(str, first["loc"]))
                raise ParamsError(f"template {n + 1}: {where}: {first['msg']}", path) from None
            if t.id in ids:
                raise ParamsError(f"duplicate template id {t.id}", path)
            if t.format == ItemFormat.mcq and t.distractors is None:
                raise ParamsError(f"template {t.id}: an MCQ needs distractors", path)
            ids.add(t.id)
            out.append(t)
    return out


class Engine:
    def __init__(self, params: GenerateParams) -> None:
        self.params = params
        self.templates = load_templates(params.templates_dir)
        try:
            self.knowledge = yaml.safe_load(Path(params.knowledge).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ParamsError(f"cannot read knowledge table ({exc.__class__.__name__})", params.knowledge) from None
        self._compiled: dict[str, jinja2.Template] = {}
        self.env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=False)
        # per-template counters: the correct letter cycles within each template, so it is uniform over the set
        # and a changed template moves only its own items
        self.mcq_counter: dict[str, int] = {}

    def render(self, text: str, facts: dict[str, Any]) -> str:
        compiled = self._compiled.get(text)
        if compiled is None:
            compiled = self._compiled[text] = self.env.from_string(text)
        return " ".join(compiled.render(**facts).split())

    def distractor_pool(self, spec: Distractors, facts: dict[str, Any], answer: str) -> list[str]:
        kb = self.knowledge
        # a quoted key is literal ("'ex vacuo ventriculomegaly'"); otherwise it names a fact
        if spec.key and spec.key.startswith("'"):
            key = spec.key.strip("'")
        else:
            key = lookup(facts, spec.key) if spec.key else None
        if spec.table == "case_differential_then_differentials":
            pool = list(facts.get("differential", [])) + list(kb.get("differentials", {}).get(key, []))
        elif spec.table == "trends_plus":
            pool = list(kb.get("trends", [])) + ["cannot be assessed from imaging", "fluctuating"]
        else:
            table = kb.get(spec.table, [])
            # a list is the pool itself; a mapping is keyed by a fact (the answer, if listed, is dropped below)
            pool = list(table) if isinstance(table, list) else list(table.get(key, []))
        seen = {answer.lower()}
        out = []
        for p in pool:
            if p.lower() not in seen:
                seen.add(p.lower())
                out.append(p)
        return out

    def generate(self, case: Case) -> tuple[list[Item], dict[str, int]]:
        facts = case_facts(case, self.knowledge)
        items: list[Item] = []
        skipped: dict[str, int] = {}
        for t in self.templates:
            if t.sources and case.source.value not in t.sources:
                continue
            missing = [r for r in t.requires if lookup(facts, r) is None]
            if missing:
                key = f"{t.id}:missing_{missing[0]}"
                skipped[key] = skipped.get(key, 0) + 1
                continue
            try:
                item = self._item(t, case, facts)
            except jinja2.TemplateError as exc:
                key = f"{t.id}:render_error:{type(exc).__name__}"
                skipped[key] = skipped.get(key, 0) + 1
                continue
            if item is not None:
                items.append(item)
        return items, skipped

    def _item(self, t: Template, case: Case, facts: dict[str, Any]) -> Item | None:
        ctx = self.render(t.context, facts) if t.context else ""
        question = self.render(t.question, facts)
        answer = self.render(t.answer, facts)
        images = [lookup(facts, sel) for sel in t.images]
        used = {r: lookup(facts, r) for r in t.requires}
        seed = int(content_hash([self.params.seed, case.case_id, t.id, t.version], 8), 16)
        options: list[str] = []
        answer_index = None
        if t.format == ItemFormat.mcq and t.distractors is not None:
            pool = self.distractor_pool(t.distractors, facts, answer)
            rng = random.Random(seed)
            rng.shuffle(pool)
            chosen = pool[: self.params.n_options - 1]
            n = self.mcq_counter.get(t.id, int(content_hash(t.id, 4), 16))
            answer_index = n % (len(chosen) + 1)
            self.mcq_counter[t.id] = n + 1
            options = chosen[:answer_index] + [answer] + chosen[answer_index:]
        turns = [Turn(role=tt["role"], text=self.render(tt["text"], facts)) for tt in t.turns]  # type: ignore[arg-type]
        body = {
            "case_id": case.case_id, "template": t.id, "version": t.version, "question": question,
            "options": options, "answer": answer, "context": ctx, "images": images,
            "turns": [x.model_dump() for x in turns],
        }
        return Item(
            item_id="itm-" + content_hash(body), case_id=case.case_id, source=case.source, task_type=t.task_type,
            format=t.format, question=question, options=options, answer=answer, answer_index=answer_index,
            reference_answer=self.render(t.reference_answer, facts) if t.reference_answer else None,
            rationale=self.render(t.rationale, facts) if t.rationale else None, turns=turns,
            images=[i for i in images if i], context=ctx, visual_dims=t.visual_dims, reasoning_dims=t.reasoning_dims,
            template_id=t.id, facts={k: v for k, v in used.items() if not str(k).startswith("image")},
            generator=Generator(kind="template", template_id=t.id, template_version=str(t.version), seed=seed),
            license=case.license, attribution=case.attribution, status="draft",
        )
