"""Templates (YAML + Jinja2) -> items, with seeded, balanced options from the knowledge table."""

from __future__ import annotations

import pickle
import random
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

import jinja2
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from curation.errors import ParamsError
from curation.generate import tags
from curation.generate.facts import fact_sets, known_fact, lookup
from curation.generate.presentation import deid_artefacts
from curation.generate.tags import answer_facts
from curation.generate.values import keyed
from curation.jsonio import content_hash
from curation.nlp.diagnoses import load as load_diagnoses
from curation.params import GenerateParams
from curation.schema import Case, Evidence, Generator, Item, ItemFormat, TaskType, Turn
from curation.text import plain


class _Absent(jinja2.StrictUndefined):
    """A fact a case lacks: false in a test (``{% if image_sequence %}``), an error anywhere it would be written."""

    def __bool__(self) -> bool:
        return False


class Distractors(BaseModel):
    model_config = ConfigDict(extra="forbid")
    table: str
    key: str | None = None
    # the table lists every other answer the question has (brighter or darker): the options are all of them, so two
    # may be all there are (the options gate asks three of an open set)
    closed: bool = False


class Template(BaseModel):
    """One question template. Its dimension tags are not declared here: they are computed per item (tags.py)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    version: int
    kind: Literal["visit", "pair"] = "visit"  # facts and images of one visit, or of a registered baseline/follow-up
    task_type: TaskType
    format: ItemFormat
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
            docs = yaml.safe_load(path.read_text(encoding="utf-8")) or []
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
            if t.distractors is not None and t.distractors.closed and not t.distractors.table.startswith("fact:"):
                # (a closed set is the case's own other answers, every one of them: never cut from a shared table)
                raise ParamsError(f"template {t.id}: closed distractors come from a fact (fact:...)", path)
            unknown = [r for r in [*t.requires, *t.images] if not known_fact(r)]
            if unknown:
                raise ParamsError(f"template {t.id}: unknown fact {unknown[0]} (facts.Facts lists them)", path)
            ids.add(t.id)
            out.append(t)
    return out


# the knowledge tables whose entries are lists of option texts, per key
TEXT_TABLES = ("differentials", "neighbours", "findings", "next_steps", "shared_next_step", "image_alike")


def _check_lists_of_text(knowledge: Any, path: str | Path) -> None:
    """A knowledge table an option would be drawn from holds lists of text; anything else is a one-line error here,
    not a failed item later (an unquoted "a: b" in YAML is a mapping, not a text)."""
    if not isinstance(knowledge, dict):
        raise ParamsError("knowledge table is not a mapping", path)
    for table in TEXT_TABLES:
        for key, entries in (knowledge.get(table) or {}).items():
            bad = [e for e in entries if not isinstance(e, str)] if isinstance(entries, list) else [entries]
            if bad:
                raise ParamsError(f"{table}.{key}: every entry must be text (quote one that holds ': '); "
                                  f"got {bad[0]!r}", path)


# the knowledge tables that list diagnoses by their own names (``diagnosis_aliases`` maps a differential's other
# names to them), per key
DIAGNOSIS_TABLES = ("shared_next_step", "image_alike")


def _check_named_once(knowledge: dict[str, Any], path: str | Path) -> None:
    """A table of diagnoses lists each once, by its own name: a name ``diagnosis_aliases`` maps to another is read as
    that one wherever a differential is matched, so listing it too is a twin that can drift."""
    aliases = knowledge.get("diagnosis_aliases") or {}
    for table in DIAGNOSIS_TABLES:
        for key, entries in (knowledge.get(table) or {}).items():
            for entry in entries:
                if (name := keyed(aliases, entry)) is not None:
                    raise ParamsError(f"{table}.{key}: {entry!r} is another name of {name!r} (diagnosis_aliases); "
                                      f"list the diagnosis once, by its own name", path)


def diagnosis_name(kb: dict[str, Any], name: str) -> str:
    """The diagnosis a differential's name stands for: itself, or the entry ``diagnosis_aliases`` maps it to
    ("Cerebral metastasis" -> "Cerebral metastases")."""
    return keyed(kb.get("diagnosis_aliases", {}), name) or name


def differential_next_steps(kb: dict[str, Any], dx: str | None, case_differential: list[str], answer: str,
                            need: int) -> list[str]:
    """Wrong options for a next step that fit the same history: the right first step for each diagnosis the case is
    told apart from (its differential, then the knowledge table's), so that only the image, by deciding the
    diagnosis, decides the step; the table's own wrong steps for ``dx`` only where fewer than ``need`` differentials
    have one. A name in ``diagnosis_aliases`` is looked up as the diagnosis it names ("Cerebral metastasis"); a
    diagnosis in ``shared_next_step`` of ``dx`` (its first step is right for ``dx`` too) gives no option."""
    steps = kb.get("next_steps", {})
    shared = {d.casefold() for d in keyed(kb.get("shared_next_step", {}), dx) or []}
    pool: list[str] = []
    for other in [*case_differential, *(keyed(kb.get("differentials", {}), dx) or [])]:
        name = diagnosis_name(kb, other)
        if name.casefold() in shared:
            continue
        first = keyed(steps, name)
        if first and first[0] != answer and first[0] not in pool:
            pool.append(first[0])
    # the table's own wrong steps, but none that restates a step already offered in other words ("resection of a
    # tumour" beside "resection or biopsy": two options that differ by a clause read as one)
    own = [x for x in (keyed(steps, dx) or [])[1:]
           if x not in pool and all(_word_overlap(x, y) < NEAR_DUPLICATE for y in [answer, *pool])]
    return pool if len(pool) >= need else pool + own[:need - len(pool)]  # exactly ``need``: every one is shown


NEAR_DUPLICATE = 0.5  # shared content words over the shorter option's: at or above it, two steps read as one


def _word_overlap(a: str, b: str) -> float:
    """The share of the shorter text's content words (four letters or more) that the other also has."""
    wa, wb = ({w for w in re.findall(r"[a-z]{4,}", t.lower())} for t in (a, b))
    return len(wa & wb) / max(1, min(len(wa), len(wb)))


class Skip(NamedTuple):
    """A template that made no item of a case, and why (a code: ``missing_<fact>``, ``refused_<fact>:<why>``,
    ``fact_already_asked``...)."""

    template_id: str
    reason: str

    def __str__(self) -> str:
        return f"{self.template_id}:{self.reason}"


class Engine:
    def __init__(self, params: GenerateParams) -> None:
        self.params = params
        self.templates = load_templates(params.templates_dir)
        try:
            self.knowledge = yaml.safe_load(Path(params.knowledge).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ParamsError(f"cannot read knowledge table ({exc.__class__.__name__})", params.knowledge) from None
        _check_lists_of_text(self.knowledge, params.knowledge)
        _check_named_once(self.knowledge, params.knowledge)
        self.diagnoses = load_diagnoses(params.diagnoses)
        self.kinds_asked: Counter[str] = Counter()  # the sequences asked of teaching cases so far
        self._compiled: dict[str, jinja2.Template] = {}
        self.env = jinja2.Environment(undefined=_Absent, autoescape=False, keep_trailing_newline=False)

    def render(self, text: str, facts: dict[str, Any]) -> str:
        compiled = self._compiled.get(text)
        if compiled is None:
            compiled = self._compiled[text] = self.env.from_string(text)
        return " ".join(compiled.render(**facts).split())

    def distractor_pool(self, spec: Distractors, facts: dict[str, Any], answer: str) -> tuple[list[str], int]:
        """The wrong options an item may offer, and how many of them lead the list from the case's own
        differential (those are shuffled apart from the table's, and offered first)."""
        kb = self.knowledge
        # a quoted key is literal ("'Glioblastoma'"); otherwise it names a fact
        if spec.key and spec.key.startswith("'"):
            key = spec.key.strip("'")
        else:
            key = lookup(facts, spec.key) if spec.key else None
        own: list[str] = []
        if spec.table == "case_differential_then_differentials":
            own, pool = list(facts.get("differential", [])), list(keyed(kb.get("differentials", {}), key) or [])
            # a diagnosis the image shown cannot tell from the key is a second right answer, not a wrong option
            alike = {d.casefold() for d in keyed(kb.get("image_alike", {}), key) or []}
            own, pool = ([p for p in ps if diagnosis_name(kb, p).casefold() not in alike] for ps in (own, pool))
        elif spec.table.startswith("fact:"):  # options a case's facts list (a teaching case's differential)
            value = lookup(facts, spec.table.removeprefix("fact:"))
            pool = [str(v) for v in value] if isinstance(value, list) else []
        elif spec.table == "differential_next_steps":
            pool = differential_next_steps(kb, key, facts.get("differential") or [], answer, self.params.n_options - 1)
        else:
            table = kb.get(spec.table, [])
            # a list is the pool itself; a mapping is keyed by a fact (the answer, if listed, is dropped below)
            pool = list(table) if isinstance(table, list) else list(keyed(table, key) or [])
        seen = {answer.lower()}
        out: list[str] = []
        for part in (own, pool):
            first = len(out)  # where the table's part starts: the number from the case's own differential
            for p in part:
                if p.lower() not in seen:
                    seen.add(p.lower())
                    out.append(p)
        return out, first

    def generate(self, case: Case) -> tuple[list[Item], Counter[Skip]]:
        """The items of one case: per template, from the first fact set (visit, or registered pair) that has what
        it requires; at most one item per case and answered fact. Answer letters are set by ``finalize``."""
        sets = fact_sets(case, self.knowledge, self.diagnoses, self.kinds_asked)
        items: list[Item] = []
        skipped: Counter[Skip] = Counter()
        asked: set[frozenset[str]] = set()
        answered: set[str] = set()
        for t in self.templates:
            if t.sources and case.source.value not in t.sources:
                continue
            answers = answer_facts(t.answer)
            candidates = [f for f in sets if f["kind"] == t.kind]
            facts = next((f for f in candidates if all(lookup(f, r) is not None for r in t.requires)), None)
            if facts is None:
                first = candidates[0] if candidates else {}
                missing = next((r for r in t.requires if lookup(first, r) is None), t.kind)
                refused = (first.get("refused") or {}).get(missing)  # a fact the case has but its image contradicts
                skipped[Skip(t.id, f"refused_{missing}:{refused}" if refused else f"missing_{missing}")] += 1
                continue
            if answers in asked:  # the same fact of the same case is asked once
                skipped[Skip(t.id, "fact_already_asked")] += 1
                continue
            try:
                item, why_not = self._item(t, case, facts, answers)
            except jinja2.TemplateError as exc:
                skipped[Skip(t.id, f"render_error:{type(exc).__name__}")] += 1
                continue
            if item is None:
                skipped[Skip(t.id, why_not)] += 1
                continue
            if plain(item.answer) in answered:  # two facts with one value ask the same thing twice
                skipped[Skip(t.id, "answer_already_asked")] += 1
                continue
            asked.add(answers)
            answered.add(plain(item.answer))
            items.append(item)
        return items, skipped

    def _item(self, t: Template, case: Case, facts: dict[str, Any],
              answers: frozenset[str]) -> tuple[Item | None, str]:
        ctx = self.render(t.context, facts) if t.context else ""
        question = self.render(t.question, facts)
        answer = self.render(t.answer, facts)
        shown = [lookup(facts, sel) for sel in t.images]  # an image fact is one render, or a list of them
        if not all(isinstance(ev, dict) or (isinstance(ev, list) and ev) for ev in shown):
            return None, "image_without_evidence"
        evidence = [Evidence(**e) for ev in shown for e in (ev if isinstance(ev, list) else [ev])]
        # (drawn by the source's own id where it has one, not by the case id, a keyed hash: the options do not
        # change with the project's secret)
        seed = int(content_hash([self.params.seed, case.stable_id, t.id, t.version], 8), 16)
        options: list[str] = []
        if t.format == ItemFormat.mcq and t.distractors is not None:
            # a case's own differential comes first: its author weighed those against this history, so they fit
            # it as well as the key does and only the image tells them apart; the table's fill what is left
            pool, first = self.distractor_pool(t.distractors, facts, answer)
            rng = random.Random(seed)
            head, tail = pool[:first], pool[first:]
            rng.shuffle(head)
            rng.shuffle(tail)
            pool = head + tail
            chosen = pool[: self.params.n_options - 1]
            # the key must not stand out as the longest option where the pool has a longer plausible one
            longer = [p for p in pool[len(chosen):] if len(p) > len(answer)]
            if chosen and longer and all(len(c) <= len(answer) for c in chosen):
                chosen[-1] = longer[0]
            options = [answer, *chosen]  # the answer's place is set by finalize
            if len(options) < 2:
                return None, "no_distractors"
        turns = [Turn(role=tt["role"], text=self.render(tt["text"], facts)) for tt in t.turns]  # type: ignore[arg-type]
        reference = self.render(t.reference_answer, facts) if t.reference_answer else None
        rationale = self.render(t.rationale, facts) if t.rationale else None
        shown = " ".join([ctx, question, *options, *(x.text for x in turns)])
        if deid_artefacts(" ".join([shown, reference or "", rationale or ""])):
            return None, "deid_artefact_in_text"
        if plain(answer) and plain(answer) in plain(" ".join([ctx, question])):
            return None, "answer_in_text"
        shown_templates = " ".join([t.context, *(tt["text"] for tt in t.turns)])  # a consult's turns are context
        visual, reasoning = tags.compute(t.task_type, answers, shown_templates, evidence, facts, self.knowledge)
        used = {r: lookup(facts, r) for r in t.requires if not r.startswith("image")}
        return Item(
            item_id="", case_id=case.case_id, source=case.source, task_type=t.task_type,
            format=t.format, question=question, options=options, answer=answer,
            answer_index=0 if options else None, reference_answer=reference, rationale=rationale, turns=turns,
            images=[e.image for e in evidence], evidence=evidence, context=ctx, visual_dims=visual,
            reasoning_dims=reasoning, template_id=t.id,
            facts={**used, "visit": facts.get("visit_id"), "answer_facts": sorted(answers),
                   **({"closed_options": True} if t.distractors is not None and t.distractors.closed else {})},
            generator=Generator(kind="template", template_id=t.id, template_version=str(t.version), seed=seed),
            license=case.license, attribution=case.attribution, origin=case.origin,
            pixels_altered=any(_masked(case, e.series_id) for e in evidence if e.target == "figure"), status="draft",
        ), ""

    def finalize(self, items: list[Item]) -> list[Item]:
        """Place each MCQ's answer so that every letter is keyed equally often within a template (the least-used
        letter the item has, in the order of a per-case hash, so the letter does not depend on which cases were
        generated first), then give every item its content id."""
        by_template: dict[str, list[Item]] = {}
        for it in items:
            if _keyed(it):
                by_template.setdefault(it.template_id or "", []).append(it)
        for group in by_template.values():
            for it, at in zip(group, _letters_in_made_order([(self._letter_order(it), len(it.options))
                                                             for it in group]), strict=True):
                _place(it, at)
        for it in items:
            _identify(it)
        return items

    def finalize_stream(self, items: Iterable[Item], spill: Path) -> Iterator[Item]:
        """``finalize`` in two passes over a spill file, so memory does not grow with the number of items: the
        first writes the drafts to ``spill`` and keeps only each MCQ's sort key, the second reads them back in the
        order made and places each answer by the letter its template's keys give it. Same items, same order."""
        keys: dict[str, list[tuple[str, int]]] = {}  # template -> (sort key, options) of its MCQs, in the order made
        with spill.open("wb") as fh:
            for it in items:
                if _keyed(it):
                    keys.setdefault(it.template_id or "", []).append((self._letter_order(it), len(it.options)))
                pickle.dump(it, fh, protocol=pickle.HIGHEST_PROTOCOL)  # exact round trip of every field
        letters = {t: _letters_in_made_order(ks) for t, ks in keys.items()}
        del keys
        seen: Counter[str] = Counter()
        try:
            with spill.open("rb") as fh:
                while True:
                    try:
                        it = pickle.load(fh)  # noqa: S301 - our own spill file, written just above
                    except EOFError:
                        break
                    if _keyed(it):
                        t = it.template_id or ""
                        _place(it, letters[t][seen[t]])
                        seen[t] += 1
                    _identify(it)
                    yield it
        finally:
            spill.unlink(missing_ok=True)

    def _letter_order(self, it: Item) -> str:
        return content_hash([self.params.seed, it.template_id, it.stable_id])


def _keyed(it: Item) -> bool:
    return bool(it.options) and it.answer_index is not None


def _letters_in_made_order(keyed: list[tuple[str, int]]) -> list[int]:
    """The answer letter of each MCQ of a template, in the order made, from each one's (sort key, number of
    options): :func:`_letters` over the group sorted by key (a stable sort: ties keep the order made)."""
    order = sorted(range(len(keyed)), key=lambda k: keyed[k][0])
    at = [0] * len(keyed)
    for k, letter in zip(order, _letters([keyed[k][1] for k in order]), strict=True):
        at[k] = letter
    return at


def _letters(widths: list[int]) -> list[int]:
    """The answer letter of each MCQ of a template, in its sorted order, given how many options each has: the
    least-used letter among the item's own, ties going round robin from ``n mod options``. When every item has
    the same number of options this is plain round robin; when some have fewer (a template whose distractors
    ran short), the letters they lack are not left to pile up on the ones they share."""
    used: Counter[int] = Counter()
    out = []
    for n, width in enumerate(widths):
        at = min(range(width), key=lambda k, n=n, width=width: (used[k], (k - n) % width))
        used[at] += 1
        out.append(at)
    return out


def _place(it: Item, at: int) -> None:
    """The answer goes to letter ``at``, the other options keeping their order."""
    others = [o for k, o in enumerate(it.options) if k != it.answer_index]
    it.options = others[:at] + [it.answer] + others[at:]
    it.answer_index = at


def _masked(case: Case, figure_id: str | None) -> bool:
    """Whether de-identification masked burned-in text on figure ``figure_id`` of ``case``."""
    fig = next((f for f in case.figures if f.figure_id == figure_id), None)
    return fig is not None and fig.pixels_masked


def _identify(it: Item) -> None:
    body = {"case_id": it.case_id, "template": it.template_id, "version": it.generator.template_version,
            "question": it.question, "options": it.options, "answer": it.answer, "context": it.context,
            "images": it.images, "turns": [x.model_dump() for x in it.turns]}
    it.item_id = "itm-" + content_hash(body)
