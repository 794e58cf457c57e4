"""The contract every LLM step is written on, as distilabel's tasks are: a step turns one typed input into one
typed reply through one versioned prompt.

A step declares, and only declares:

- ``name`` and ``version`` (bump the version when what the step does with a reply changes);
- ``prompt_name``: the YAML file under ``templates/prompts`` it renders (its id and version travel with it);
- ``params_model``: its own settings (a ``StepParams``), read by field name from whatever the stage passes (its
  params section, usually), so a step picks the settings it needs and no one copies them for it;
- ``reply_model``: the pydantic model of the answer (None: the reply is free text);
- ``values(inp)``: what the prompt is rendered with; ``check(inp, reply)``: why a well-formed reply is still
  unusable; and, when it needs them, ``messages`` (images attached) and ``sampling`` (temperature, seed).

The base does the rest the same way for every step: it renders the prompt, asks the project's client (its cache,
retries and schema validation), parses the reply into the reply model, and returns a ``StepOutcome``, the project's
one ``Outcome`` with the reply as its value and the provenance (step, version, prompt id and version, model, cache
key, the step's params) the base fills in itself. A
failed call or an unusable reply is an outcome too, never an exception: it keeps the raw input and the raw reply
text, so whoever tunes the prompt sees exactly what the model said to what.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from curation.llm.client import PROMPTS_DIR, LLMClient, Prompt, Request, Result, load_prompt
from curation.report import Kind, Outcome

In = TypeVar("In")
Out = TypeVar("Out")
Reply = TypeVar("Reply", covariant=True)

UNPARSABLE = "unparsable_reply"


class StepParams(BaseModel):
    """A step's own settings. Fields are read by name (or ``validation_alias``) from the object a stage passes, its
    params section say, and everything else there is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


@dataclass(frozen=True)
class Provenance:
    """Who answered what, recorded by the base from the step's own fields and the client's answer."""

    step: str
    step_version: int
    prompt_id: str
    prompt_version: int
    model: str  # as the endpoint named the model that answered (the requested one when it names none)
    requested_model: str  # the model the client asked for
    cache_key: str
    cached: bool
    params: dict[str, Any]


@dataclass(frozen=True)
class StepOutcome(Outcome[Reply]):
    """The ``Outcome`` of an LLM step: the typed reply as ``value``, the provenance the base recorded, and the raw
    reply text beside the raw input (kept on failures too, as distilabel keeps a failed row with its raw output)."""

    provenance: Provenance | None = None
    raw_reply: tuple[str, ...] = ()

    @property
    def origin(self) -> Provenance:
        if self.provenance is None:  # every outcome a step makes has one
            raise ValueError("an outcome made outside a step has no provenance")
        return self.provenance


class LLMStep(ABC, Generic[In, Out]):
    """One LLM step: see the module docstring for what a subclass declares."""

    name: ClassVar[str]
    version: ClassVar[int]
    prompt_name: ClassVar[str]
    params_model: ClassVar[type[StepParams]] = StepParams
    reply_model: ClassVar[type[BaseModel] | None] = None

    params: StepParams

    def __init__(self, params: object = None, prompts: str | Path | Prompt = PROMPTS_DIR) -> None:
        """``params``: the step's params, or an object (a params section) to read them from; ``prompts``: the
        prompts folder, or the step's prompt already loaded from it."""
        if isinstance(params, self.params_model):
            self.params = params
        else:
            self.params = self.params_model.model_validate({} if params is None else params, from_attributes=True)
        self.prompt = prompts if isinstance(prompts, Prompt) else load_prompt(self.prompt_name, prompts)

    # -- what a step declares --------------------------------------------------------------------------------
    @abstractmethod
    def values(self, inp: In) -> dict[str, Any]:
        """The values the prompt's templates are rendered with."""

    def messages(self, inp: In) -> list[dict[str, Any]]:
        """The chat messages for ``inp``: the rendered prompt (a step that shows images attaches them here)."""
        return self.prompt.messages(**self.values(inp))

    def sampling(self, inp: In) -> dict[str, Any]:
        """Request settings other than the prompt's (``temperature``, ``seed``); none by default."""
        return {}

    def check(self, inp: In, reply: Out) -> str | None:
        """Why a reply that fits the schema is still unusable for ``inp`` (a short code), or None."""
        return None

    def input_id(self, inp: In) -> str:
        """How failure logs name ``inp``."""
        return ""

    # -- what the base does ------------------------------------------------------------------------------------
    def parse(self, value: Any) -> Out:
        """The reply the client validated against the prompt's schema, as the step's typed reply."""
        if self.reply_model is None:
            return cast(Out, value)
        return cast(Out, self.reply_model.model_validate(value))

    def request(self, inp: In) -> Request:
        def check(value: Any) -> str | None:
            try:
                reply = self.parse(value)
            except ValidationError:
                return UNPARSABLE
            return self.check(inp, reply)

        return Request(messages=self.messages(inp), prompt_id=self.prompt.id, prompt_version=self.prompt.version,
                       schema=self.prompt.response_schema, check=check, max_tokens=self.prompt.max_tokens,
                       **self.sampling(inp))

    def provenance(self, res: Result, requested_model: str) -> Provenance:
        return Provenance(step=self.name, step_version=self.version, prompt_id=self.prompt.id,
                          prompt_version=self.prompt.version, model=res.model or requested_model,
                          requested_model=requested_model, cache_key=res.key, cached=res.cached,
                          params=self.params.model_dump(mode="json"))

    def outcome(self, inp: In, res: Result, requested_model: str) -> StepOutcome[Out]:
        """The client's answer to ``inp``'s request as an outcome: the typed reply, or the failure with the raw
        input and reply."""
        prov = self.provenance(res, requested_model)
        raw = tuple(res.texts)
        if res.ok:
            try:
                return StepOutcome(Kind.ok, _value=self.parse(res.value), provenance=prov, raw_input=inp, raw_reply=raw)
            except ValidationError:
                return StepOutcome(Kind.failed, UNPARSABLE, provenance=prov, raw_input=inp, raw_reply=raw)
        return StepOutcome(Kind.failed, res.error or "unknown", res.error_detail, provenance=prov, raw_input=inp,
                           raw_reply=raw)

    def run(self, client: LLMClient, inputs: Sequence[In]) -> list[StepOutcome[Out]]:
        """One outcome per input, in order (the requests go out together, bounded by the client)."""
        return run_steps(client, [(self, inp) for inp in inputs])


def run_steps(client: LLMClient, jobs: Sequence[tuple[LLMStep[Any, Any], Any]]) -> list[StepOutcome[Any]]:
    """Several steps' inputs in one batch of requests (a stage that runs every step on every item); one outcome per
    job, in order."""
    results = client.run([step.request(inp) for step, inp in jobs])
    return [step.outcome(inp, res, client.model) for (step, inp), res in zip(jobs, results, strict=True)]
