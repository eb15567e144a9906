"""Model metadata inferred from a model's name: context window and reasoning support.

A configured `context_window` always wins; these tables are the fallback (seed table from
WyckoffAgent's `model_metadata.py`, first match wins), and anything unknown gets 64K.
"""

from __future__ import annotations

import re

DEFAULT_CONTEXT_WINDOW = 65_536

# Order matters: specific families before the generic ones they would also match.
_CONTEXT_TABLE: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), window)
    for pattern, window in (
        (r"gemini-2", 1_048_576),
        (r"gemini-3", 128_000),
        (r"claude", 200_000),
        (r"minimax-m3", 1_000_000),
        (r"gpt-4o|gpt-4\.1|gpt-4|(?:^|[/:])o[134](?:\b|-)|gpt-5|reasoning", 128_000),
        (r"gpt-3\.5", 16_384),
        (r"deepseek", 65_536),
        (r"qwen|kimi|moonshot|minimax|mistral", 128_000),
        (r"longcat|step", 65_536),
    )
)

# Families that emit a separate reasoning/thinking stream (Anthropic thinking blocks, OpenAI
# o-series, DeepSeek `reasoning_content`, Qwen QwQ/Qwen3, Kimi thinking, Gemini 2.5+).
_REASONING = re.compile(
    r"claude-(?:3-7|[a-z]+-4|4|sonnet-4|opus-4|haiku-4)"
    r"|(?:^|[/:])o[134](?:\b|-)|gpt-5"
    r"|deepseek-(?:reasoner|r1)|\br1\b"
    r"|qwq|qwen3|thinking|reason"
    r"|gemini-(?:2\.5|3)",
    re.IGNORECASE,
)


def infer_context_window(model_name: str) -> int:
    """Context window in tokens for `model_name` (e.g. "claude-sonnet-4-5", "openai/gpt-4o")."""
    for pattern, window in _CONTEXT_TABLE:
        if pattern.search(model_name):
            return window
    return DEFAULT_CONTEXT_WINDOW


def infer_supports_reasoning(model_name: str) -> bool:
    """Whether the model is known to produce a thinking/reasoning stream."""
    return bool(_REASONING.search(model_name))
