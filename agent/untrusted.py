"""Content from outside (web pages, files, tool and MCP output) must not speak in the model's
chat-template tokens. Self-hosted OpenAI-compatible servers render messages
into one prompt string; a page containing `<|im_start|>system` could then open a turn of its own.
Every such token is rewritten to an inert bracket form before any provider sees it."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.messages import Message
    from agent.tools.registry import Toolset

# Toolsets whose output is outside content: files, commands, web pages (local), other MCP
# servers' tools, and sub-agents (which may have read any of these).
OUTSIDE_TOOLSETS = frozenset({"local", "mcp", "subagents"})

# ChatML / Llama 3 / Phi / most: <|im_start|>, <|start_header_id|>, <|eot_id|>, <|endoftext|> …;
# DeepSeek's full-width bars <｜begin▁of▁sentence｜>; Gemma's turn tags; Llama 2 / Mistral markers.
_PIPE_TOKENS = re.compile(r"<\s*[|｜]\s*([^<>|｜\n]{1,64}?)\s*[|｜]\s*>")
_TAG_TOKENS = re.compile(r"<\s*(/?)\s*(start_of_turn|end_of_turn|s|bos|eos|SYS)\s*>", re.IGNORECASE)
_SYS_TOKENS = re.compile(r"<<\s*(/?)\s*SYS\s*>>")
_INST_TOKENS = re.compile(r"\[\s*(/?)\s*INST\s*\]")


def defuse_control_tokens(text: str) -> str:
    """`<|im_start|>` → `[im_start]`, `<start_of_turn>` → `[start_of_turn]`, `[INST]` → `(INST)` …"""
    if "<" not in text and "[" not in text:
        return text
    text = _PIPE_TOKENS.sub(lambda m: f"[{m.group(1)}]", text)
    text = _SYS_TOKENS.sub(lambda m: f"({m.group(1)}SYS)", text)
    text = _TAG_TOKENS.sub(lambda m: f"[{m.group(1)}{m.group(2)}]", text)
    return _INST_TOKENS.sub(lambda m: f"({m.group(1)}INST)", text)


# What to name as the source of a tool's outside content on an approval card.
_SOURCE_ARGS = {"read_file": "path", "web_fetch": "url", "exec_command": "command"}


def outside_sources(messages: list[Message], tools: Toolset, limit: int = 3) -> list[str]:
    """What outside content the turn read since the user's last message (files, URLs, command
    output, other MCP servers' tools), newest first: an action proposed now may follow it."""
    calls = {c.id: c for m in messages if m.role == "assistant" for c in m.tool_calls}
    found: list[str] = []
    for msg in reversed(messages):
        if msg.role == "user" and not msg.meta.get("internal_retry"):
            break
        for result in msg.tool_results:
            outside = "<untrusted-content" in result.content or (
                result.name in tools and tools.get(result.name).spec.toolset in OUTSIDE_TOOLSETS
            )
            if not outside:
                continue
            call = calls.get(result.call_id)
            arg = _SOURCE_ARGS.get(result.name)
            value = str((call.arguments or {}).get(arg, "")) if call is not None and arg else ""
            label = f"{result.name}: {value[:120]}" if value else result.name
            if label not in found:
                found.append(label)
    return found[:limit]


def read_outside_content(messages: list[Message], tools: Toolset) -> bool:
    """True when, since the user's last message, a tool result brought in outside content: what
    the model does next may follow that content's words rather than the user's (memory poisoning)."""
    for msg in reversed(messages):
        if msg.role == "user" and not msg.meta.get("internal_retry"):
            return False
        for result in msg.tool_results:
            if "<untrusted-content" in result.content:
                return True
            if result.name in tools and tools.get(result.name).spec.toolset in OUTSIDE_TOOLSETS:
                return True
    return False
