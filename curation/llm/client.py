"""One LLM client for the whole toolkit: any OpenAI-compatible endpoint through the ``openai`` package.

- async with bounded concurrency (``llm.concurrency``);
- bounded retries with exponential backoff on 429, 5xx, timeouts and dropped connections;
- a persistent content-addressed cache: the key is the model, the messages, the sampling parameters and the
  prompt id and version, so a re-run makes no calls; every entry carries a checksum and a damaged entry is
  reported and refetched, never used;
- token and cost accounting (``Usage``) that stages put in their reports;
- answers validated against a JSON schema (plus an optional check) before anyone uses them; a malformed
  answer becomes a failed ``Result`` holding the raw text.

Prompts are YAML files under ``templates/prompts``: an id, a version, Jinja2 ``system`` and ``user`` texts and
the JSON schema of the answer.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import ssl
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jinja2
import jsonschema
import openai
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from curation.errors import ParamsError, validation_message
from curation.jsonio import content_hash
from curation.params import LlmParams, ModelSpec
from curation.records import atomic_open

PROMPTS_DIR = Path("templates/prompts")
Check = Callable[[Any], str | None]  # returns a reason when the parsed answer is unusable


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    version: int
    system: str
    user: str
    response_schema: dict[str, Any] | None = None
    max_tokens: int = 512

    def messages(self, **values: Any) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": _compile(self.system).render(**values).strip()},
            {"role": "user", "content": _compile(self.user).render(**values).strip()},
        ]


_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)


@functools.lru_cache(maxsize=256)
def _compile(text: str) -> jinja2.Template:
    return _ENV.from_string(text)


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """One checked validator per schema: ``jsonschema.validate`` re-checks the schema on every answer."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _schema_error(value: Any, schema: dict[str, Any]) -> jsonschema.ValidationError | None:
    """The error ``jsonschema.validate`` would raise, or None."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    return jsonschema.exceptions.best_match(validator.iter_errors(value))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default verifying context, built once per process: loading the CA bundle costs about 0.15 s, which the
    transport otherwise pays again on every ``run``."""
    return httpx.create_ssl_context()


def _without_none(value: Any) -> Any:
    """The JSON body as ``ChatCompletion.model_dump(mode="json", exclude_none=True)`` gives it, without building
    the model (the cache holds this form)."""
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


def load_prompt(name: str, folder: str | Path = PROMPTS_DIR) -> Prompt:
    path = Path(folder) / f"{name}.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        return Prompt.model_validate(raw)
    except OSError:
        raise ParamsError("prompt file not found", path) from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML ({exc.__class__.__name__})", path) from None
    except ValidationError as exc:
        raise ParamsError(validation_message(exc), path) from None


@dataclass
class Request:
    messages: list[dict[str, Any]]
    prompt_id: str = "adhoc"
    prompt_version: int = 0
    schema: dict[str, Any] | None = None
    check: Check | None = None
    temperature: float | None = None
    max_tokens: int = 512
    n: int = 1
    model: str | None = None
    seed: int | None = None

    @classmethod
    def from_prompt(cls, prompt: Prompt, check: Check | None = None, **values: Any) -> Request:
        return cls(messages=prompt.messages(**values), prompt_id=prompt.id, prompt_version=prompt.version,
                   schema=prompt.response_schema, check=check, max_tokens=prompt.max_tokens)


@dataclass
class Result:
    ok: bool
    key: str
    texts: list[str] = field(default_factory=list)
    data: list[Any] = field(default_factory=list)
    error: str | None = None  # a short code (malformed_json, schema_violation, rejected, http_500 ...)
    error_detail: str = ""  # what in the reply it was about: the schema path, the check's reason
    cached: bool = False
    model: str = ""

    @property
    def text(self) -> str | None:
        return self.texts[0] if self.texts else None

    @property
    def value(self) -> Any:
        return self.data[0] if self.data else None


