"""The one LLM client (``client``), the image parts of a chat message (``images``) and the step contract every
LLM step of generate, quality and evaluate is written on (``step``).

The client's names are re-exported here: ``from curation.llm import LLMClient`` is how stages and tests ask for it.
"""

from curation.llm.client import (
    PROMPTS_DIR,
    RETRYABLE,
    Cache,
    Check,
    LLMClient,
    Prompt,
    Request,
    Result,
    Usage,
    load_prompt,
    model_client,
    not_configured,
)

__all__ = ["PROMPTS_DIR", "RETRYABLE", "Cache", "Check", "LLMClient", "Prompt", "Request", "Result", "Usage",
           "load_prompt", "model_client", "not_configured"]
