"""Scripted answers for the generation prompts, served by the local OpenAI-compatible test server.

Each answer is derived from the request text, the way a well-behaved model would answer: it lets the tests
check that every augmentation step is wired end to end and that validation rejects what it should.
"""

from __future__ import annotations

import json
import re
from typing import Any

from curation.testing.openai_server import Reply, rules, user_text

POOL = ["progressive supranuclear palsy", "normal pressure hydrocephalus", "Creutzfeldt-Jakob disease",
        "cerebral amyloid angiopathy", "posterior reversible encephalopathy syndrome", "neurosarcoidosis"]


def _field(text: str, name: str) -> str:
    m = re.search(rf"^{name}[^:]*: (.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def paraphrase(body: dict[str, Any], m: re.Match[str]) -> str:
    q = _field(user_text(body), "Question")
    return json.dumps({"question": f"Looking at the study provided, {q[0].lower()}{q[1:]}"})


def distractors(body: dict[str, Any], m: re.Match[str]) -> str:
    n = int(m.group(1))
    answer = _field(user_text(body), "Correct answer").lower()
    return json.dumps({"distractors": [p for p in POOL if p.lower() != answer][:n]})


def rationale(body: dict[str, Any], m: re.Match[str]) -> str:
    answer = _field(user_text(body), "Correct answer")
    return json.dumps({"rationale": f"The imaging and clinical facts given point to {answer}; the alternatives "
                                    "do not explain the combination of findings."})


def dialogue(body: dict[str, Any], m: re.Match[str]) -> str:
    answer = _field(user_text(body), "Final diagnosis")
    return json.dumps({"turns": [
        {"role": "clinician", "text": "Could you look at this MRI with me?"},
        {"role": "model", "text": "Yes. There is a focal abnormality I would like to correlate with the history."},
        {"role": "clinician", "text": "What is your leading diagnosis?"},
        {"role": "model", "text": f"My leading diagnosis is {answer}."},
    ]})


def caption_questions(body: dict[str, Any], m: re.Match[str]) -> str:
    n = int(m.group(1))
    qs = [{"task_type": "lesion_recognition", "question": f"Question {k + 1}: what does the arrow indicate?",
           "options": ["infarct", "haemorrhage", "tumour", "abscess", "normal variant"], "answer_index": k % 5,
           "rationale": "The figure shows the lesion described in the caption.",
           "visual_dims": ["small_object"], "reasoning_dims": ["long_tail"]} for k in range(n)]
    return json.dumps({"questions": qs})


def generation_responder(**overrides: Any) -> Any:
    """Answers every generation prompt; ``overrides`` maps a prompt's task regex to another answer."""
    table = [
        (r"Task: paraphrase", paraphrase),
        (r"Task: write (\d+) harder distractors", distractors),
        (r"Task: write the reference rationale", rationale),
        (r"Task: draft a consult dialogue", dialogue),
        (r"Task: write up to (\d+) questions", caption_questions),
    ]
    table = [(k, (lambda b, mm, r=v: r if isinstance(r, Reply) else r)) for k, v in overrides.items()] + table
    return rules(table, default=Reply(status=400, content="unknown prompt"))