@dataclass
class Usage:
    calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    failures: Counter[str] = field(default_factory=Counter)

    def as_metrics(self) -> dict[str, Any]:
        return {
            "llm_calls": self.calls, "llm_cache_hits": self.cache_hits, "llm_retries": self.retries,
            "llm_prompt_tokens": self.prompt_tokens, "llm_completion_tokens": self.completion_tokens,
            "llm_cost_usd": round(self.cost_usd, 6), "llm_failures": dict(sorted(self.failures.items())),
        }


def not_configured(params: LlmParams) -> str | None:
    """Why the LLM steps cannot run, or None when an endpoint is configured."""
    base_url = os.environ.get("CURATION_LLM_BASE_URL") or params.base_url
    if not base_url:
        return "no LLM endpoint configured (llm.base_url in params.yaml or CURATION_LLM_BASE_URL)"
    if not (os.environ.get("CURATION_LLM_MODEL") or params.model):
        return "no LLM model configured (llm.model in params.yaml or CURATION_LLM_MODEL)"
    return None


class Cache:
    """One JSON file per key under ``root/ab/abcd...json``; each holds the key and a checksum of its body."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.corrupt = 0

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        if not path.exists():
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            body = entry["body"]
            if entry.get("key") != key or entry.get("sha256") != content_hash(body, 64):
                raise ValueError("checksum mismatch")
            return body
        except (OSError, ValueError, KeyError, TypeError):
            self.corrupt += 1
            return None

    def put(self, key: str, body: dict[str, Any]) -> None:
        path = self.path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # no fsync: a torn entry after a crash fails its checksum and is refetched
        with atomic_open(path, "w", durable=False) as fh:
            json.dump({"key": key, "sha256": content_hash(body, 64), "body": body}, fh, sort_keys=True)


RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)


class LLMClient:
    def __init__(self, params: LlmParams, cache_dir: str | Path | None = None) -> None:
        reason = not_configured(params)
        if reason:
            raise ParamsError(reason, "params.yaml")
        self.params = params
        self.base_url = os.environ.get("CURATION_LLM_BASE_URL") or params.base_url
        self.model = os.environ.get("CURATION_LLM_MODEL") or params.model or ""
        self.api_key = os.environ.get(params.api_key_env) or "not-needed"
        self.cache = Cache(cache_dir or params.cache_dir)
        self.usage = Usage()
        self._tls = _tls_context()  # set-up happens here, once, not in the first call of a run

    # -- keys and accounting -------------------------------------------------------------------------
    def key(self, req: Request) -> str:
        return content_hash({
            "model": req.model or self.model, "messages": req.messages,
            "temperature": self.params.temperature if req.temperature is None else req.temperature,
            "max_tokens": req.max_tokens, "n": req.n, "seed": req.seed, "schema": req.schema,
            "prompt": [req.prompt_id, req.prompt_version],
        }, 64)

    def _account(self, body: dict[str, Any]) -> None:
        usage = body.get("usage") or {}
        p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        self.usage.prompt_tokens += p
        self.usage.completion_tokens += c
        self.usage.cost_usd += (p / 1000 * self.params.price_per_1k_prompt
                                + c / 1000 * self.params.price_per_1k_completion)

    # -- parsing ----------------------------------------------------------------------------------------
    @staticmethod
    def _parse(text: str, req: Request) -> tuple[Any, str | None, str]:
        """The reply's value, or None with a failure code and its detail."""
        if req.schema is None and req.check is None:
            return text, None, ""
        value: Any = text
        if req.schema is not None:
            stripped = text.strip()
            if stripped.startswith("```"):
                stripped = stripped.strip("`").removeprefix("json").strip()
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                return None, "malformed_json", ""
            exc = _schema_error(value, req.schema)
            if exc is not None:
                where = "/".join(map(str, exc.absolute_path)) or "answer"
                return None, "schema_violation", where
        if req.check is not None:
            reason = req.check(value)
            if reason:
                return None, "rejected", reason
        return value, None, ""

    def _interpret(self, body: dict[str, Any], req: Request, key: str, cached: bool) -> Result:
        texts = [(c.get("message") or {}).get("content") or "" for c in body.get("choices", [])]
        if not texts:
            return Result(False, key, error="empty_response", cached=cached, model=body.get("model", ""))
        values, errors = [], []
        for t in texts:
            v, err, detail = self._parse(t, req)
            values.append(v)
            if err:
                errors.append((err, detail))
        if errors and len(errors) == len(texts):
            return Result(False, key, texts=texts, error=errors[0][0], error_detail=errors[0][1], cached=cached,
                          model=body.get("model", ""))
        return Result(True, key, texts=texts, data=values, cached=cached, model=body.get("model", ""))

    # -- calling ----------------------------------------------------------------------------------------
    async def _call(self, client: openai.AsyncOpenAI, sem: asyncio.Semaphore, req: Request) -> Result:
        key = self.key(req)
        hit = self.cache.get(key)
        if hit is not None:
            self.usage.cache_hits += 1
            return self._interpret(hit, req, key, cached=True)
        kwargs: dict[str, Any] = {
            "model": req.model or self.model, "messages": req.messages, "max_tokens": req.max_tokens,
            "temperature": self.params.temperature if req.temperature is None else req.temperature,
        }
        if req.n != 1:
            kwargs["n"] = req.n
        if req.seed is not None:
            kwargs["seed"] = req.seed
        if req.schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {
                "name": req.prompt_id.replace("-", "_") or "answer", "schema": req.schema}}
        rng = random.Random(key)
        last = "unknown"
        for attempt in range(self.params.max_retries + 1):
            if attempt:
                self.usage.retries += 1
                delay = min(self.params.backoff_max_s, self.params.backoff_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay * (0.5 + rng.random() / 2))
            try:
                async with sem:
                    self.usage.calls += 1
                    # the body is plain JSON already: posting it skips the SDK's per-call typed transform of the
                    # request and model building of the answer (most of the client's CPU per call)
                    raw = await client.post("/chat/completions", body=kwargs, cast_to=object)
            except RETRYABLE as exc:
                last = _reason(exc)
                continue
            except openai.APIStatusError as exc:
                last = f"http_{exc.status_code}"
                break
            except openai.OpenAIError as exc:
                last = type(exc).__name__
                break
            body = _without_none(raw) if isinstance(raw, dict) else {}
            self._account(body)
            result = self._interpret(body, req, key, cached=False)
            if result.ok:
                self.cache.put(key, body)
            else:
                self.usage.failures[result.error or "invalid"] += 1
            return result
        self.usage.failures[last] += 1
        return Result(False, key, error=last, model=req.model or self.model)

    async def arun(self, requests: Sequence[Request]) -> list[Result]:
        sem = asyncio.Semaphore(self.params.concurrency)
        # the aiohttp transport keeps per-call overhead flat at high concurrency (httpx's pool does not)
        pool = httpx.Limits(max_connections=self.params.concurrency,
                            max_keepalive_connections=self.params.concurrency)
        async with openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0,
                                      timeout=self.params.timeout_s,
                                      http_client=openai.DefaultAioHttpClient(limits=pool, verify=self._tls)) as client:
            return list(await asyncio.gather(*(self._call(client, sem, r) for r in requests)))

    def run(self, requests: Iterable[Request]) -> list[Result]:
        """Answer ``requests`` in order; blocks. Call it from synchronous code only."""
        reqs = list(requests)
        if not reqs:
            return []
        return asyncio.run(self.arun(reqs))


def model_client(llm: LlmParams, spec: ModelSpec | None = None, temperature: float | None = None) -> LLMClient:
    """A client for ``llm``, or for one configured model ``spec`` (its endpoint, model and key over ``llm``'s), at
    ``temperature`` when given."""
    p = llm.model_copy()
    if spec is not None:
        p.base_url, p.model, p.api_key_env = spec.base_url or llm.base_url, spec.model, spec.api_key_env
    if temperature is not None:
        p.temperature = temperature
    return LLMClient(p)


def _reason(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        return f"http_{exc.status_code}"
    return "connection_error"
